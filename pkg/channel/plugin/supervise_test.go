package plugin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"agent/pkg/channel"
)

// Under the daemon's channel Set: a plugin that exits is reported
// degraded (channel_NAME on /healthz), restarted after the backoff, and
// healthy again once it runs; the daemon's other work never stops.
func TestSetRestartsAnExitedPluginAndReportsIt(t *testing.T) {
	h := newHarness(t, nil)
	set, err := channel.NewSet(nil, h.clk, h.ch)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	set.Start(ctx)
	defer func() {
		cancel()
		if err := set.Wait(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	check := set.Check("chat")
	p := h.st.next(t)
	p.expect(t, TypeHello)
	if err := check(ctx); err != nil {
		t.Fatalf("running plugin: %v", err)
	}
	p.exit(errors.New("exit status 3"))
	eventually(t, "the failure shows", func() bool {
		err := check(ctx)
		return errors.Is(err, channel.ErrDegraded) && strings.Contains(err.Error(), "exit status 3")
	})
	restarted := make(chan *fakeProc, 1)
	go func() { restarted <- h.st.next(t) }()
	p = advanceUntil(t, h.clk, 500*time.Millisecond, restarted)
	p.expect(t, TypeHello)
	eventually(t, "healthy again", func() bool { return check(ctx) == nil })
	p.message(t, Message{ID: "m1", Sender: "alice", Text: "back?"})
	p.expect(t, TypeAck)
	p.expect(t, TypeSend)
}
