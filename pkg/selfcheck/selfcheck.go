// Package selfcheck builds the daemon's self-check report: errors and
// panics since the last check (pkg/errlog), session health, database
// integrity, scheduled jobs, memory against the budget, disk, temperatures,
// Jetson board figures (tegrastats, nvpmodel), MCP servers and models.
//
// Every source is injected (Sources), so tests run the whole report on
// fixtures; a part whose source is missing or fails says so and the rest
// still run. The report is kept in the database (meta) so `agentctl
// doctor` can read the latest one while the daemon is down.
package selfcheck

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"time"

	"agent/pkg/clip"
	"agent/pkg/diskfree"
	"agent/pkg/errlog"
	"agent/pkg/scheduler"
	"agent/pkg/selfcheck/report"
)

// The report itself (its levels, items, texts and where it is kept) is
// agent/pkg/selfcheck/report, so that a reader such as agentctl doctor
// links neither the checks nor what they inspect; these names are its.
type (
	Level  = report.Level
	Item   = report.Item
	Report = report.Report
)

// Levels, from good to bad.
const (
	OK   = report.OK
	Warn = report.Warn
	Fail = report.Fail
)

// MCPServer is one MCP server's state.
type MCPServer struct {
	Name, State, LastError string
}

// Sources is what the report reads. Nil fields skip their part (the item
// says "not checked").
type Sources struct {
	Now       func() time.Time
	DB        *sql.DB                         // error_log, sched_runs, meta
	Integrity func(ctx context.Context) error // store.Check(ctx, false)
	Turns     *TurnStats
	Started   time.Time // daemon start: what the turn counters cover
	Jobs      func(ctx context.Context) ([]scheduler.Job, error)
	RSS       func() int64
	Budget    int64 // bytes; default 2 GiB
	StateDir  string
	FreeBytes func(path string) (uint64, error)
	// SysRoot is where class/thermal lives ("/sys"); "" skips temperatures.
	SysRoot    string
	Tegrastats func(ctx context.Context) (string, error) // one line
	NVPModel   func(ctx context.Context) (string, error) // `nvpmodel -q` output
	MCP        func() []MCPServer
	Components func() map[string]string // local models: "ready" | "loading" | "unavailable: why"
	LLM        func(ctx context.Context) error
	LLMModel   string
}

// Thresholds.
const (
	DefaultBudget = 2 << 30
	rssWarn       = 0.75 // MemoryHigh=1.6G of the 2G budget is at 0.78
	rssFail       = 0.90
	tempWarn      = 85.0
	tempFail      = 95.0
	slowTurn      = 60 * time.Second
)

// Run builds a report. since is the previous check's time (zero: none).
func Run(ctx context.Context, s Sources, since time.Time) Report {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	if s.Budget <= 0 {
		s.Budget = DefaultBudget
	}
	r := Report{At: now(), Since: since}
	parts := []struct {
		name string
		fn   func(context.Context, Sources, time.Time) Item
	}{
		{"errors", errorsItem},
		{"sessions", sessionsItem},
		{"database", databaseItem},
		{"jobs", jobsItem},
		{"memory", memoryItem},
		{"disk", diskItem},
		{"temperature", thermalItem},
		{"jetson", jetsonItem},
		{"mcp", mcpItem},
		{"models", modelsItem},
	}
	for _, p := range parts {
		r.Items = append(r.Items, runPart(ctx, p.name, p.fn, s, since))
	}
	return r
}

func runPart(ctx context.Context, name string, fn func(context.Context, Sources, time.Time) Item, s Sources, since time.Time) (it Item) {
	defer func() {
		if v := recover(); v != nil {
			it = Item{Level: Warn, Detail: fmt.Sprintf("check crashed: %v", v)}
		}
		it.Name = name
	}()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return fn(ctx, s, since)
}

func notChecked(why string) Item { return Item{Level: OK, Detail: "not checked: " + why} }

