package plugin

// This file is the one that knows the daemon's side: channelhost.Env (the
// configuration, the database, the DM gate, the seam's Host) and the
// pipeline's turn.Message. Everything else in the package takes Deps.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"agent/pkg/channel"
	"agent/pkg/channelhost"
	"agent/pkg/clock"
	"agent/pkg/turn"
)

// Build makes one channel per [channels.NAME] section of env's
// configuration, in name order (a channelhost.Many). A section that
// cannot be built is left out and its error joined into the error
// returned with the others.
func Build(ctx context.Context, env channelhost.Env) ([]channel.Channel, error) {
	var out []channel.Channel
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(env.Config().Channels)) {
		c, err := BuildOne(ctx, env, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if c != nil {
			out = append(out, c)
		}
	}
	return out, errors.Join(errs...)
}

// BuildOne makes the channel of section [channels.NAME]; nil, nil when
// the configuration has no such section.
func BuildOne(_ context.Context, env channelhost.Env, name string) (channel.Channel, error) {
	cfg := env.Config()
	sec, ok := cfg.Channels[name]
	if !ok {
		return nil, nil
	}
	d := Deps{
		Name:    name,
		Command: sec.Command,
		Args:    sec.Args,
		Env:     sec.Env,
		Dir:     filepath.Join(cfg.Agent.StateDir, "channels", name),
		DB:      env.DB,
		Logger:  env.Logger,
		Clock:   fullClock(env.Clock),
		Gate:    env.Gate,
		Scrub:   env.Scrub,
	}
	switch {
	case env.Turns == nil:
		d.AskErr = errors.New("no conversation pipeline")
	case env.Turns.Err() != nil:
		d.AskErr = env.Turns.Err()
	default:
		d.Ask = Ask(name, env.Turns)
	}
	c, err := New(d, Options{})
	if err != nil {
		return nil, fmt.Errorf("channel %s: %w", name, err)
	}
	return c, nil
}

// Ask runs the turns of channel name on the pipeline: a direct chat is
// its sender's conversation, a group chat (or a thread of one) the
// chat's; the tool profile is the channel's name.
func Ask(name string, turns channel.Turns) Asker {
	return func(ctx context.Context, r Request, reply func(context.Context, string) error) (<-chan struct{}, error) {
		m := turn.Message{Channel: name, Profile: name, Chat: r.Chat, Sender: r.Sender, Text: r.Text,
			Group: r.Group, Mentioned: r.Group, Thread: r.Thread, ID: r.MsgID}
		if !r.Group {
			m.Thread = ""
		}
		return turns.Handle(ctx, m, turn.Sink{Reply: reply})
	}
}

// fullClock is c as a clock.Clock (the mailbox's timers): itself when it
// is one (the daemon's is), else timers made of After.
func fullClock(c channel.Clock) clock.Clock {
	if c == nil {
		return clock.Real()
	}
	if cc, ok := c.(clock.Clock); ok {
		return cc
	}
	return afterClock{c}
}

type afterClock struct{ channel.Clock }

func (c afterClock) NewTimer(d time.Duration) clock.Timer { return afterTimer{c.After(d)} }

type afterTimer struct{ c <-chan time.Time }

func (t afterTimer) C() <-chan time.Time { return t.c }
func (t afterTimer) Stop() bool          { return false }
