// Package gate is the one DM-policy check every channel makes before a
// message becomes a turn: security.dm_policy and allow_from as configured
// now, the operator's pairings, and agent.owners. A channel names who is
// asking (one principal, or several claims that must all be admitted) and
// gets a verdict; what it tells the asker is its own business.
package gate

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"

	"agent/pkg/pairing"
)

// Request is who asks to be admitted.
type Request struct {
	// Principals are "channel:id" names; every one must be admitted, and
	// they are checked in order (the first one refused is the one the
	// decision is about). None: refused.
	Principals []string
	// Group is "group:channel:chatid" for a group chat: under every
	// policy but open and closed a group is admitted by its allow_from
	// entry alone (pairing.Store.Decide).
	Group string
	// RefuseOwnerClaims refuses a principal listed in agent.owners: the
	// names are claims anyone with the channel's shared secret can make,
	// and owner rights cannot rest on a claim. Checked before the policy,
	// under every policy.
	RefuseOwnerClaims bool
}

// Decision is the gate's answer.
type Decision struct {
	// Verdict: Allow, Deny, NewCode (a stranger under the pairing policy
	// who got Code now: tell them once) or Waiting (a stranger who
	// already holds Code).
	Verdict pairing.Verdict
	// Principal is the principal the decision is about: the first one not
	// admitted (empty when allowed).
	Principal string
	// Code is the pairing code of Principal (NewCode, Waiting).
	Code string
	// OwnerClaim: Principal is one of agent.owners and the request
	// refuses owner claims; Reason says so.
	OwnerClaim bool
	// Reason explains a refusal that is not the plain policy (owner
	// claims); empty otherwise.
	Reason string
}

// Allowed reports whether the asker is admitted.
func (d Decision) Allowed() bool { return d.Verdict == pairing.Allow }

// Gate applies the DM policy. The zero value is not usable: Pairings is
// required (a nil Policy means the default, pairing).
type Gate struct {
	Pairings *pairing.Store
	// Policy returns the policy in force, owners included (read on every
	// call, so a reload applies to the next message).
	Policy func() pairing.Policy
}

// Admit decides req. Under pairing, the first principal that is neither
// allowed nor approved gets a code, created in q (a transaction the
// caller commits with the code's message; nil: the store's database).
func (g Gate) Admit(ctx context.Context, q pairing.Execer, req Request) (Decision, error) {
	if len(req.Principals) == 0 {
		return Decision{Verdict: pairing.Deny}, nil
	}
	var policy pairing.Policy
	if g.Policy != nil {
		policy = g.Policy()
	}
	if req.RefuseOwnerClaims {
		for _, p := range req.Principals {
			if slices.Contains(policy.Owners, p) {
				return Decision{Verdict: pairing.Deny, Principal: p, OwnerClaim: true,
					Reason: p + " is one of agent.owners: an owner's name cannot be claimed"}, nil
			}
		}
	}
	for _, p := range req.Principals {
		v, code, err := g.Pairings.Decide(ctx, q, policy, p, req.Group)
		if err != nil {
			return Decision{Verdict: pairing.Deny, Principal: p}, err
		}
		if v != pairing.Allow {
			return Decision{Verdict: v, Principal: p, Code: code}, nil
		}
	}
	return Decision{Verdict: pairing.Allow}, nil
}

// Batch is what Screen does with a conversation's stored messages when
// the gate does not admit them, inside Screen's transaction.
type Batch struct {
	// Code queues the pairing-code message to a stranger (NewCode).
	Code func(tx *sql.Tx, code string) error
	// Ignore marks the messages as handled without a turn (every refusal).
	Ignore func(tx *sql.Tx) error
}

// Screen admits req for a batch of stored messages, in one transaction:
// a stranger's code and the marking of their messages are committed
// together. handled means the batch needs no turn (a code was queued, or
// the messages were dropped); the caller then wakes its outbox.
func (g Gate) Screen(ctx context.Context, db *sql.DB, req Request, b Batch, logger *slog.Logger) (handled bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("policy: %w", err)
	}
	defer tx.Rollback()
	d, err := g.Admit(ctx, tx, req)
	if err != nil {
		return false, err
	}
	switch d.Verdict {
	case pairing.Allow:
		return false, nil
	case pairing.NewCode:
		logger.Info("stranger got a pairing code", "user", d.Principal, "code", d.Code)
		if err := b.Code(tx, d.Code); err != nil {
			return false, err
		}
	default:
		logger.Info("message dropped by the DM policy", "user", d.Principal, "group", req.Group, "verdict", d.Verdict.String())
	}
	if err := b.Ignore(tx); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("policy: commit: %w", err)
	}
	return true, nil
}

// Admits reports whether req would be admitted now, changing nothing: the
// decision is made in a transaction that is rolled back (a stranger's
// code is not created). For work worth doing only for admitted users
// before their message's turn (downloading what they sent).
func (g Gate) Admits(ctx context.Context, db *sql.DB, req Request) (bool, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	d, err := g.Admit(ctx, tx, req)
	return err == nil && d.Allowed(), err
}
