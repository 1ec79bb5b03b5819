// Package agent runs the tool-use loop: one user message in, at most
// MaxIterations model calls with the tool calls of each step run
// concurrently, one answer out. Every message of the turn is appended to the
// session as it happens, so a crash mid-turn leaves a session that
// session.Repair makes valid again.
//
// Mistakes of the model (unknown tools, invalid JSON arguments, failing or
// panicking tools, the same call over and over) go back to it as tool
// results; only a failing LLM or session store ends a turn with an error.
package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"agent/pkg/clip"
	"agent/pkg/clock"
	"agent/pkg/config"
	"agent/pkg/invisible"
	"agent/pkg/llm"
	"agent/pkg/logging"
	"agent/pkg/session"
	"agent/pkg/tools"
)

// LLM is the part of *llm.Client the loop uses.
type LLM interface {
	Chat(ctx context.Context, req llm.Request) (llm.Response, error)
	Stream(ctx context.Context, req llm.Request, fn func(llm.Delta) error) (llm.Response, error)
}

// Memory supplies the "Relevant memory" block of the system message for a
// message in a memory scope (session.Key.MemoryScope). fast is set for the
// voice and hardware profiles: the block must come from what is cached,
// without embedding or database work on the caller's path. The memory
// layer (pkg/memory) implements it; nil means no block.
type Memory interface {
	Block(ctx context.Context, scope, query string, fast bool) (string, error)
}

// Config bounds a turn. Zero fields take the defaults noted.
type Config struct {
	MaxIterations   int    // model calls with tools per turn; 20
	Model           string // "" = the client's model
	VoiceModel      string // for the voice and hardware profiles; "" = Model
	MaxTokens       int    // per call; 0 = the client's
	WindowMessages  int    // session messages read per turn; 40
	ContextBudget   int    // estimated tokens of a request; 24000
	TurnTimeout     time.Duration
	TurnTokenBudget int // total tokens of a turn's calls; 0 = unlimited
	ToolResultBytes int // cap on one tool result; 16 KiB
	RepeatLimit     int // identical calls refused from this count on; 3
	// FinalGrace is the extra time the closing summary call gets after the
	// turn's time budget ran out; 30s.
	FinalGrace time.Duration
	Location   *time.Location // the time line of the prompt; UTC when nil
}

// Defaults.
const (
	DefaultMaxIterations   = 20
	DefaultWindowMessages  = 40
	DefaultContextBudget   = 24000
	DefaultTurnTimeout     = 3 * time.Minute
	DefaultToolResultBytes = 16 << 10
	DefaultRepeatLimit     = 3
	DefaultFinalGrace      = 30 * time.Second
)

// ConfigFrom takes the agent, llm and memory settings from c.
func ConfigFrom(c *config.Config) Config {
	window := c.Memory.SessionMaxMessages
	if window <= 0 || window > DefaultWindowMessages {
		window = DefaultWindowMessages
	}
	return Config{
		MaxIterations:  c.Agent.MaxToolIterations,
		Model:          c.LLM.Model,
		VoiceModel:     c.LLM.VoiceModel,
		MaxTokens:      c.LLM.MaxTokens,
		WindowMessages: window,
		Location:       c.Location(),
	}
}

func (c Config) withDefaults() Config {
	if c.MaxIterations <= 0 {
		c.MaxIterations = DefaultMaxIterations
	}
	if c.WindowMessages <= 0 {
		c.WindowMessages = DefaultWindowMessages
	}
	if c.ContextBudget <= 0 {
		c.ContextBudget = DefaultContextBudget
	}
	if c.TurnTimeout <= 0 {
		c.TurnTimeout = DefaultTurnTimeout
	}
	if c.ToolResultBytes <= 0 {
		c.ToolResultBytes = DefaultToolResultBytes
	}
	if c.RepeatLimit <= 0 {
		c.RepeatLimit = DefaultRepeatLimit
	}
	if c.FinalGrace <= 0 {
		c.FinalGrace = DefaultFinalGrace
	}
	if c.Location == nil {
		c.Location = time.UTC
	}
	return c
}

