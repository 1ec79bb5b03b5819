package assistant

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"agent/pkg/memory"
	"agent/pkg/pairing"
	"agent/pkg/scheduler"
	"agent/pkg/session"
	"agent/pkg/workspace"
)

// A conversation's memory and sessions, as one box of a fleet hands them
// to another (pkg/fleet, through pkg/fleetlink): Portable. A conversation
// is a user's direct one ("zhangsan") or a group chat ("group:" and the
// chat id).

// Snapshot is what moves.
type Snapshot struct {
	Version  int                       `json:"version"`
	Model    string                    `json:"model,omitempty"` // the embedding model of the vectors
	Facts    []memory.Portable         `json:"facts,omitempty"`
	Sessions []session.PortableSession `json:"sessions,omitempty"`
	// A user's (not a group's) approval and scheduled jobs (version 2).
	Pairing *pairing.Portable       `json:"pairing,omitempty"`
	Jobs    []scheduler.PortableJob `json:"jobs,omitempty"`
}

// snapshotVersion is written; version 1 (memory and sessions only) is
// still read.
const snapshotVersion = 2

// GroupPrefix marks a fleet conversation that is a group chat.
const GroupPrefix = "group:"

// conversationOf is the routing key and memory scope of a fleet
// conversation of channel.
func conversationOf(channel, conv string) (session.Key, string, error) {
	var key session.Key
	var err error
	if chat, ok := strings.CutPrefix(conv, GroupPrefix); ok {
		key, err = session.Group(channel, chat)
	} else {
		key, err = session.P2P(channel, conv)
	}
	if err != nil {
		return "", "", err
	}
	scope, err := key.MemoryScope()
	return key, scope, err
}

// Portable is the pipeline's side of a fleet: what a conversation takes
// along when it moves, and whether it may move now.
func (a *Assistant) Portable() Portable { return Portable{a} }

// Portable moves conversations between boxes. Its methods take the
// fleet's channel and conversation (a user id, or GroupPrefix and a chat
// id).
type Portable struct{ a *Assistant }

func (a *Assistant) portable() error {
	if a.memory == nil || a.sessions == nil {
		return fmt.Errorf("the conversation pipeline is unavailable: %v", a.err)
	}
	return nil
}

// Export snapshots a conversation's memory and sessions (a user's also
// their approval and scheduled jobs, held from now until Release).
func (p Portable) Export(ctx context.Context, channel, conv string) ([]byte, error) {
	a := p.a
	if err := a.portable(); err != nil {
		return nil, err
	}
	key, scope, err := conversationOf(channel, conv)
	if err != nil {
		return nil, err
	}
	facts, model, err := a.memory.Export(ctx, scope)
	if err != nil {
		return nil, err
	}
	ss, err := a.sessions.Export(ctx, key)
	if err != nil {
		return nil, err
	}
	snap := Snapshot{Version: snapshotVersion, Model: model, Facts: facts, Sessions: ss}
	if !strings.HasPrefix(conv, GroupPrefix) {
		if snap.Pairing, err = a.pairings().Export(ctx, scope); err != nil {
			return nil, err
		}
		if a.sched != nil {
			// Held from now: a slot that comes during the move fires
			// once, on the box the user ends up on (Release).
			if _, err := a.sched.s.Hold(ctx, scope); err != nil {
				return nil, err
			}
			if snap.Jobs, err = a.sched.s.Export(ctx, scope); err != nil {
				return nil, err
			}
		}
	}
	return json.Marshal(snap)
}

func (a *Assistant) pairings() *pairing.Store { return pairing.New(a.d.Store.DB(), a.clock.Now) }

// ErrHeld: a conversation has turns held for the model service.
var ErrHeld = errors.New("messages held for the model service")

// Busy reports whether a conversation has a turn held for
// the model service (pkg/backlog: it is answered here, where it is
// recorded) or a run of its scheduled jobs in flight (its reply comes
// from this box): a move waits for them.
func (p Portable) Busy(ctx context.Context, channel, conv string) (bool, error) {
	a := p.a
	key, scope, err := conversationOf(channel, conv)
	if err != nil {
		return false, err
	}
	var held int
	if err := a.d.Store.DB().QueryRowContext(ctx, `SELECT count(*) FROM held_turns WHERE key = ? AND state = 0`, string(key)).Scan(&held); err != nil {
		return false, err
	}
	if held > 0 {
		// Not waited for: the model service may be down for hours.
		return true, fmt.Errorf("%w: %d message(s) of %s wait for the model service here; move the user once they are answered", ErrHeld, held, key)
	}
	if a.sched == nil || strings.HasPrefix(conv, GroupPrefix) {
		return false, nil
	}
	n, err := a.sched.s.Running(ctx, scope)
	return n > 0, err
}

