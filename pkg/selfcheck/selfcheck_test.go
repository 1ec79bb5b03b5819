package selfcheck

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agent/pkg/clock"
	"agent/pkg/errlog"
	"agent/pkg/nativetest"
	"agent/pkg/scheduler"
	"agent/pkg/store"
	"agent/pkg/store/storetest"
)

func TestReadThermalFixture(t *testing.T) {
	zones, err := ReadThermal("testdata/sys")
	if err != nil {
		t.Fatal(err)
	}
	want := []Zone{{"cpu-thermal", 47.5}, {"gpu-thermal", 46.812}, {"tj-thermal", 88.25}} // zone2 is unreadable
	if len(zones) != len(want) {
		t.Fatalf("got %+v; want %+v", zones, want)
	}
	for i := range want {
		if zones[i] != want[i] {
			t.Fatalf("zone %d: got %+v; want %+v", i, zones[i], want[i])
		}
	}
	if _, err := ReadThermal(t.TempDir()); err == nil {
		t.Fatal("no zones: want an error")
	}
}

func TestParseTegrastatsRecorded(t *testing.T) {
	tests := []struct {
		file                string
		ram, ramTotal, swap int
		online, cores       int
		gpu, emc            int
		hottest             string
		hot                 float64
		vddIn               int
	}{
		{"orin-nano.txt", 2448, 7620, 3810, 4, 6, 0, 0, "cpu", 47.5, 4469},
		{"xavier-old.txt", 3157, 7765, 3882, 4, 6, 99, 0, "pmic", 50, 0},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata/tegrastats", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseTegrastats(strings.TrimSpace(string(raw)))
			if err != nil {
				t.Fatal(err)
			}
			online := 0
			for _, c := range got.CPU {
				if c.Online {
					online++
				}
			}
			name, hot := got.Hottest()
			if got.RAMUsedMB != tt.ram || got.RAMTotalMB != tt.ramTotal || got.SwapTotalMB != tt.swap ||
				online != tt.online || len(got.CPU) != tt.cores || got.GPUPercent != tt.gpu || got.EMCPercent != tt.emc ||
				name != tt.hottest || hot != tt.hot || got.PowerMW["VDD_IN"] != tt.vddIn {
				t.Fatalf("got %+v (hottest %s %.1f)", got, name, hot)
			}
			if got.Temps["gpu"] != 0 && got.Temps["gpu"] != 44.5 && got.Temps["gpu"] != -256 {
				t.Fatalf("gpu temp %v", got.Temps["gpu"])
			}
		})
	}
	if _, err := ParseTegrastats("hello world"); !errors.Is(err, ErrNotTegrastats) {
		t.Fatalf("garbage: %v", err)
	}
	raw, _ := os.ReadFile("testdata/tegrastats/nvpmodel-q.txt")
	if mode, err := ParseNVPModel(string(raw)); err != nil || mode != "15W" {
		t.Fatalf("nvpmodel: %q %v", mode, err)
	}
}

func FuzzParseTegrastats(f *testing.F) {
	for _, name := range []string{"orin-nano.txt", "xavier-old.txt"} {
		raw, _ := os.ReadFile(filepath.Join("testdata/tegrastats", name))
		f.Add(string(raw))
	}
	f.Add("CPU [ RAM /MB SWAP x@C VDD_IN mW/")
	f.Fuzz(func(t *testing.T, line string) {
		got, err := ParseTegrastats(line)
		if err == nil {
			_ = got.Summary()
		}
	})
}

func TestTurnStatsPercentiles(t *testing.T) {
	s := NewTurnStats()
	for i := 1; i <= 100; i++ {
		s.Turn(time.Duration(i)*time.Second, i%10 == 0, map[bool]string{true: "HTTP 503"}[i%10 == 0])
	}
	s.Tool("exec", true)
	s.Tool("exec", false)
	s.Tool("read_file", false)
	got := s.Snapshot()
	if got.Turns != 100 || got.Failed != 10 || got.P50 != 51*time.Second || got.P90 != 91*time.Second || got.Max != 100*time.Second ||
		got.LLMErrors["HTTP 503"] != 10 || got.ToolCalls != 3 || got.ToolErrs != 1 || got.ToolFailures[0].Tool != "exec" {
		t.Fatalf("%+v", got)
	}
}

