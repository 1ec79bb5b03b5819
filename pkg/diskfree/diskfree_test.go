package diskfree

import (
	"errors"
	"path/filepath"
	"testing"

	"agent/pkg/health"
)

func TestFreeBytes(t *testing.T) {
	free, err := FreeBytes(t.TempDir())
	if err != nil {
		t.Fatalf("FreeBytes: %v", err)
	}
	if free == 0 {
		t.Errorf("FreeBytes = 0 on the test's temporary directory")
	}
	if _, err := FreeBytes(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Errorf("FreeBytes of a missing path: no error")
	}
}

func TestJudge(t *testing.T) {
	tests := []struct {
		free     uint64
		wantErr  string // "" for nil
		degraded bool
	}{
		{0, "only 0 MiB free on /var/lib/agent", false},
		{FailBytes - 1, "only 63 MiB free on /var/lib/agent", false},
		{FailBytes, "degraded: 64 MiB free on /var/lib/agent", true},
		{WarnBytes - 1, "degraded: 511 MiB free on /var/lib/agent", true},
		{WarnBytes, "", false},
		{10 << 30, "", false},
	}
	for _, tt := range tests {
		err := judge("/var/lib/agent", tt.free)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.wantErr {
			t.Errorf("judge(%d) = %q, want %q", tt.free, got, tt.wantErr)
		}
		if errors.Is(err, health.ErrDegraded) != tt.degraded {
			t.Errorf("judge(%d): errors.Is(err, health.ErrDegraded) = %v, want %v", tt.free, !tt.degraded, tt.degraded)
		}
	}
}

func TestCheckMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	err := Check(dir)
	if err == nil || errors.Is(err, health.ErrDegraded) {
		t.Fatalf("Check(%s) = %v, want a failure", dir, err)
	}
}