// Deps are what the loop talks to. LLM and Sessions are required; Tools,
// Prompt and Memory may be nil.
type Deps struct {
	LLM      LLM
	Tools    *tools.Registry
	Sessions *session.Store
	Prompt   *Prompt
	Memory   Memory
	// Chooser picks the tools each step offers and gates which may run
	// (pkg/toolselect); nil: every tool the profile allows.
	Chooser ToolChooser
	// OnTurn is told the session a turn wrote to, after the turn (memory
	// compression watches session growth through it). It must not block.
	OnTurn func(sessionID int64)
	// Scrub removes secrets from a failed tool's error text before it
	// becomes the tool result (stored in the session, sent to the model,
	// shown by /verbose): logging.Scrubber.Scrub; nil:
	// logging.ScrubPatterns.
	Scrub func(string) string
	// Stripped counts the invisible characters (pkg/invisible) taken out
	// of what goes to the model, by source: "tool_result" (every tool's
	// output: exec, custom and MCP tools, web and document text),
	// "tool_spec" (names, descriptions and schemas offered), "user_message"
	// and "prompt" (the system message). nil: not counted.
	Stripped func(source string, n int)
	Logger   *slog.Logger
	// Clock is the turn's time: the date in the prompt and the time budget
	// (TurnTimeout, FinalGrace). nil: Now with real timers.
	Clock clock.Clock
	// Now reads the time when Clock is nil; nil: the wall clock.
	Now func() time.Time
}

// ToolChooser picks the tools of a step (pkg/toolselect.Selector).
type ToolChooser interface {
	// Offer returns the tools to offer for a step of q's turn.
	Offer(ctx context.Context, q tools.Query) []tools.Tool
	// Allowed reports whether q's caller may run the named tool.
	Allowed(q tools.Query, name string) bool
}

// Agent runs turns. It is safe for concurrent use; the caller keeps turns of
// one routing key in order (the runner).
type Agent struct {
	cfg    Config
	d      Deps
	logger *slog.Logger
	clock  clock.Clock
}

// New returns an Agent.
func New(cfg Config, d Deps) *Agent {
	a := &Agent{cfg: cfg.withDefaults(), d: d, logger: d.Logger, clock: d.Clock}
	if a.logger == nil {
		a.logger = slog.New(slog.DiscardHandler)
	}
	a.logger = a.logger.With("component", "agent")
	if a.clock == nil {
		a.clock = clock.Func(d.Now)
	}
	return a
}

// Input is one user message.
type Input struct {
	Key     session.Key
	User    string
	Channel string
	Profile string // tool profile, declared by the channel (wecom, voice, hardware, admin, ...)
	// Fast asks for a latency-first turn (voice and hardware devices): a
	// leaner memory block and llm.voice_model when one is configured.
	Fast   bool
	Text   string
	Images []llm.Part // image parts (llm.ImagePart), sent after Text
	// Verbose emits step, tool-call and tool-result events (/verbose on).
	Verbose bool
	// Progress emits tool-call and tool-result events (a channel shows
	// them as status lines while the reply is written).
	Progress bool
	// Resume is the session a held turn's user message was stored in
	// before the model failed (pkg/backlog): when it is still the
	// conversation's session the turn continues from what is stored
	// instead of storing the message again. 0: a new turn.
	Resume int64
	// Stream asks the model for a streamed reply and emits its text as
	// EventText fragments.
	Stream bool
}

// EventKind says what an Event reports.
type EventKind string

// Event kinds.
const (
	EventStep       EventKind = "step"        // a model call starts
	EventToolCall   EventKind = "tool_call"   // a tool is about to run
	EventToolResult EventKind = "tool_result" // a tool finished
	EventText       EventKind = "text"        // a fragment of streamed reply text
)

// Event is progress of a turn, for /verbose and streaming channels.
type Event struct {
	Kind     EventKind
	Step     int
	Tool     string
	CallID   string
	Args     string // tool call arguments (EventToolCall)
	Text     string // result (EventToolResult) or fragment (EventText)
	IsError  bool
	Duration time.Duration
}

// Output is the result of a turn.
type Output struct {
	Text      string
	Session   int64 // the session the turn's messages went to (0: none stored)
	Steps     int   // model calls made
	ToolCalls int
	Usage     llm.Usage
	// Stopped says why the loop ended early: "" (the model answered),
	// StopIterations, StopRepeat, StopTime, StopTokens, StopGarbage.
	Stopped string
}

// Reasons in Output.Stopped.
const (
	StopIterations = "max_iterations"
	StopRepeat     = "repeated_calls"
	StopTime       = "time_budget"
	StopTokens     = "token_budget"
	StopGarbage    = "invalid_reply"
)