func openDB(t *testing.T) *store.Store {
	t.Helper()
	return storetest.Open(t)
}

func TestReportContent(t *testing.T) {
	st := openDB(t)
	now := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	last := now.Add(-24 * time.Hour)
	// Errors logged since the last check, through the real handler.
	rec := errlog.New(st.DB(), errlog.Options{Now: func() time.Time { return now.Add(-time.Hour) }})
	log := slog.New(rec.Handler(slog.DiscardHandler))
	log.With("component", "conversation").Warn("turn failed", "key", "p2p:wecom:alice", "err", "llm: openai: server error (HTTP 503)")
	log.With("component", "conversation").Warn("turn failed", "key", "p2p:wecom:bob", "err", "llm: openai: server error (HTTP 503)")
	log.With("component", "runner").Error("job panicked", "panic", "nil map")
	rec.Flush(context.Background())
	rec.Close(context.Background())

	// A one-shot missed while the daemon was down (pkg/scheduler's rows).
	if _, err := st.DB().Exec(`INSERT INTO sched_jobs(id, owner, channel, recipient, kind, spec, tz, action, payload, created_at, updated_at)
		VALUES (3, 'wecom:carol', 'wecom', 'carol', 'at', '2025-03-01T03:00:00Z', 'UTC', 'message', 'x', 0, 0)`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().Exec(`INSERT INTO sched_runs(job_id, slot, started_at, status) VALUES (3, 1, ?, 'missed')`, now.Add(-time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}

	turns := NewTurnStats()
	for i := 0; i < 10; i++ {
		turns.Turn(2*time.Second, i < 2, map[bool]string{true: "HTTP 503"}[i < 2])
	}
	for i := 0; i < 10; i++ {
		turns.Tool("web_search", i < 6)
	}
	src := Sources{
		Now:       func() time.Time { return now },
		DB:        st.DB(),
		Integrity: func(ctx context.Context) error { return st.Check(ctx, false) },
		Turns:     turns,
		Jobs: func(context.Context) ([]scheduler.Job, error) {
			return []scheduler.Job{
				{ID: 1, Owner: "wecom:alice", State: scheduler.StateActive, LastRun: now.Add(-time.Hour), LastStatus: "ok"},
				{ID: 2, Owner: "wecom:bob", State: scheduler.StateActive, Failures: 3, LastError: "send to bob on wecom: channel down"},
			}, nil
		},
		RSS:       func() int64 { return 1700 << 20 },
		StateDir:  "/var/lib/agent",
		FreeBytes: func(string) (uint64, error) { return 10 << 30, nil },
		SysRoot:   "testdata/sys",
		Tegrastats: func(context.Context) (string, error) {
			b, err := os.ReadFile("testdata/tegrastats/orin-nano.txt")
			return string(b), err
		},
		NVPModel: func(context.Context) (string, error) {
			b, err := os.ReadFile("testdata/tegrastats/nvpmodel-q.txt")
			return string(b), err
		},
		MCP: func() []MCPServer {
			return []MCPServer{{Name: "web", State: "ready"}, {Name: "files", State: "failed", LastError: "exit status 1"}}
		},
		Components: func() map[string]string {
			return map[string]string{"embedding": "ready", "asr": "unavailable: models/ggml-base.bin missing"}
		},
		LLM:      func(context.Context) error { return nil },
		LLMModel: "gpt-4o",
	}
	r := Run(context.Background(), src, last)
	levels := map[string]Level{}
	details := map[string]string{}
	for _, it := range r.Items {
		levels[it.Name], details[it.Name] = it.Level, it.Detail
	}
	want := map[string]struct {
		level Level
		has   []string
	}{
		"errors":      {Fail, []string{"1 panic(s), 0 error(s), 2 warning(s) since the last check", `2x warn "conversation: turn failed"`}},
		"sessions":    {Warn, []string{"10 turns", "2 failed", "p50 2s", "LLM failures: HTTP 503 x2", "tools: 10 calls, 6 failed (60%)", "web_search 6/10"}},
		"database":    {OK, []string{"quick_check ok"}},
		"jobs":        {Warn, []string{"2 active of 2", "#2 (wecom:bob, 3 failure(s): send to bob on wecom: channel down)", "runs since the last check: 1 missed"}},
		"memory":      {Warn, []string{"RSS 1700 MiB of the 2048 MiB budget (83%)"}},
		"disk":        {OK, []string{"10240 MiB free on /var/lib/agent"}},
		"temperature": {Warn, []string{"cpu-thermal 47.5°C", "tj-thermal 88.2°C", "tj-thermal runs hot"}},
		"jetson":      {OK, []string{"power mode 15W", "RAM 2448/7620 MB", "CPU 5% avg on 4/6 cores", "GPU 0%", "board 4.5 W"}},
		"mcp":         {Warn, []string{"web ready", "files failed (exit status 1)"}},
		"models":      {Warn, []string{"LLM gpt-4o reachable", "asr unavailable: models/ggml-base.bin missing", "embedding ready"}},
	}
	for name, w := range want {
		if levels[name] != w.level {
			t.Errorf("%s: level %s; want %s (%s)", name, levels[name], w.level, details[name])
		}
		for _, s := range w.has {
			if !strings.Contains(details[name], s) {
				t.Errorf("%s: %q lacks %q", name, details[name], s)
			}
		}
	}
	if r.Level() != Fail || !strings.Contains(r.Summary(), "problem(s)") || !strings.Contains(r.Text(), "fail  errors:") {
		t.Fatalf("verdict:\n%s", r.Text())
	}

	// The report is kept; the next check counts only newer errors.
	if err := Save(context.Background(), st.DB(), r); err != nil {
		t.Fatal(err)
	}
	got, ok, err := Last(context.Background(), st.DB())
	if err != nil || !ok || !got.At.Equal(r.At) || len(got.Items) != len(r.Items) {
		t.Fatalf("Last: %+v %v %v", got, ok, err)
	}
	r2 := Run(context.Background(), Sources{Now: func() time.Time { return now.Add(time.Hour) }, DB: st.DB()}, got.At)
	if r2.Items[0].Level != OK || !strings.HasPrefix(r2.Items[0].Detail, "0 panic(s), 0 error(s), 0 warning(s)") {
		t.Fatalf("second check: %+v", r2.Items[0])
	}
	// Off a Jetson the part says so and is not a problem.
	r3 := Run(context.Background(), Sources{Tegrastats: func(context.Context) (string, error) { return "", exec.ErrNotFound }}, time.Time{})
	for _, it := range r3.Items {
		if it.Level != OK {
			t.Fatalf("no sources: %+v is a problem", it)
		}
	}
}

// fire waits for Daily's timer, moves clk to its time and returns it.
func fire(t *testing.T, clk *clock.Fake) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !clk.WaitTimers(1, ctx.Done()) {
		t.Fatal("Daily set no timer")
	}
	at, _ := clk.Next()
	clk.Set(at)
	return at
}

func TestDailyRunsAtNineLocal(t *testing.T) {
	loc := nativetest.Location(t, "Asia/Shanghai")
	clk := clock.NewFake(time.Date(2025, 3, 1, 6, 30, 0, 0, loc))
	ran := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Daily(ctx, clk, loc, 9, 0, func(context.Context) { ran <- clk.Now() })
	// 06:30 -> 07:30 -> 08:30 -> 09:00 (hour-long waits at most).
	for i := 0; i < 3; i++ {
		fire(t, clk)
	}
	if got := <-ran; !got.Equal(time.Date(2025, 3, 1, 9, 0, 0, 0, loc)) {
		t.Fatalf("ran at %v; want 09:00 local", got)
	}
	for i := 0; i < 24; i++ {
		fire(t, clk)
	}
	if got := <-ran; !got.Equal(time.Date(2025, 3, 2, 9, 0, 0, 0, loc)) {
		t.Fatalf("second run at %v; want the next day 09:00", got)
	}
	if n := NextDaily(time.Date(2025, 3, 1, 9, 0, 0, 0, loc), 9, 0, loc); !n.Equal(time.Date(2025, 3, 2, 9, 0, 0, 0, loc)) {
		t.Fatalf("NextDaily at 09:00 exactly: %v", n)
	}
}
