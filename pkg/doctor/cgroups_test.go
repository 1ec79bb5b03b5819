package doctor

import (
	"context"
	"strings"
	"testing"

	"agent/pkg/diskfree"
)

// Doctor warns while the disk holds less than twice agent.disk_reserve_mb,
// and says that runs and uploads are refused once under it.
func TestDiskWarnsNearTheReserve(t *testing.T) {
	e := baseEnv(t, "", nil)
	free, err := diskfree.FreeBytes(existing(e.Config.Agent.StateDir))
	if err != nil {
		t.Fatal(err)
	}
	freeMB := int(free >> 20)
	for _, c := range []struct {
		reserveMB int
		want      Level
		says      string
	}{
		{1, OK, "MiB free"},
		{freeMB*2/3 + 1, Warn, "less than twice"},
		{freeMB + 1000, Warn, "are refused"},
	} {
		e.Config.Agent.DiskReserveMB = c.reserveMB
		r := e.checkDisk(context.Background())
		if r.Level != c.want || !strings.Contains(r.Detail, c.says) {
			t.Errorf("reserve %d MiB of %d free: %s %q, want %s saying %q", c.reserveMB, freeMB, r.Level, r.Detail, c.want, c.says)
		}
	}
}

// The limits line names how runs are bounded here, either way.
func TestSandboxLimitsSaysHowRunsAreBounded(t *testing.T) {
	e := baseEnv(t, "", nil)
	r := e.checkCgroups(context.Background())
	if !strings.Contains(r.Detail, "per process only") && !strings.Contains(r.Detail, "cgroup of its own") {
		t.Fatalf("%s %q", r.Level, r.Detail)
	}
}