func errorsItem(ctx context.Context, s Sources, since time.Time) Item {
	if s.DB == nil {
		return notChecked("no database")
	}
	entries, err := errlog.Since(ctx, s.DB, since, 5000)
	if err != nil {
		return Item{Level: Warn, Detail: err.Error()}
	}
	var errs, warns, panics int
	type group struct {
		msg   string
		n     int
		level string
	}
	groups := map[string]*group{}
	for _, e := range entries {
		switch {
		case e.Panic():
			panics++
		case e.Error():
			errs++
		default:
			warns++
		}
		k := e.Component + "\x00" + e.Msg
		if groups[k] == nil {
			groups[k] = &group{msg: e.Msg, level: strings.ToLower(e.Level)}
			if e.Component != "" {
				groups[k].msg = e.Component + ": " + e.Msg
			}
		}
		groups[k].n++
	}
	when := "since the last check"
	if since.IsZero() {
		when = "in the kept log"
	}
	detail := fmt.Sprintf("%d panic(s), %d error(s), %d warning(s) %s", panics, errs, warns, when)
	if len(groups) > 0 {
		list := make([]*group, 0, len(groups))
		for _, g := range groups {
			list = append(list, g)
		}
		sort.Slice(list, func(i, j int) bool {
			if list[i].n != list[j].n {
				return list[i].n > list[j].n
			}
			return list[i].msg < list[j].msg
		})
		var top []string
		for _, g := range list[:min(5, len(list))] {
			top = append(top, fmt.Sprintf("%dx %s %q", g.n, g.level, g.msg))
		}
		detail += "; most frequent: " + strings.Join(top, ", ")
	}
	switch {
	case panics > 0:
		return Item{Level: Fail, Detail: detail}
	case errs > 0:
		return Item{Level: Warn, Detail: detail}
	}
	return Item{Level: OK, Detail: detail}
}

func sessionsItem(_ context.Context, s Sources, _ time.Time) Item {
	if s.Turns == nil {
		return notChecked("the conversation pipeline is not running")
	}
	t := s.Turns.Snapshot()
	since := ""
	if !s.Started.IsZero() {
		since = " since start " + s.Started.Format("2006-01-02 15:04")
	}
	if t.Turns == 0 && t.ToolCalls == 0 {
		return Item{Level: OK, Detail: "no turns" + since}
	}
	detail := fmt.Sprintf("%d turns%s, %d failed; latency p50 %s p90 %s p99 %s max %s", t.Turns, since, t.Failed,
		round(t.P50), round(t.P90), round(t.P99), round(t.Max))
	llmFails := 0
	if len(t.LLMErrors) > 0 {
		kinds := make([]string, 0, len(t.LLMErrors))
		for k, v := range t.LLMErrors {
			kinds = append(kinds, fmt.Sprintf("%s x%d", k, v))
			llmFails += v
		}
		sort.Strings(kinds)
		detail += "; LLM failures: " + strings.Join(kinds, ", ")
	}
	toolRate := 0.0
	if t.ToolCalls > 0 {
		toolRate = float64(t.ToolErrs) / float64(t.ToolCalls)
		detail += fmt.Sprintf("; tools: %d calls, %d failed (%.0f%%)", t.ToolCalls, t.ToolErrs, 100*toolRate)
		var worst []string
		for _, f := range t.ToolFailures[:min(3, len(t.ToolFailures))] {
			worst = append(worst, fmt.Sprintf("%s %d/%d", f.Tool, f.Failed, f.Calls))
		}
		if len(worst) > 0 {
			detail += " — " + strings.Join(worst, ", ")
		}
	}
	lvl := OK
	if (t.Turns >= 5 && float64(llmFails)/float64(t.Turns) > 0.1) || (t.ToolCalls >= 10 && toolRate > 0.25) || t.P90 > slowTurn {
		lvl = Warn
	}
	if t.Turns >= 5 && t.Failed*2 > t.Turns {
		lvl = Fail
	}
	return Item{Level: lvl, Detail: detail}
}

func round(d time.Duration) time.Duration {
	if d > 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(10 * time.Millisecond)
}

func databaseItem(ctx context.Context, s Sources, _ time.Time) Item {
	if s.Integrity == nil {
		return notChecked("no database")
	}
	if err := s.Integrity(ctx); err != nil {
		return Item{Level: Fail, Detail: "quick_check failed: " + err.Error()}
	}
	return Item{Level: OK, Detail: "quick_check ok"}
}

