package pairing

import (
	"context"
	"testing"
	"time"
)

// A paired user's approval moves with them: the new box admits them
// without a code, the old box no longer does; nothing moves for a user
// never approved (and an approval the target had for them goes: the box
// they come from decides).
func TestApprovalMoves(t *testing.T) {
	ctx := context.Background()
	from, to := newStore(t), newStore(t)
	p := Policy{Mode: Pairing}
	_, code, err := from.Decide(ctx, nil, p, "wecom:bob", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := from.Approve(ctx, code, "boss"); err != nil {
		t.Fatal(err)
	}
	snap, err := from.Export(ctx, "wecom:bob")
	if err != nil || snap == nil || snap.ApprovedBy != "boss" {
		t.Fatalf("export: %+v, %v", snap, err)
	}
	if none, err := from.Export(ctx, "wecom:stranger"); err != nil || none != nil {
		t.Fatalf("a stranger exported %+v, %v", none, err)
	}
	for range 2 {
		if err := to.Import(ctx, "wecom:bob", snap); err != nil {
			t.Fatal(err)
		}
	}
	if err := to.Import(ctx, "wecom:stranger", &Portable{ApprovedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := to.Import(ctx, "wecom:stranger", nil); err != nil { // revoked since, on the box they come from
		t.Fatal(err)
	}
	if v, _, err := to.Decide(ctx, nil, p, "wecom:bob", ""); err != nil || v != Allow {
		t.Fatalf("the new box decided %v, %v for bob", v, err)
	}
	if v, _, _ := to.Decide(ctx, nil, p, "wecom:stranger", ""); v != NewCode {
		t.Fatalf("a stranger was %v on the new box", v)
	}
	if had, err := from.Purge(ctx, "wecom:bob"); err != nil || !had {
		t.Fatalf("purge: %v, %v", had, err)
	}
	if ok, _ := from.Admitted(ctx, p, "wecom:bob"); ok {
		t.Fatal("the old box still admits bob after the move")
	}
}
