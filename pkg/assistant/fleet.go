package assistant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"agent/pkg/memory"
	"agent/pkg/session"
)

// A conversation's memory and sessions, as one box of a fleet hands them
// to another (pkg/fleet). A conversation is a user's direct one ("zhangsan")
// or a group chat ("group:" and the chat id).

// Snapshot is what moves.
type Snapshot struct {
	Version  int                       `json:"version"`
	Model    string                    `json:"model,omitempty"` // the embedding model of the vectors
	Facts    []memory.Portable         `json:"facts,omitempty"`
	Sessions []session.PortableSession `json:"sessions,omitempty"`
}

const snapshotVersion = 1

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

func (a *Assistant) portable() error {
	if a.memory == nil || a.sessions == nil {
		return fmt.Errorf("the conversation pipeline is unavailable: %v", a.err)
	}
	return nil
}

// ExportConversation snapshots a conversation's memory and sessions.
func (a *Assistant) ExportConversation(ctx context.Context, channel, conv string) ([]byte, error) {
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
	return json.Marshal(Snapshot{Version: snapshotVersion, Model: model, Facts: facts, Sessions: ss})
}

// ImportConversation restores a snapshot.
func (a *Assistant) ImportConversation(ctx context.Context, channel, conv string, b []byte) error {
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
	if s.Version != snapshotVersion {
		return errors.New("snapshot: written by another version of the agent (upgrade every box of the fleet)")
	}
	facts, err := a.memory.Import(ctx, scope, s.Model, s.Facts)
	if err != nil {
		return err
	}
	msgs, err := a.sessions.Import(ctx, key, s.Sessions)
	if err != nil {
		return err
	}
	a.logger.Info("fleet: conversation imported", "key", key, "facts", facts, "messages", msgs)
	return nil
}

// PurgeConversation deletes a conversation's memory and sessions (after
// it moved to another box).
func (a *Assistant) PurgeConversation(ctx context.Context, channel, conv string) error {
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
	a.logger.Info("fleet: conversation purged after its move", "key", key, "facts", facts, "sessions", ss)
	return nil
}