func jobsItem(ctx context.Context, s Sources, since time.Time) Item {
	if s.Jobs == nil {
		return notChecked("the scheduler is not running")
	}
	jobs, err := s.Jobs(ctx)
	if err != nil {
		return Item{Level: Warn, Detail: err.Error()}
	}
	active, failing := 0, []string{}
	var last time.Time
	for _, j := range jobs {
		if j.State == scheduler.StateActive || j.State == scheduler.StateRunning {
			active++
		}
		if j.LastRun.After(last) {
			last = j.LastRun
		}
		if j.Failures > 0 || j.State == scheduler.StateFailed {
			failing = append(failing, fmt.Sprintf("#%d (%s, %d failure(s): %s)", j.ID, j.Owner, j.Failures, clip.Line(j.LastError, 120)))
		}
	}
	detail := fmt.Sprintf("%d active of %d", active, len(jobs))
	if !last.IsZero() {
		detail += ", last run " + last.Format("2006-01-02 15:04")
	}
	lvl := OK
	if s.DB != nil {
		runs, err := runCounts(ctx, s.DB, since)
		if err == nil {
			detail += "; runs since the last check: " + formatRuns(runs)
			if runs["missed"] > 0 {
				lvl = Warn
			}
		}
	}
	if len(failing) > 0 {
		lvl = Warn
		detail += "; failing: " + strings.Join(failing[:min(5, len(failing))], ", ")
	}
	return Item{Level: lvl, Detail: detail}
}

// runCounts counts sched_runs by status since since (missed one-shots
// have a row too).
func runCounts(ctx context.Context, db *sql.DB, since time.Time) (map[string]int, error) {
	rows, err := db.QueryContext(ctx, `SELECT status, count(*) FROM sched_runs WHERE started_at > ? GROUP BY status`, since.UnixMilli())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[st] = n
	}
	return out, rows.Err()
}

func formatRuns(runs map[string]int) string {
	if len(runs) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(runs))
	for k := range runs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", runs[k], k))
	}
	return strings.Join(parts, ", ")
}

func memoryItem(_ context.Context, s Sources, _ time.Time) Item {
	if s.RSS == nil {
		return notChecked("no RSS source")
	}
	rss := s.RSS()
	if rss <= 0 {
		return notChecked("RSS unavailable")
	}
	frac := float64(rss) / float64(s.Budget)
	detail := fmt.Sprintf("RSS %d MiB of the %d MiB budget (%.0f%%)", rss>>20, s.Budget>>20, 100*frac)
	switch {
	case frac >= rssFail:
		return Item{Level: Fail, Detail: detail + "; systemd kills the service at the budget (MemoryMax)"}
	case frac >= rssWarn:
		return Item{Level: Warn, Detail: detail + "; near MemoryHigh, the kernel starts reclaiming"}
	}
	return Item{Level: OK, Detail: detail}
}

func diskItem(_ context.Context, s Sources, _ time.Time) Item {
	if s.FreeBytes == nil || s.StateDir == "" {
		return notChecked("no state directory")
	}
	free, err := s.FreeBytes(s.StateDir)
	if err != nil {
		return Item{Level: Warn, Detail: err.Error()}
	}
	detail := fmt.Sprintf("%d MiB free on %s", free>>20, s.StateDir)
	switch {
	case free < diskfree.FailBytes:
		return Item{Level: Fail, Detail: detail + " (journalctl --vacuum-size=100M frees some)"}
	case free < diskfree.WarnBytes:
		return Item{Level: Warn, Detail: detail}
	}
	return Item{Level: OK, Detail: detail}
}

