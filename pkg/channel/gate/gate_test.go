package gate

import (
	"context"
	"strings"
	"testing"

	"agent/pkg/pairing"
	"agent/pkg/store"
	"agent/pkg/store/storetest"
)

var owners = []string{"wecom:boss", "voice:boss-phone"}

// newGate is a gate on a fresh database where voice:kitchen-panel and
// wecom:alice are approved, wecom:mallory was approved and revoked, and
// voice:waiting holds a code.
func newGate(t *testing.T, mode string) (Gate, *pairing.Store, *store.Store) {
	t.Helper()
	st := storetest.Open(t)
	ps := pairing.New(st.DB(), nil)
	ctx := context.Background()
	pair := func(user string) string {
		_, code, err := ps.Decide(ctx, nil, pairing.Policy{Mode: pairing.Pairing}, user, "")
		if err != nil || code == "" {
			t.Fatalf("code for %s: %q %v", user, code, err)
		}
		return code
	}
	for _, u := range []string{"voice:kitchen-panel", "wecom:alice", "wecom:mallory"} {
		if _, err := ps.Approve(ctx, pair(u), "test"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ps.Revoke(ctx, "wecom:mallory"); err != nil {
		t.Fatal(err)
	}
	pair("voice:waiting")
	policy := pairing.Policy{Mode: mode, AllowFrom: []string{"voice:lobby", "group:wecom:chat42"}, Owners: owners}
	return Gate{Pairings: ps, Policy: func() pairing.Policy { return policy }}, ps, st
}

func codes(t *testing.T, st *store.Store) int {
	t.Helper()
	var n int
	if err := st.DB().QueryRow(`SELECT count(*) FROM pairing_codes`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAdmit(t *testing.T) {
	const (
		allow   = pairing.Allow
		deny    = pairing.Deny
		newCode = pairing.NewCode
		waiting = pairing.Waiting
	)
	tests := []struct {
		name       string
		mode       string
		req        Request
		verdict    pairing.Verdict
		principal  string // the one the decision is about
		ownerClaim bool
		newCodes   int // codes created by the call
	}{
		{"approved user", pairing.Pairing, Request{Principals: []string{"wecom:alice"}}, allow, "", false, 0},
		{"default mode is pairing", "", Request{Principals: []string{"wecom:stranger"}}, newCode, "wecom:stranger", false, 1},
		{"owner admitted where owners are trusted", pairing.Pairing, Request{Principals: []string{"wecom:boss"}}, allow, "", false, 0},
		{"owner admitted under allowlist", pairing.Allowlist, Request{Principals: []string{"wecom:boss"}}, allow, "", false, 0},
		{"owner name claimed as user", pairing.Pairing,
			Request{Principals: []string{"voice:cheap-panel", "voice:boss-phone"}, RefuseOwnerClaims: true}, deny, "voice:boss-phone", true, 0},
		{"owner name claimed as device", pairing.Open,
			Request{Principals: []string{"voice:boss-phone"}, RefuseOwnerClaims: true}, deny, "voice:boss-phone", true, 0},
		{"owner claim refused before an unknown name gets a code", pairing.Pairing,
			Request{Principals: []string{"voice:rogue", "wecom:boss"}, RefuseOwnerClaims: true}, deny, "wecom:boss", true, 0},
		{"ordinary claim under open", pairing.Open,
			Request{Principals: []string{"voice:cheap-panel"}, RefuseOwnerClaims: true}, allow, "", false, 0},
		{"approved device carrying an unapproved user", pairing.Pairing,
			Request{Principals: []string{"voice:kitchen-panel", "voice:bob"}}, newCode, "voice:bob", false, 1},
		{"approved user on an unknown device", pairing.Pairing,
			Request{Principals: []string{"voice:rogue", "wecom:alice"}}, newCode, "voice:rogue", false, 1},
		{"only the first stranger gets a code", pairing.Pairing,
			Request{Principals: []string{"voice:rogue", "voice:bob"}}, newCode, "voice:rogue", false, 1},
		{"stranger holding a code waits", pairing.Pairing, Request{Principals: []string{"voice:waiting"}}, waiting, "voice:waiting", false, 0},
		{"revoked user starts over", pairing.Pairing, Request{Principals: []string{"wecom:mallory"}}, newCode, "wecom:mallory", false, 1},
		{"revoked user under allowlist", pairing.Allowlist, Request{Principals: []string{"wecom:mallory"}}, deny, "wecom:mallory", false, 0},
		{"allowlisted", pairing.Allowlist, Request{Principals: []string{"voice:lobby"}}, allow, "", false, 0},
		{"allowlist ignores pairings", pairing.Allowlist, Request{Principals: []string{"voice:kitchen-panel"}}, deny, "voice:kitchen-panel", false, 0},
		{"allowlisted device carrying a stranger", pairing.Allowlist,
			Request{Principals: []string{"voice:lobby", "voice:bob"}}, deny, "voice:bob", false, 0},
		{"closed refuses owners", pairing.Closed, Request{Principals: []string{"wecom:boss"}}, deny, "wecom:boss", false, 0},
		{"open admits strangers", pairing.Open, Request{Principals: []string{"wecom:stranger"}}, allow, "", false, 0},
		{"group without an entry", pairing.Pairing,
			Request{Principals: []string{"wecom:alice"}, Group: "group:wecom:other"}, deny, "wecom:alice", false, 0},
		{"group without an entry, owner", pairing.Pairing,
			Request{Principals: []string{"wecom:boss"}, Group: "group:wecom:other"}, deny, "wecom:boss", false, 0},
		{"allowlisted group admits its members", pairing.Pairing,
			Request{Principals: []string{"wecom:stranger"}, Group: "group:wecom:chat42"}, allow, "", false, 0},
		{"group under open", pairing.Open,
			Request{Principals: []string{"wecom:stranger"}, Group: "group:wecom:other"}, allow, "", false, 0},
		{"group under closed", pairing.Closed,
			Request{Principals: []string{"wecom:alice"}, Group: "group:wecom:chat42"}, deny, "wecom:alice", false, 0},
		{"nobody", pairing.Open, Request{}, deny, "", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, ps, st := newGate(t, tt.mode)
			before := codes(t, st)
			got, err := g.Admit(context.Background(), nil, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if got.Verdict != tt.verdict || got.Principal != tt.principal || got.OwnerClaim != tt.ownerClaim {
				t.Fatalf("Admit(%+v) = %+v; want verdict %s about %q, owner claim %v", tt.req, got, tt.verdict, tt.principal, tt.ownerClaim)
			}
			if got.Allowed() != (tt.verdict == allow) {
				t.Fatalf("Allowed() = %v with verdict %s", got.Allowed(), got.Verdict)
			}
			if n := codes(t, st) - before; n != tt.newCodes {
				t.Fatalf("%d codes created, want %d", n, tt.newCodes)
			}
			switch {
			case tt.ownerClaim:
				if !strings.Contains(got.Reason, "agent.owners") || !strings.HasPrefix(got.Reason, tt.principal) {
					t.Fatalf("reason %q does not name the owner claim", got.Reason)
				}
			case got.Reason != "":
				t.Fatalf("reason %q on a plain policy decision", got.Reason)
			}
			if tt.verdict == newCode || tt.verdict == waiting {
				list, err := ps.List(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, e := range list {
					found = found || (e.User == tt.principal && e.Code == got.Code && got.Code != "")
				}
				if !found {
					t.Fatalf("code %q is not %s's pending code: %+v", got.Code, tt.principal, list)
				}
			} else if got.Code != "" {
				t.Fatalf("code %q with verdict %s", got.Code, got.Verdict)
			}
		})
	}
}

// A stranger's code is created once: asked again, they wait with the same
// code; once approved they are admitted; revoked, they start over.
func TestAdmitCodeLifecycle(t *testing.T) {
	ctx := context.Background()
	g, ps, _ := newGate(t, pairing.Pairing)
	req := Request{Principals: []string{"voice:kitchen-panel", "voice:bob"}, RefuseOwnerClaims: true}
	first, err := g.Admit(ctx, nil, req)
	if err != nil || first.Verdict != pairing.NewCode {
		t.Fatalf("first: %+v %v", first, err)
	}
	again, err := g.Admit(ctx, nil, req)
	if err != nil || again.Verdict != pairing.Waiting || again.Code != first.Code {
		t.Fatalf("again: %+v %v; want waiting with %s", again, err, first.Code)
	}
	if _, err := ps.Approve(ctx, first.Code, "test"); err != nil {
		t.Fatal(err)
	}
	if d, err := g.Admit(ctx, nil, req); err != nil || !d.Allowed() {
		t.Fatalf("approved: %+v %v", d, err)
	}
	if _, err := ps.Revoke(ctx, "voice:bob"); err != nil {
		t.Fatal(err)
	}
	if d, err := g.Admit(ctx, nil, req); err != nil || d.Verdict != pairing.NewCode || d.Code == first.Code {
		t.Fatalf("revoked: %+v %v; want a new code", d, err)
	}
}

// The code is created in the caller's transaction: rolled back (its
// message could not be queued), nothing was handed out, and the next
// message gets a code again.
func TestAdmitCodeInCallersTransaction(t *testing.T) {
	ctx := context.Background()
	g, _, st := newGate(t, pairing.Pairing)
	before := codes(t, st)
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := g.Admit(ctx, tx, Request{Principals: []string{"wecom:stranger"}})
	if err != nil || d.Verdict != pairing.NewCode {
		t.Fatalf("%+v %v", d, err)
	}
	tx.Rollback()
	if n := codes(t, st); n != before {
		t.Fatalf("a rolled-back code was kept (%d codes, want %d)", n, before)
	}
	if d, err := g.Admit(ctx, nil, Request{Principals: []string{"wecom:stranger"}}); err != nil || d.Verdict != pairing.NewCode {
		t.Fatalf("after the rollback: %+v %v", d, err)
	}
}

// The policy is read on every call: a reload applies to the next message.
func TestAdmitFollowsPolicy(t *testing.T) {
	g, _, _ := newGate(t, pairing.Open)
	policy := pairing.Policy{Mode: pairing.Open}
	g.Policy = func() pairing.Policy { return policy }
	req := Request{Principals: []string{"voice:lobby"}}
	if d, _ := g.Admit(context.Background(), nil, req); !d.Allowed() {
		t.Fatalf("open: %+v", d)
	}
	policy = pairing.Policy{Mode: pairing.Allowlist, AllowFrom: []string{"voice:other"}}
	if d, _ := g.Admit(context.Background(), nil, req); d.Allowed() {
		t.Fatalf("after the change: %+v", d)
	}
}