// Texts the user gets when the model gives nothing usable.
const (
	EmptyReplyText   = "Sorry, the model returned an empty reply. Please try again or rephrase your message."
	InvalidReplyText = "Sorry, the model returned a reply I could not understand. Please try again."
	TruncatedText    = "Sorry, the model's reply was cut off before it said anything. Please try again or ask for a shorter answer."
	FilteredText     = "Sorry, the model's content filter blocked this reply."
)

const (
	finalPrompt = "You have used up the steps allowed for this message (%s). Do not call any tools. " +
		"Answer the user now: summarise what you did and found, and say what is left undone."
	repeatRefusal = "error: you already called %s with exactly these arguments %d times in this turn and got the same result. " +
		"Do not repeat this call; use the results you have, try something different, or answer the user."
)

// Turn runs one user message through the loop. emit (may be nil) receives
// events synchronously from the loop's goroutine. An error is returned only
// when the LLM or the session store fails (wrapped, so errors.Is finds the
// llm sentinel errors); Output then holds what was done so far.
func (a *Agent) Turn(ctx context.Context, in Input, emit func(Event)) (Output, error) {
	var out Output
	cfg := a.cfg
	start := a.clock.Now()
	if emit == nil {
		emit = func(Event) {}
	}
	verbose := func(e Event) {
		if in.Verbose || (in.Progress && (e.Kind == EventToolCall || e.Kind == EventToolResult)) {
			emit(e)
		}
	}

	// The loop runs under the time budget; the closing summary call may use
	// a little more.
	hardCtx, cancelHard := clock.WithTimeout(ctx, a.clock, cfg.TurnTimeout+cfg.FinalGrace)
	defer cancelHard()
	loopCtx, cancelLoop := clock.WithTimeout(hardCtx, a.clock, cfg.TurnTimeout)
	defer cancelLoop()

	sess, err := a.d.Sessions.Current(hardCtx, in.Key)
	if err != nil {
		return out, fmt.Errorf("agent: turn %s: %w", in.Key, err)
	}
	window, err := a.d.Sessions.Window(hardCtx, sess.ID, cfg.WindowMessages)
	if err != nil {
		return out, fmt.Errorf("agent: turn %s: %w", in.Key, err)
	}
	history := session.Repair(window)
	for i := range history {
		// Stored before invisible characters were stripped on the way
		// in (not counted: nothing new came in).
		history[i].Content, _ = invisible.Strip(history[i].Content)
	}

	user := llm.Message{Role: llm.RoleUser, Content: a.strip("user_message", in.Text)}
	if len(in.Images) > 0 {
		user.Parts = append([]llm.Part{llm.TextPart(user.Content)}, in.Images...)
	}
	persist := func(msgs ...llm.Message) error {
		if err := a.d.Sessions.Append(hardCtx, sess.ID, msgs...); err != nil {
			return fmt.Errorf("agent: turn %s: %w", in.Key, err)
		}
		return nil
	}
	if in.Resume == 0 || in.Resume != sess.ID {
		if err := persist(user); err != nil {
			return out, err
		}
		history = append(history, user)
	}
	// else: a held turn resumed; its message (and any steps it took) is
	// the end of the stored history already.
	out.Session = sess.ID
	if a.d.OnTurn != nil {
		defer a.d.OnTurn(sess.ID)
	}

	fast := in.Fast
	var memBlock string
	if a.d.Memory != nil {
		scope, err := in.Key.MemoryScope()
		if err == nil {
			memBlock, err = a.d.Memory.Block(loopCtx, scope, in.Text, fast)
		}
		if err != nil {
			a.logger.Warn("memory block failed", "key", in.Key, "err", err)
			memBlock = ""
		}
	}
	var system string
	if a.d.Prompt != nil {
		system = a.d.Prompt.SystemFor(start, cfg.Location, memBlock, in.Channel, in.User)
	} else if memBlock != "" {
		system = "## Relevant memory\n\n" + memBlock
	}

	system = a.strip("prompt", system)

	model := cfg.Model
	if fast && cfg.VoiceModel != "" {
		model = cfg.VoiceModel
	}
	budget := cfg.ContextBudget - session.EstimateTokens(llm.Message{Role: llm.RoleSystem, Content: system})

	request := func(extra ...llm.Message) llm.Request {
		pruned := session.Prune(history, budget, nil)
		msgs := make([]llm.Message, 0, len(pruned)+2)
		if system != "" {
			msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: system})
		}
		msgs = append(msgs, pruned...)
		msgs = append(msgs, extra...)
		return llm.Request{Model: model, Messages: msgs, MaxTokens: cfg.MaxTokens}
	}
	call := func(ctx context.Context, req llm.Request) (llm.Response, error) {
		out.Steps++
		verbose(Event{Kind: EventStep, Step: out.Steps})
		var resp llm.Response
		var err error
		if in.Stream {
			resp, err = a.d.LLM.Stream(ctx, req, func(d llm.Delta) error {
				if d.Content != "" {
					emit(Event{Kind: EventText, Step: out.Steps, Text: d.Content})
				}
				return nil
			})
		} else {
			resp, err = a.d.LLM.Chat(ctx, req)
		}
		out.Usage = out.Usage.Add(resp.Usage)
		return resp, err
	}

	seen := make(map[string]int)
	pulls := &tools.Pulls{}
	toolCtx := tools.WithPulls(loopCtx, pulls)
	for {
		if out.Steps >= cfg.MaxIterations {
			out.Stopped = StopIterations
			break
		}
		if cfg.TurnTokenBudget > 0 && out.Usage.TotalTokens >= cfg.TurnTokenBudget {
			out.Stopped = StopTokens
			break
		}
		if loopCtx.Err() != nil && ctx.Err() == nil {
			out.Stopped = StopTime
			break
		}
		req := request()
		if a.d.Tools != nil {
			// Each step: a tool created (create_tool), a server
			// connected or a tool pulled in (find_tools) during the turn
			// is offered from the next one.
			req.Tools = a.offer(loopCtx, in, history, pulls)
		}
		resp, err := call(loopCtx, req)
		if err != nil {
			if errors.Is(err, llm.ErrContentFilter) && len(resp.Message.ToolCalls) == 0 {
				out.Stopped = StopGarbage
				return a.finish(out, resp.Message, FilteredText, persist)
			}
			if ctx.Err() == nil && loopCtx.Err() != nil {
				out.Stopped = StopTime
				break
			}
			return out, fmt.Errorf("agent: turn %s: step %d: %w", in.Key, out.Steps, err)
		}
		msg, dropped := sanitize(resp.Message, out.Steps)
		if dropped > 0 {
			a.logger.Warn("model sent malformed tool calls", "key", in.Key, "step", out.Steps, "dropped", dropped)
		}
		if len(msg.ToolCalls) == 0 {
			if strings.TrimSpace(msg.Content) != "" {
				return a.finish(out, msg, "", persist)
			}
			out.Stopped = StopGarbage
			text := EmptyReplyText
			switch {
			case dropped > 0:
				text = InvalidReplyText
			case resp.FinishReason == llm.FinishLength:
				text = TruncatedText
			}
			a.logger.Warn("model gave no usable reply", "key", in.Key, "step", out.Steps, "finish", resp.FinishReason)
			out.Text = text
			return out, nil
		}

		stored := storable(msg)
		if err := persist(stored); err != nil {
			return out, err
		}
		history = append(history, stored)
		results, stop := a.runTools(toolCtx, in, msg.ToolCalls, seen, out.Steps, verbose)
		out.ToolCalls += len(msg.ToolCalls)
		if err := persist(results...); err != nil {
			return out, err
		}
		history = append(history, results...)
		if stop {
			out.Stopped = StopRepeat
			break
		}
	}

	// Out of steps, time, tokens or patience: one last call without tools.
	a.logger.Info("turn stopped early, asking for a summary", "key", in.Key, "reason", out.Stopped, "steps", out.Steps)
	req := request(llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf(finalPrompt, strings.ReplaceAll(out.Stopped, "_", " "))})
	resp, err := call(hardCtx, req)
	if err != nil {
		return out, fmt.Errorf("agent: turn %s: final summary: %w", in.Key, err)
	}
	msg := resp.Message
	msg.ToolCalls = nil // asked for none; any are garbage
	if strings.TrimSpace(msg.Content) == "" {
		out.Text = fmt.Sprintf("Sorry, I stopped before finishing (%s) and have no summary to give. Please try again or split the request.", strings.ReplaceAll(out.Stopped, "_", " "))
		return out, nil
	}
	return a.finish(out, msg, "", persist)
}