func thermalItem(_ context.Context, s Sources, _ time.Time) Item {
	if s.SysRoot == "" {
		return notChecked("no sysfs")
	}
	zones, err := ReadThermal(s.SysRoot)
	if err != nil {
		return notChecked(err.Error())
	}
	hot := zones[0]
	parts := make([]string, 0, len(zones))
	for _, z := range zones {
		parts = append(parts, fmt.Sprintf("%s %.1f°C", z.Name, z.Celsius))
		if z.Celsius > hot.Celsius {
			hot = z
		}
	}
	detail := strings.Join(parts, ", ")
	switch {
	case hot.Celsius >= tempFail:
		return Item{Level: Fail, Detail: detail + fmt.Sprintf("; %s is at the throttling point: check the fan and airflow", hot.Name)}
	case hot.Celsius >= tempWarn:
		return Item{Level: Warn, Detail: detail + fmt.Sprintf("; %s runs hot", hot.Name)}
	}
	return Item{Level: OK, Detail: detail}
}

func jetsonItem(ctx context.Context, s Sources, _ time.Time) Item {
	if s.Tegrastats == nil {
		return notChecked("not a Jetson")
	}
	line, err := s.Tegrastats(ctx)
	if errors.Is(err, exec.ErrNotFound) {
		return notChecked("not a Jetson (no tegrastats)")
	}
	if err != nil {
		return Item{Level: Warn, Detail: "tegrastats: " + err.Error()}
	}
	t, err := ParseTegrastats(line)
	if err != nil {
		return Item{Level: Warn, Detail: "tegrastats: " + err.Error()}
	}
	detail := t.Summary()
	if s.NVPModel != nil {
		if out, err := s.NVPModel(ctx); err == nil {
			if mode, err := ParseNVPModel(out); err == nil {
				detail = "power mode " + mode + "; " + detail
			}
		}
	}
	lvl := OK
	if t.RAMTotalMB > 0 && float64(t.RAMUsedMB) > 0.9*float64(t.RAMTotalMB) {
		lvl, detail = Warn, detail+"; the board is nearly out of RAM"
	}
	if t.SwapTotalMB > 0 && float64(t.SwapUsedMB) > 0.5*float64(t.SwapTotalMB) {
		lvl, detail = Warn, detail+"; heavy swapping"
	}
	if _, c := t.Hottest(); c >= tempFail {
		lvl = Fail
	} else if c >= tempWarn && lvl == OK {
		lvl = Warn
	}
	return Item{Level: lvl, Detail: detail}
}

func mcpItem(_ context.Context, s Sources, _ time.Time) Item {
	if s.MCP == nil {
		return notChecked("MCP is not running")
	}
	servers := s.MCP()
	if len(servers) == 0 {
		return Item{Level: OK, Detail: "no MCP servers configured"}
	}
	lvl := OK
	parts := make([]string, 0, len(servers))
	for _, m := range servers {
		p := m.Name + " " + m.State
		if m.State == "failed" {
			lvl = Warn
			if m.LastError != "" {
				p += " (" + clip.Line(m.LastError, 120) + ")"
			}
		}
		parts = append(parts, p)
	}
	return Item{Level: lvl, Detail: strings.Join(parts, ", ")}
}

func modelsItem(ctx context.Context, s Sources, _ time.Time) Item {
	var parts []string
	lvl := OK
	if s.LLM != nil {
		name := "LLM"
		if s.LLMModel != "" {
			name = "LLM " + s.LLMModel
		}
		if err := s.LLM(ctx); err != nil {
			lvl = Fail
			parts = append(parts, name+": "+err.Error())
		} else {
			parts = append(parts, name+" reachable")
		}
	}
	if s.Components != nil {
		comps := s.Components()
		names := make([]string, 0, len(comps))
		for n := range comps {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			st := comps[n]
			if strings.HasPrefix(st, "unavailable") && lvl == OK {
				lvl = Warn
			}
			parts = append(parts, n+" "+st)
		}
	}
	if len(parts) == 0 {
		return notChecked("no models")
	}
	return Item{Level: lvl, Detail: strings.Join(parts, "; ")}
}

// Save keeps r as the last report (meta table).
func Save(ctx context.Context, db *sql.DB, r Report) error { return report.Save(ctx, db, r) }

// Last reads the last saved report; ok is false when there is none.
func Last(ctx context.Context, db *sql.DB) (r Report, ok bool, err error) {
	return report.Last(ctx, db)
}