// Import restores a snapshot.
func (p Portable) Import(ctx context.Context, channel, conv string, b []byte) error {
	a := p.a
	if err := a.portable(); err != nil {
		return err
	}
	key, scope, err := conversationOf(channel, conv)
	if err != nil {
		return err
	}
	var s Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if s.Version != snapshotVersion && s.Version != 1 {
		return errors.New("snapshot: written by another version of the agent (upgrade every box of the fleet)")
	}
	if strings.HasPrefix(conv, GroupPrefix) && (s.Pairing != nil || len(s.Jobs) > 0) {
		return errors.New("snapshot: a group chat's snapshot carries a user's approval or jobs")
	}
	facts, err := a.memory.Import(ctx, scope, s.Model, s.Facts)
	if err != nil {
		return err
	}
	msgs, err := a.sessions.Import(ctx, key, s.Sessions)
	if err != nil {
		return err
	}
	if err := a.pairings().Import(ctx, scope, s.Pairing); err != nil {
		return err
	}
	jobs := 0
	if len(s.Jobs) > 0 {
		if a.sched == nil {
			return errors.New("snapshot: the scheduler is unavailable on this box, and the user has scheduled jobs")
		}
		if jobs, err = a.sched.s.Import(ctx, scope, s.Jobs); err != nil {
			return err
		}
	}
	a.logger.Info("fleet: conversation imported", "key", key, "facts", facts, "messages", msgs, "paired", s.Pairing != nil, "jobs", jobs)
	return nil
}

// Purge deletes a conversation's memory, sessions, approval, jobs and
// files (after it moved to another box).
func (p Portable) Purge(ctx context.Context, channel, conv string) error {
	a := p.a
	if err := a.portable(); err != nil {
		return err
	}
	key, scope, err := conversationOf(channel, conv)
	if err != nil {
		return err
	}
	facts, err := a.memory.Purge(ctx, scope)
	if err != nil {
		return err
	}
	ss, err := a.sessions.Purge(ctx, key)
	if err != nil {
		return err
	}
	paired, jobs := false, 0
	if !strings.HasPrefix(conv, GroupPrefix) {
		if paired, err = a.pairings().Purge(ctx, scope); err != nil {
			return err
		}
		if a.sched != nil {
			if jobs, err = a.sched.s.Purge(ctx, scope); err != nil {
				return err
			}
		}
	}
	if sp := a.Spaces(); sp != nil {
		if err := sp.PurgeFiles(scope); err != nil {
			return err
		}
	}
	a.logger.Info("fleet: conversation purged after its move", "key", key, "facts", facts, "sessions", ss, "paired", paired, "jobs", jobs)
	return nil
}

// ExportFiles writes the conversation's private folder to w (a tar
// stream; empty without a workspace).
func (p Portable) ExportFiles(ctx context.Context, channel, conv string, w io.Writer) error {
	a := p.a
	_, scope, err := conversationOf(channel, conv)
	if err != nil {
		return err
	}
	sp := a.Spaces()
	if sp == nil {
		return tar.NewWriter(w).Close()
	}
	n, err := sp.ExportFiles(scope, w)
	if err == nil {
		a.logger.Info("fleet: files exported", "scope", scope, "files", n)
	}
	return err
}

// ImportFiles restores what ExportFiles wrote.
func (p Portable) ImportFiles(ctx context.Context, channel, conv string, r io.Reader) error {
	a := p.a
	_, scope, err := conversationOf(channel, conv)
	if err != nil {
		return err
	}
	sp := a.Spaces()
	if sp == nil {
		return errors.New("the workspace is unavailable on this box: the conversation's files cannot be restored")
	}
	n, err := sp.ImportFiles(scope, r)
	if err == nil {
		a.logger.Info("fleet: files imported", "scope", scope, "files", n)
	}
	return err
}

// Release lets the conversation's scheduled jobs fire again: on the box
// it moved to once the move committed, on the box it stays on when the
// move was undone.
func (p Portable) Release(ctx context.Context, channel, conv string) error {
	a := p.a
	if a.sched == nil || strings.HasPrefix(conv, GroupPrefix) {
		return nil
	}
	_, scope, err := conversationOf(channel, conv)
	if err != nil {
		return err
	}
	n, err := a.sched.s.Release(ctx, scope)
	if err == nil && n > 0 {
		a.logger.Info("fleet: scheduled jobs released", "scope", scope, "jobs", n)
	}
	return err
}

// Held are the conversations of channel whose jobs are held by a move.
func (p Portable) Held(ctx context.Context, channel string) ([]string, error) {
	a := p.a
	if a.sched == nil {
		return nil, nil
	}
	owners, err := a.sched.s.HeldOwners(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range owners {
		if user, ok := strings.CutPrefix(o, channel+":"); ok && user != "" {
			out = append(out, user)
		}
	}
	return out, nil
}

// Holds reports whether this box holds anything of the conversation:
// facts, sessions, an approval, jobs, files (a move must not delete what
// was here before it, when it is undone).
func (p Portable) Holds(ctx context.Context, channel, conv string) (bool, error) {
	a := p.a
	if err := a.portable(); err != nil {
		return false, err
	}
	key, scope, err := conversationOf(channel, conv)
	if err != nil {
		return false, err
	}
	db := a.d.Store.DB()
	var n int
	err = db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM memory_facts WHERE scope = ?) + (SELECT count(*) FROM sessions WHERE key = ?)
		+ (SELECT count(*) FROM pairing_users WHERE user = ?) + (SELECT count(*) FROM sched_jobs WHERE owner = ?)`,
		scope, string(key), scope, scope).Scan(&n)
	if err != nil || n > 0 {
		return n > 0, err
	}
	if sp := a.Spaces(); sp != nil {
		entries, err := os.ReadDir(filepath.Join(sp.Dir(), workspace.FilesDir, workspace.ScopeDir(scope)))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
		return len(entries) > 0, nil
	}
	return false, nil
}