// toolQuery is who asks what in in.
func toolQuery(in Input) tools.Query {
	return tools.Query{User: in.User, Channel: in.Channel, Profile: in.Profile, Text: in.Text, Fast: in.Fast}
}

// maxUsedKept bounds the tools a session's earlier calls keep offered.
const maxUsedKept = 8

// offer is the tools of a step: the Chooser's choice, with the tools the
// session used (latest first) and those pulled into this turn; without a
// Chooser every tool of the profile.
func (a *Agent) offer(ctx context.Context, in Input, history []llm.Message, pulls *tools.Pulls) []llm.Tool {
	var list []tools.Tool
	if a.d.Chooser == nil {
		list = a.d.Tools.List(in.Profile)
	} else {
		q := toolQuery(in)
		for i := len(history) - 1; i >= 0 && len(q.Keep) < maxUsedKept; i-- {
			for _, c := range history[i].ToolCalls {
				if !slices.Contains(q.Keep, c.Function.Name) && len(q.Keep) < maxUsedKept {
					q.Keep = append(q.Keep, c.Function.Name)
				}
			}
		}
		q.Keep = append(q.Keep, pulls.Names()...)
		list = a.d.Chooser.Offer(ctx, q)
	}
	out := make([]llm.Tool, len(list))
	for i, t := range list {
		out[i] = a.cleanSpec(t.Spec())
	}
	return out
}

