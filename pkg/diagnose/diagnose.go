// Package diagnose explains, in plain words, what went wrong in one
// conversation session: tool calls that never got a result (orphaned),
// failing tools, the same call repeated, model-service errors with their
// HTTP status (from the error log rows tagged with the session's routing
// key), slow turns and how much of the context budget the history uses.
package diagnose

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"agent/pkg/clip"
	"agent/pkg/errlog"
	"agent/pkg/llm"
	"agent/pkg/session"
)

// Defaults of Input.
const (
	DefaultSlowTurn      = 60 * time.Second
	DefaultContextBudget = 24000 // agent.DefaultContextBudget
	DefaultWindow        = 40    // agent.DefaultWindowMessages
)

// Message is a stored message with its time.
type Message struct {
	llm.Message
	At time.Time
}

// Input is one session and what was logged about it.
type Input struct {
	Session       session.Summary
	Messages      []Message
	Errors        []errlog.Entry // error_log rows with key = the session's key
	SlowTurn      time.Duration
	ContextBudget int
	Window        int
}

// Load reads session id and its error log rows.
func Load(ctx context.Context, db *sql.DB, sessions *session.Store, id int64) (Input, error) {
	sum, err := sessions.Summarize(ctx, id)
	if err != nil {
		return Input{}, err
	}
	seqs, msgs, err := sessions.Range(ctx, id, 0, math.MaxInt64)
	if err != nil {
		return Input{}, err
	}
	times := map[int64]time.Time{}
	rows, err := db.QueryContext(ctx, `SELECT seq, created_at FROM session_messages WHERE session_id = ?`, id)
	if err != nil {
		return Input{}, fmt.Errorf("diagnose: message times: %w", err)
	}
	for rows.Next() {
		var seq, at int64
		if err := rows.Scan(&seq, &at); err != nil {
			rows.Close()
			return Input{}, fmt.Errorf("diagnose: message times: %w", err)
		}
		times[seq] = time.UnixMilli(at).UTC()
	}
	rows.Close()
	in := Input{Session: sum}
	for i, m := range msgs {
		in.Messages = append(in.Messages, Message{Message: m, At: times[seqs[i]]})
	}
	to := sum.LastActivity.Add(10 * time.Minute) // a turn failing at the end logs after its last message
	if !sum.ClosedAt.IsZero() {
		to = sum.ClosedAt.Add(10 * time.Minute)
	}
	in.Errors, err = errlog.ForKey(ctx, db, string(sum.Key), sum.CreatedAt.Add(-time.Minute), to, 200)
	if err != nil {
		return Input{}, err
	}
	return in, nil
}

// Finding is one thing that went wrong.
type Finding struct {
	Kind string // orphaned_calls, tool_errors, repeated_calls, llm_errors, slow_turns, context, logged
	Text string
}

// Analyze lists what went wrong, most serious first.
func Analyze(in Input) []Finding {
	if in.SlowTurn <= 0 {
		in.SlowTurn = DefaultSlowTurn
	}
	if in.ContextBudget <= 0 {
		in.ContextBudget = DefaultContextBudget
	}
	if in.Window <= 0 {
		in.Window = DefaultWindow
	}
	var out []Finding
	for _, f := range []func(Input) []Finding{llmErrors, orphans, toolErrors, repeats, slowTurns, contextSize, otherLogged} {
		out = append(out, f(in)...)
	}
	return out
}

// Explain is the whole diagnosis as text for people and the model.
func Explain(in Input) string {
	s := in.Session
	var b strings.Builder
	state := "open"
	if !s.Open() {
		state = "closed " + s.ClosedAt.Format("2006-01-02 15:04")
	}
	fmt.Fprintf(&b, "Session #%d (%s), %s, %d messages, %s to %s.\n", s.ID, s.Key, state, s.Messages,
		s.CreatedAt.Format("2006-01-02 15:04"), s.LastActivity.Format("2006-01-02 15:04"))
	fs := Analyze(in)
	problems := 0
	for _, f := range fs {
		if f.Kind != "context" {
			problems++
		}
	}
	if problems == 0 {
		b.WriteString("Nothing went wrong that I can see: every tool call got a result, no tool failed, the model service answered every time.\n")
	}
	for _, f := range fs {
		fmt.Fprintf(&b, "- %s\n", f.Text)
	}
	return strings.TrimRight(b.String(), "\n")
}

var httpStatus = regexp.MustCompile(`HTTP (\d{3})`)

