package cmdcache

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A hit replays the remembered arguments for any utterance close enough,
// whatever the utterance now asks: the number or the on/off word that the
// arguments came from moves the embedding very little. "Set the
// thermostat to 23" is answered by running set_temp{21} and saying "set to
// 21"; "turn off the kitchen light" runs lights{on}. (Similarities with the
// test model: 0.994 and 0.981, over the 0.98 used here and the 0.95
// default.)
func TestHitIgnoresWhatTheUtteranceAsks(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.kinds["set_temp"] = Idempotent
	r.results["set_temp"] = "ok"
	r.learn(t, lamp("set the thermostat to 21 degrees"), "set_temp", `{"celsius":21}`, "ok", "Thermostat set to 21°C.")
	r.learn(t, lamp("turn on the kitchen light"), "lights_on", `{"room":"kitchen","on":true}`, "ok", "Kitchen light is on.")
	for _, c := range []struct{ say, notArgs string }{
		{"set the thermostat to 23 degrees", `{"celsius":21}`},
		{"turn off the kitchen light", `{"room":"kitchen","on":true}`},
	} {
		r.ran = nil
		ans, _, ok, err := r.c.Lookup(ctx, lamp(c.say), false)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			t.Errorf("%q answered from the cache with %q (similarity %.3f), running %q", c.say, ans.Reply, ans.Similarity, r.ran)
		}
	}
}

// Entries are pruned only for the device being looked up or learnt: a
// device's expired entries stay in the table for good once that device
// stops talking, and device names are whatever each hello says, so the
// table grows without bound (200 live rows per name, expired ones never
// deleted).
func TestExpiredEntriesOfOtherDevicesNeverDeleted(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	for i := range 5 {
		req := lamp("turn on the lights")
		req.Device = fmt.Sprintf("rotating-%d", i)
		r.learn(t, req, "lights_on", `{}`, "ok", "On.")
	}
	r.clk.Advance(30 * 24 * time.Hour)                                     // far past the TTL (1 h here)
	r.learn(t, lamp("how warm is it"), "room_temp", `{}`, "21°C", "21°C.") // another device learns and looks up
	r.c.Lookup(ctx, lamp("something else entirely"), false)
	var n int
	if err := r.c.c.DB.QueryRowContext(ctx, `SELECT count(*) FROM command_cache WHERE expires_at <= ?`, r.clk.Now().UnixMilli()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d expired entries (utterances, tool arguments and results) of devices no longer seen are kept for good", n)
	}
}