// strip takes the invisible characters out of s (pkg/invisible), counted
// under source.
func (a *Agent) strip(source, s string) string {
	s, n := invisible.Strip(s)
	if n > 0 && a.d.Stripped != nil {
		a.d.Stripped(source, n)
	}
	return s
}

// cleanSpec is t without invisible characters in its name, description
// and schema (the strings of the schema, "\u200b" escapes included).
func (a *Agent) cleanSpec(t llm.Tool) llm.Tool {
	t.Function.Name = a.strip("tool_spec", t.Function.Name)
	t.Function.Description = a.strip("tool_spec", t.Function.Description)
	p := t.Function.Parameters
	if len(p) == 0 {
		return t
	}
	if !bytes.ContainsFunc(p, invisible.Is) && !bytes.Contains(p, []byte(`\u`)) {
		return t // nothing hidden (the common case: no decoding)
	}
	var v any
	if json.Unmarshal(p, &v) != nil {
		t.Function.Parameters = json.RawMessage(a.strip("tool_spec", string(p)))
		return t
	}
	n := 0
	v = stripJSON(v, &n)
	if n == 0 {
		return t
	}
	if b, err := json.Marshal(v); err == nil {
		t.Function.Parameters = b
		if a.d.Stripped != nil {
			a.d.Stripped("tool_spec", n)
		}
	}
	return t
}

// stripJSON strips the keys and strings of decoded JSON, adding to n.
func stripJSON(v any, n *int) any {
	switch x := v.(type) {
	case string:
		s, k := invisible.Strip(x)
		*n += k
		return s
	case map[string]any:
		out := make(map[string]any, len(x))
		for key, c := range x {
			k, m := invisible.Strip(key)
			*n += m
			out[k] = stripJSON(c, n)
		}
		return out
	case []any:
		for i, c := range x {
			x[i] = stripJSON(c, n)
		}
	}
	return v
}

// finish stores the final assistant message and returns it as the answer.
// fallback, when set, is the user's text instead of msg.Content (nothing
// is stored then unless msg has content).
func (a *Agent) finish(out Output, msg llm.Message, fallback string, persist func(...llm.Message) error) (Output, error) {
	msg.Role = llm.RoleAssistant
	msg.ToolCalls = nil
	out.Text = strings.TrimSpace(msg.Content)
	if out.Text != "" {
		if err := persist(msg); err != nil {
			return out, err
		}
	}
	if fallback != "" {
		out.Text = fallback
	}
	return out, nil
}

// sanitize makes the model's tool calls safe to store and send back: calls
// without a name are dropped and a missing or duplicate id is replaced.
// It returns the cleaned message and how many calls were dropped.
func sanitize(m llm.Message, step int) (llm.Message, int) {
	m.Role = llm.RoleAssistant
	if len(m.ToolCalls) == 0 {
		return m, 0
	}
	calls := make([]llm.ToolCall, 0, len(m.ToolCalls))
	ids := make(map[string]bool, len(m.ToolCalls))
	dropped := 0
	for i, c := range m.ToolCalls {
		c.Function.Name = strings.TrimSpace(c.Function.Name)
		if c.Function.Name == "" {
			dropped++
			continue
		}
		if c.ID == "" || ids[c.ID] {
			c.ID = fmt.Sprintf("call_s%d_%d", step, i)
		}
		ids[c.ID] = true
		if c.Type == "" {
			c.Type = "function"
		}
		calls = append(calls, c)
	}
	m.ToolCalls = calls
	return m, dropped
}