func statusMeaning(code int) string {
	switch {
	case code == 400 || code == 422:
		return "the model service refused the request (often a history it cannot accept or a context that is too long; /new starts fresh)"
	case code == 401 || code == 403:
		return "the model service rejected the API key (an operator must fix llm.api_key)"
	case code == 404:
		return "the model service does not know the configured model or endpoint (check llm.model and llm.base_url)"
	case code == 429:
		return "the model service rate-limited the agent or its quota is spent"
	case code == 408 || code == 409 || code >= 500:
		return "the model service had a server error"
	}
	return "the model service failed"
}

func llmErrors(in Input) []Finding {
	type grp struct {
		n     int
		first time.Time
		text  string
	}
	byCode := map[string]*grp{}
	for _, e := range in.Errors {
		label, meaning, ok := classifyLLM(e)
		if !ok {
			continue
		}
		g := byCode[label]
		if g == nil {
			g = &grp{first: e.At, text: meaning}
			byCode[label] = g
		}
		g.n++
	}
	labels := make([]string, 0, len(byCode))
	for l := range byCode {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	var out []Finding
	for _, l := range labels {
		g := byCode[l]
		out = append(out, Finding{"llm_errors", fmt.Sprintf("Model-service errors: %d× %s (first at %s): %s.", g.n, l, g.first.Format("15:04:05"), g.text)})
	}
	return out
}

// classifyLLM recognises a model-service error in a log row.
func classifyLLM(e errlog.Entry) (label, meaning string, ok bool) {
	text := e.Msg + " " + e.Attrs["err"]
	if !strings.Contains(text, "llm:") {
		return "", "", false
	}
	if m := httpStatus.FindStringSubmatch(text); m != nil {
		code, _ := strconv.Atoi(m[1])
		return "HTTP " + m[1], statusMeaning(code), true
	}
	switch {
	case strings.Contains(text, "model unavailable") || strings.Contains(text, "deadline exceeded") || strings.Contains(text, "timeout"):
		return "no answer", "the model service could not be reached or did not answer in time", true
	case strings.Contains(text, "content filtered"):
		return "filtered", "the model service's content filter blocked the reply", true
	case strings.Contains(text, "malformed response"):
		return "malformed", "the model service sent a reply the agent could not read", true
	}
	return "other", "the model service failed", true
}

func orphans(in Input) []Finding {
	var missing, stray []string
	var pending []llm.ToolCall
	var pendingAt time.Time
	answered := map[string]bool{}
	flush := func() {
		for _, c := range pending {
			if !answered[c.ID] {
				missing = append(missing, fmt.Sprintf("%s (%s, %s)", c.Function.Name, c.ID, pendingAt.Format("15:04:05")))
			}
		}
		pending, answered = nil, map[string]bool{}
	}
	for _, m := range in.Messages {
		if m.Role == llm.RoleTool {
			found := false
			for _, c := range pending {
				if c.ID == m.ToolCallID && !answered[c.ID] {
					answered[c.ID], found = true, true
				}
			}
			if !found {
				stray = append(stray, fmt.Sprintf("%s (%s)", orName(m.Name, "a tool"), m.ToolCallID))
			}
			continue
		}
		flush()
		if m.Role == llm.RoleAssistant {
			pending, pendingAt = m.ToolCalls, m.At
		}
	}
	flush()
	var out []Finding
	if len(missing) > 0 {
		out = append(out, Finding{"orphaned_calls", fmt.Sprintf("Orphaned tool calls: %d call(s) never got a result: %s. "+
			"That happens when the agent stopped or the step was cancelled while the tool ran (or, for the last message, the turn is still running); "+
			"the next turn marks them as interrupted so the model service accepts the history.", len(missing), strings.Join(firstN(missing, 5), ", "))})
	}
	if len(stray) > 0 {
		out = append(out, Finding{"orphaned_calls", fmt.Sprintf("Orphaned tool results: %d result(s) answer no call of the message before them: %s; "+
			"they are left out of what the model sees.", len(stray), strings.Join(firstN(stray, 5), ", "))})
	}
	return out
}

func orName(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func toolNames(in Input) map[string]string {
	names := map[string]string{}
	for _, m := range in.Messages {
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Function.Name
		}
	}
	return names
}

func toolErrors(in Input) []Finding {
	names := toolNames(in)
	calls, fails := map[string]int{}, map[string]int{}
	first := map[string]string{}
	for _, m := range in.Messages {
		if m.Role != llm.RoleTool {
			continue
		}
		name := orName(m.Name, orName(names[m.ToolCallID], "unknown tool"))
		calls[name]++
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(m.Content)), "error") {
			fails[name]++
			if first[name] == "" {
				first[name] = clip.Line(m.Content, 200)
			}
		}
	}
	tools := make([]string, 0, len(fails))
	for t := range fails {
		tools = append(tools, t)
	}
	sort.Slice(tools, func(i, j int) bool {
		if fails[tools[i]] != fails[tools[j]] {
			return fails[tools[i]] > fails[tools[j]]
		}
		return tools[i] < tools[j]
	})
	var out []Finding
	for _, t := range tools {
		out = append(out, Finding{"tool_errors", fmt.Sprintf("Tool %s failed %d of %d time(s); first error: %q.", t, fails[t], calls[t], first[t])})
	}
	return out
}

