package pairing

import (
	"context"
	"errors"
	"strings"
	"testing"

	"agent/pkg/store/storetest"
)

// newStore is a pairing Store on a fresh database.
func newStore(t *testing.T) *Store {
	t.Helper()
	st := storetest.Open(t)
	return New(st.DB(), nil)
}

func TestDecide(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	p := Policy{Mode: Pairing, AllowFrom: []string{"wecom:ann"}, Owners: []string{"wecom:boss"}}
	for _, tc := range []struct {
		p           Policy
		user, group string
		want        Verdict
	}{
		{p, "wecom:ann", "", Allow},
		{p, "wecom:boss", "", Allow},
		{Policy{Mode: Allowlist, AllowFrom: []string{"wecom:ann"}}, "wecom:zed", "", Deny},
		{Policy{Mode: Allowlist, AllowFrom: []string{"*"}}, "wecom:zed", "", Allow},
		{Policy{Mode: Open}, "wecom:zed", "group:wecom:c", Allow},
		{Policy{Mode: Closed, AllowFrom: []string{"*"}}, "wecom:ann", "", Deny},
		{p, "wecom:ann", "group:wecom:c", Deny},
		{Policy{Mode: Pairing, AllowFrom: []string{"group:wecom:c"}}, "wecom:zed", "group:wecom:c", Allow},
	} {
		if v, _, err := s.Decide(ctx, nil, tc.p, tc.user, tc.group); err != nil || v != tc.want {
			t.Errorf("%+v %s %s: %v %v, want %v", tc.p, tc.user, tc.group, v, err, tc.want)
		}
	}
	v, code, err := s.Decide(ctx, nil, p, "wecom:zed", "")
	if err != nil || v != NewCode || len(code) != 8 || !strings.Contains(CodeText(code), code) {
		t.Fatalf("stranger: %v %q %v", v, code, err)
	}
	if v, again, _ := s.Decide(ctx, nil, p, "wecom:zed", ""); v != Waiting || again != code {
		t.Fatalf("second message: %v %q", v, again)
	}
	if _, err := s.Approve(ctx, "NOPE1234", "t"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown code: %v", err)
	}
	if e, err := s.Approve(ctx, strings.ToLower(code), "op"); err != nil || e.User != "wecom:zed" {
		t.Fatalf("approve: %+v %v", e, err)
	}
	if v, _, _ := s.Decide(ctx, nil, p, "wecom:zed", ""); v != Allow {
		t.Fatalf("approved user: %v", v)
	}
	if list, _ := s.List(ctx); len(list) != 1 || !list[0].Approved || list[0].By != "op" {
		t.Fatalf("list %+v", list)
	}
	if _, err := s.Revoke(ctx, "wecom:zed"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke(ctx, "wecom:zed"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoke twice: %v", err)
	}
	if v, _, _ := s.Decide(ctx, nil, p, "wecom:zed", ""); v != NewCode {
		t.Fatalf("revoked user: %v", v)
	}
}

func TestAdmittedCreatesNoCode(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	p := Policy{Mode: Pairing, AllowFrom: []string{"voice:panel"}, Owners: []string{"voice:boss"}}
	for _, tc := range []struct {
		p    Policy
		user string
		want bool
	}{
		{p, "voice:panel", true},
		{p, "voice:boss", true},
		{p, "voice:stranger", false},
		{Policy{Mode: Allowlist, AllowFrom: []string{"*"}}, "voice:x", true},
		{Policy{Mode: Allowlist}, "voice:x", false},
		{Policy{Mode: Open}, "voice:x", true},
		{Policy{Mode: Closed, AllowFrom: []string{"*"}}, "voice:panel", false},
	} {
		if got, err := s.Admitted(ctx, tc.p, tc.user); err != nil || got != tc.want {
			t.Errorf("%+v %s: %v %v, want %v", tc.p, tc.user, got, err, tc.want)
		}
	}
	if list, _ := s.List(ctx); len(list) != 0 {
		t.Fatalf("Admitted created entries: %+v", list)
	}
	_, code, _ := s.Decide(ctx, nil, p, "voice:stranger", "")
	if ok, _ := s.Admitted(ctx, p, "voice:stranger"); ok {
		t.Fatal("a code holder is admitted before approval")
	}
	if _, err := s.Approve(ctx, code, "op"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Admitted(ctx, p, "voice:stranger"); !ok {
		t.Fatal("approved device not admitted")
	}
}