// storable returns m with arguments that are not valid JSON replaced by {}
// (some providers reject a history holding them; the model learns of its
// mistake from the tool result). m is not modified.
func storable(m llm.Message) llm.Message {
	calls := make([]llm.ToolCall, len(m.ToolCalls))
	copy(calls, m.ToolCalls)
	for i := range calls {
		if !json.Valid([]byte(calls[i].Function.Arguments)) {
			calls[i].Function.Arguments = "{}"
		}
	}
	m.ToolCalls = calls
	return m
}

// runTools runs the calls of one step concurrently and returns their results
// in call order, and whether the loop must stop (a call repeated past the
// limit).
func (a *Agent) runTools(ctx context.Context, in Input, calls []llm.ToolCall, seen map[string]int, step int, verbose func(Event)) ([]llm.Message, bool) {
	type result struct {
		text  string
		isErr bool
		dur   time.Duration
	}
	results := make([]result, len(calls))
	stop := false
	var wg sync.WaitGroup
	for i, c := range calls {
		verbose(Event{Kind: EventToolCall, Step: step, Tool: c.Function.Name, CallID: c.ID, Args: c.Function.Arguments})
		key := c.Function.Name + "\x00" + canonicalArgs(c.Function.Arguments)
		seen[key]++
		if n := seen[key]; n >= a.cfg.RepeatLimit {
			results[i] = result{text: fmt.Sprintf(repeatRefusal, c.Function.Name, n-1), isErr: true}
			if n > a.cfg.RepeatLimit {
				stop = true
			}
			a.logger.Warn("repeated tool call refused", "key", in.Key, "tool", c.Function.Name, "count", n)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			text, isErr := a.runOne(ctx, in, c)
			results[i] = result{text: text, isErr: isErr, dur: time.Since(t0)}
		}()
	}
	wg.Wait()
	msgs := make([]llm.Message, len(calls))
	for i, c := range calls {
		r := results[i]
		// Every tool's output enters the conversation here: what a reader
		// would not see does not reach the model either.
		text := capText(a.strip("tool_result", r.text), a.cfg.ToolResultBytes)
		msgs[i] = llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Name: c.Function.Name, Content: text}
		verbose(Event{Kind: EventToolResult, Step: step, Tool: c.Function.Name, CallID: c.ID, Text: text, IsError: r.isErr, Duration: r.dur})
	}
	return msgs, stop
}

// runOne runs one call and returns its result text for the model.
func (a *Agent) runOne(ctx context.Context, in Input, c llm.ToolCall) (string, bool) {
	if a.d.Tools == nil {
		return fmt.Sprintf("error: %v %q; no tools are available", tools.ErrUnknownTool, c.Function.Name), true
	}
	args := c.Function.Arguments
	if a.d.Chooser != nil && !a.d.Chooser.Allowed(toolQuery(in), c.Function.Name) {
		// Owner-only tools do not exist for anyone else, offered or not.
		return fmt.Sprintf("error: %v %q; find_tools lists the tools you can use", tools.ErrUnknownTool, c.Function.Name), true
	}
	out, err := a.d.Tools.Run(ctx, c.Function.Name, tools.Call{Args: json.RawMessage(args), User: in.User, Channel: in.Channel, Profile: in.Profile, Session: string(in.Key)})
	if err != nil {
		var pe *tools.PanicError
		if errors.As(err, &pe) {
			a.logger.Error("tool panicked", "key", in.Key, "tool", c.Function.Name, "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
		} else {
			a.logger.Debug("tool failed", "key", in.Key, "tool", c.Function.Name, "err", err)
		}
		scrub := a.d.Scrub
		if scrub == nil {
			scrub = logging.ScrubPatterns
		}
		msg := "error: " + scrub(err.Error())
		if errors.Is(err, tools.ErrBadArgs) && !json.Valid([]byte(args)) {
			msg += fmt.Sprintf("\nyou sent: %s", capText(args, 300))
		}
		return msg, true
	}
	if out == "" {
		out = "(no output)"
	}
	return out, false
}

// canonicalArgs is args compacted, so whitespace does not hide a repeat.
func canonicalArgs(args string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(args)); err != nil {
		return args
	}
	return b.String()
}

// capText cuts s to about n bytes with a notice of what was cut.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := clip.Bytes(s, n)
	return cut + fmt.Sprintf("\n[... truncated: %d more bytes not shown]", len(s)-len(cut))
}
