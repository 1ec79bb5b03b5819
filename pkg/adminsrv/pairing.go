package adminsrv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"agent/pkg/admin"
	"agent/pkg/channel"
	"agent/pkg/pairing"
)

// Pairings is agentctl pair (admin.PairingBackend) over the DM pairings.
type Pairings struct {
	Store *pairing.Store
	// Send tells a user on their channel (an approved user is told so);
	// Disconnect closes a revoked user's live connections, returning how
	// many (the channels').
	Send       func(ctx context.Context, channel, to, text string) error
	Disconnect func(principal string) int
	Logger     *slog.Logger
}

var _ admin.PairingBackend = Pairings{}

func adminPairing(e pairing.Entry) admin.Pairing {
	p := admin.Pairing{User: e.User, Code: e.Code, Since: e.Since, ApprovedBy: e.By, State: "pending"}
	if e.Approved {
		p.State = "approved"
	}
	return p
}

func pairingErr(err error) error {
	if errors.Is(err, pairing.ErrNotFound) {
		return fmt.Errorf("%w: %v", admin.ErrNotFound, err)
	}
	return err
}

// PairingList implements admin.PairingBackend.
func (p Pairings) PairingList(ctx context.Context) ([]admin.Pairing, error) {
	list, err := p.Store.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]admin.Pairing, len(list))
	for i, e := range list {
		out[i] = adminPairing(e)
	}
	return out, nil
}

// PairingApprove implements admin.PairingBackend; the user is told on
// their channel when it can reach them.
func (p Pairings) PairingApprove(ctx context.Context, code string) (admin.Pairing, error) {
	e, err := p.Store.Approve(ctx, code, "agentctl")
	if err != nil {
		return admin.Pairing{}, pairingErr(err)
	}
	p.Logger.Info("pairing approved by the operator", "user", e.User)
	if name, user, ok := strings.Cut(e.User, ":"); ok {
		err := p.Send(ctx, name, user, pairing.ApprovedText)
		if err != nil && !errors.Is(err, channel.ErrNoPush) && !errors.Is(err, channel.ErrNoChannel) {
			p.Logger.Warn("could not tell the approved user", "user", e.User, "err", err)
		}
	}
	return adminPairing(e), nil
}

// PairingRevoke implements admin.PairingBackend: the user's live
// connections close at once.
func (p Pairings) PairingRevoke(ctx context.Context, user string) (admin.Pairing, error) {
	e, err := p.Store.Revoke(ctx, user)
	if err != nil {
		return admin.Pairing{}, pairingErr(err)
	}
	p.Logger.Info("pairing revoked by the operator", "user", e.User)
	if n := p.Disconnect(e.User); n > 0 {
		p.Logger.Info("connections of a revoked user closed", "user", e.User, "connections", n)
	}
	return adminPairing(e), nil
}
