package aibot_test

import (
	"testing"
	"time"

	"agent/pkg/wecom/aibot"
	"agent/pkg/wecom/aibottest"
)

// Every non-zero errcode on the subscription is taken for
// wrong credentials (ErrRejected: state "rejected", the log says to check
// bot_id and secret, and the next try is RejectedBackoff = 5 minutes
// away). WeCom's transient answers (-1 "system busy", a rate limit) are
// not a refusal of the bot's credentials: a 24/7 bot would go deaf for
// five minutes after one hiccup. Only the credential errors should wait
// that long; a transient one is retried on the normal backoff.
func TestTransientSubscriptionErrorIsRetriedSoon(t *testing.T) {
	srv := aibottest.New(t)
	srv.Reject(-1, "system busy")
	c, _ := start(t, srv, func(cfg *aibot.Config) { cfg.RejectedBackoff = time.Hour })
	deadline := time.Now().Add(10 * time.Second)
	for srv.Dials() < 1 || len(srv.Frames(aibot.CmdSubscribe)) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("never subscribed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the busy answer is read
	srv.Reject(0, "")                  // WeCom is fine again
	deadline = time.Now().Add(5 * time.Second)
	for c.Status().State != aibot.StateReady {
		if time.Now().After(deadline) {
			s := c.Status()
			t.Fatalf("after a transient errcode -1 the client is %q (%s) and does not retry for RejectedBackoff", s.State, s.LastError)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
