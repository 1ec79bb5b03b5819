package logging

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestScrubAndJournald(t *testing.T) {
	var b strings.Builder
	var lv slog.LevelVar
	sc := &Scrubber{}
	sc.Set([]string{"sk-supersecret", "", "ab"})
	log := New(&b, &lv, Options{Journald: true}, sc)
	log.Info("calling with sk-supersecret", "key", "Bearer sk-supersecret", "err", errors.New("401 for sk-supersecret"), "short", "ab")
	out := b.String()
	if strings.Contains(out, "supersecret") {
		t.Fatalf("secret leaked: %s", out)
	}
	if strings.Contains(out, "time=") {
		t.Fatalf("timestamp under journald: %s", out)
	}
	if !strings.HasPrefix(out, "<6>level=INFO") {
		t.Fatalf("no journald priority prefix: %s", out)
	}
	b.Reset()
	log.With("component", "x").Error("bad")
	if !strings.HasPrefix(b.String(), "<3>") {
		t.Fatalf("error line lacks <3>: %s", b.String())
	}
	if !strings.Contains(out, "short=ab") {
		t.Fatalf("short value scrubbed: %s", out)
	}
	lv.Set(slog.LevelWarn)
	b.Reset()
	log.Info("hidden")
	if b.Len() != 0 {
		t.Fatalf("info logged at warn level: %s", b.String())
	}
}

func TestParseLevel(t *testing.T) {
	if l, err := ParseLevel("debug"); err != nil || l != slog.LevelDebug {
		t.Fatal(l, err)
	}
	if _, err := ParseLevel("loud"); err == nil {
		t.Fatal("accepted bogus level")
	}
}