func repeats(in Input) []Finding {
	var out []Finding
	seen := map[string]int{}
	reported := map[string]bool{}
	for _, m := range in.Messages {
		if m.Role == llm.RoleUser {
			clear(seen) // a new turn
			continue
		}
		for _, c := range m.ToolCalls {
			k := c.Function.Name + "\x00" + compact(c.Function.Arguments)
			seen[k]++
			if seen[k] == 2 && !reported[k] {
				reported[k] = true
				out = append(out, Finding{"repeated_calls", fmt.Sprintf("The model called %s with the same arguments %s more than once in one turn "+
					"(at %s); the agent refuses the third identical call and stops the loop after that.", c.Function.Name, clip.Line(c.Function.Arguments, 120), m.At.Format("15:04:05"))})
			}
		}
	}
	return out
}

func compact(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return s
	}
	return b.String()
}

func slowTurns(in Input) []Finding {
	type turn struct {
		at  time.Time
		dur time.Duration
	}
	var slow []turn
	var start, end time.Time
	done := func() {
		if !start.IsZero() && end.Sub(start) > in.SlowTurn {
			slow = append(slow, turn{start, end.Sub(start)})
		}
	}
	for _, m := range in.Messages {
		if m.Role == llm.RoleUser {
			done()
			start, end = m.At, m.At
			continue
		}
		end = m.At
	}
	done()
	if len(slow) == 0 {
		return nil
	}
	sort.Slice(slow, func(i, j int) bool { return slow[i].dur > slow[j].dur })
	parts := make([]string, 0, 3)
	for _, t := range slow[:min(3, len(slow))] {
		parts = append(parts, fmt.Sprintf("%s took %s", t.at.Format("15:04:05"), t.dur.Round(time.Second)))
	}
	return []Finding{{"slow_turns", fmt.Sprintf("Slow turns: %d turn(s) took longer than %s (%s); usually slow tools or a slow model service.",
		len(slow), in.SlowTurn, strings.Join(parts, ", "))}}
}

func contextSize(in Input) []Finding {
	total, window := 0, 0
	for i, m := range in.Messages {
		n := session.EstimateTokens(m.Message)
		total += n
		if i >= len(in.Messages)-in.Window {
			window += n
		}
	}
	text := fmt.Sprintf("Context: about %d tokens in the last %d messages (the budget per request is about %d; the whole session is about %d).",
		window, min(in.Window, len(in.Messages)), in.ContextBudget, total)
	switch {
	case window > in.ContextBudget:
		text += " That is over the budget, so older messages and large tool results are cut from each request and the model may forget earlier details; /new starts a fresh conversation."
	case window*4 > in.ContextBudget*3:
		text += " That is close to the budget."
	}
	return []Finding{{"context", text}}
}

// otherLogged lists logged problems of the session that are not model errors.
func otherLogged(in Input) []Finding {
	counts := map[string]int{}
	for _, e := range in.Errors {
		if _, _, ok := classifyLLM(e); ok {
			continue // llmErrors explains it
		}
		msg := e.Msg
		if t := e.Attrs["tool"]; t != "" {
			msg += " (" + t + ")"
		}
		counts[msg]++
	}
	msgs := make([]string, 0, len(counts))
	for m := range counts {
		msgs = append(msgs, m)
	}
	sort.Strings(msgs)
	var out []Finding
	for _, m := range msgs {
		out = append(out, Finding{"logged", fmt.Sprintf("Logged: %q %d time(s).", m, counts[m])})
	}
	return out
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}
