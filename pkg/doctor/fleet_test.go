package doctor

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"agent/pkg/fleet/natstest"
)

const fleetWeCom = "[wecom]\nenabled = true\ncorp_id = \"wx\"\ncorp_secret = \"s\"\nagent_id = 1\ntoken = \"t\"\nencoding_aes_key = \"jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C\"\n"

// The fleet check connects as the daemon would: a server that does not
// answer fails with the fix; a JetStream server the fleet has not set up
// yet warns; off, it says so.
func TestFleetCheck(t *testing.T) {
	ctx := context.Background()
	if r := baseEnv(t, "", nil).checkFleet(ctx); r.Level != OK || !strings.Contains(r.Detail, "disabled") {
		t.Fatalf("off: %+v", r)
	}
	srv := natstest.Start(t)
	e := baseEnv(t, fleetWeCom+fmt.Sprintf("[fleet]\nenabled = true\nbox = \"room-1\"\nnats_url = %q\n", srv.URL()), nil)
	if r := e.checkFleet(ctx); r.Level != Warn || !strings.Contains(r.Detail, "does not exist yet") || !strings.Contains(r.Detail, "room-1") {
		t.Fatalf("a fresh server: %+v", r)
	}
	srv.Stop()
	if r := e.checkFleet(ctx); r.Level != Fail || r.Fix == "" {
		t.Fatalf("no server: %+v", r)
	}
}
