package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"agent/pkg/admin"
)

type pairBackend struct{ memBackend }

func (b *pairBackend) PairingList(context.Context) ([]admin.Pairing, error) {
	return []admin.Pairing{{User: "wecom:zed", State: "pending", Code: "ABCD2345", Since: time.Now()}}, nil
}
func (b *pairBackend) PairingApprove(_ context.Context, code string) (admin.Pairing, error) {
	if code != "ABCD2345" {
		return admin.Pairing{}, fmt.Errorf("%w: no pending code %q", admin.ErrNotFound, code)
	}
	return admin.Pairing{User: "wecom:zed", State: "approved"}, nil
}
func (b *pairBackend) PairingRevoke(_ context.Context, user string) (admin.Pairing, error) {
	return admin.Pairing{User: user, State: "approved"}, nil
}

func TestPairCommands(t *testing.T) {
	path := serveAdmin(t, &pairBackend{})
	if code, out, errs := agentctl(t, "-config", path, "pair", "list"); code != 0 || !strings.Contains(out, "ABCD2345") || !strings.Contains(out, "wecom:zed") {
		t.Fatalf("list: %d %q %q", code, out, errs)
	}
	if code, out, _ := agentctl(t, "-config", path, "pair", "approve", "ABCD2345"); code != 0 || out != "approved wecom:zed\n" {
		t.Fatalf("approve: %d %q", code, out)
	}
	if code, _, errs := agentctl(t, "-config", path, "pair", "approve", "NOPE"); code != 1 || !strings.Contains(errs, "no pending code") {
		t.Fatalf("approve unknown: %d %q", code, errs)
	}
	if code, out, _ := agentctl(t, "-config", path, "--json", "pair", "revoke", "wecom:zed"); code != 0 || !strings.Contains(out, `"user":"wecom:zed"`) {
		t.Fatalf("revoke: %d %q", code, out)
	}
	for _, args := range [][]string{{"pair"}, {"pair", "approve"}, {"pair", "drop", "x"}} {
		if code, _, _ := agentctl(t, append([]string{"-config", path}, args...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
