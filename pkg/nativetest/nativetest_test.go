package nativetest

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB that notes a skip or a failure and stops the
// goroutine like the real one.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func run(t *testing.T, f func(tb testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func TestNeedSkipsOrFails(t *testing.T) {
	t.Setenv(Env, "")
	if r := run(t, func(tb testing.TB) { Need(tb, "x", "install x", true) }); r.skipped != "" || r.failed != "" {
		t.Fatalf("present: %+v", r)
	}
	r := run(t, func(tb testing.TB) { Need(tb, "the frobnicator", "apt-get install frob", false) })
	if r.failed != "" || !strings.Contains(r.skipped, "the frobnicator is not available; fix: apt-get install frob") {
		t.Fatalf("missing: skipped %q, failed %q", r.skipped, r.failed)
	}
	t.Setenv(Env, "1")
	r = run(t, func(tb testing.TB) { Need(tb, "the frobnicator", "apt-get install frob", false) })
	if r.skipped != "" || !strings.Contains(r.failed, "fix: apt-get install frob") || !strings.Contains(r.failed, Env+"=1") {
		t.Fatalf("required: skipped %q, failed %q", r.skipped, r.failed)
	}
}

func TestLookPathAndLocation(t *testing.T) {
	t.Setenv(Env, "")
	var got string
	if r := run(t, func(tb testing.TB) { got = LookPath(tb, "sh", "apt-get install dash") }); r.skipped != "" || got == "" {
		t.Fatalf("sh: %q %+v", got, r)
	}
	r := run(t, func(tb testing.TB) { LookPath(tb, "no-such-program-here", aptFix("nothing")) })
	if !strings.Contains(r.skipped, "no-such-program-here") || !strings.Contains(r.skipped, "scripts/deps.sh") {
		t.Fatalf("missing program: %q", r.skipped)
	}
	r = run(t, func(tb testing.TB) { Location(tb, "Mars/Olympus_Mons") })
	if !strings.Contains(r.skipped, "time zone Mars/Olympus_Mons") || !strings.Contains(r.skipped, "tzdata") {
		t.Fatalf("unknown zone: %q", r.skipped)
	}
	r = run(t, func(tb testing.TB) { File(tb, "/no/such/model.onnx", "the model", "scripts/deps.sh vad") })
	if !strings.Contains(r.skipped, "the model (/no/such/model.onnx)") {
		t.Fatalf("missing file: %q", r.skipped)
	}
}

// TestInstalled is what CI checks: under AGENT_REQUIRE_NATIVE=1 every
// dependency scripts/deps.sh installs must be there.
func TestInstalled(t *testing.T) {
	for name, f := range map[string]func(testing.TB) string{
		"espeak-ng": EspeakNG, "sox": Sox, "ffmpeg": FFmpeg, "systemd-analyze": SystemdAnalyze, "chromium": Chromium, "node": Node,
	} {
		t.Run(name, func(t *testing.T) {
			p := f(t)
			if _, err := exec.LookPath(p); err != nil {
				t.Errorf("%s: %v", p, err)
			}
		})
	}
	t.Run("tzdata", func(t *testing.T) {
		TZData(t)
		if loc := Location(t, "Europe/Berlin"); loc.String() != "Europe/Berlin" {
			t.Errorf("Location = %v", loc)
		}
	})
}
