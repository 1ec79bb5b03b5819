package session

import (
	"context"
	"database/sql"
	"fmt"
)

// A conversation moves between boxes of a fleet (pkg/fleet): Export reads
// every session of a key with its messages, Import writes them into
// another box's database, Purge deletes them from the box they left.

// PortableSession is one exported session.
type PortableSession struct {
	CreatedAt int64             `json:"created_at"`
	LastAt    int64             `json:"last_at"`
	ClosedAt  *int64            `json:"closed_at,omitempty"`
	MemorySeq int64             `json:"memory_seq,omitempty"` // messages up to here are in long-term memory already
	Messages  []PortableMessage `json:"messages"`
}

// PortableMessage is one stored message, as stored.
type PortableMessage struct {
	Seq        int64   `json:"seq"`
	Role       string  `json:"role"`
	Content    string  `json:"content,omitempty"`
	Parts      *string `json:"parts,omitempty"`
	Name       string  `json:"name,omitempty"`
	ToolCalls  *string `json:"tool_calls,omitempty"`
	ToolCallID string  `json:"tool_call_id,omitempty"`
	Reasoning  string  `json:"reasoning_content,omitempty"`
	CreatedAt  int64   `json:"created_at"`
}

// Export returns key's sessions, oldest first.
func (s *Store) Export(ctx context.Context, key Key) ([]PortableSession, error) {
	if _, err := ParseKey(string(key)); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, created_at, last_at, closed_at, memory_seq FROM sessions WHERE key = ? ORDER BY id`, string(key))
	if err != nil {
		return nil, fmt.Errorf("session: export %s: %w", key, err)
	}
	var ids []int64
	var out []PortableSession
	for rows.Next() {
		var id int64
		var p PortableSession
		var closed sql.NullInt64
		if err := rows.Scan(&id, &p.CreatedAt, &p.LastAt, &closed, &p.MemorySeq); err != nil {
			rows.Close()
			return nil, fmt.Errorf("session: export %s: %w", key, err)
		}
		if closed.Valid {
			p.ClosedAt = &closed.Int64
		}
		ids = append(ids, id)
		out = append(out, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("session: export %s: %w", key, err)
	}
	for i, id := range ids {
		ms, err := s.db.QueryContext(ctx, `SELECT seq, role, content, parts, name, tool_calls, tool_call_id, reasoning_content, created_at
			FROM session_messages WHERE session_id = ? ORDER BY seq`, id)
		if err != nil {
			return nil, fmt.Errorf("session: export %s: %w", key, err)
		}
		for ms.Next() {
			var m PortableMessage
			var parts, calls sql.NullString
			if err := ms.Scan(&m.Seq, &m.Role, &m.Content, &parts, &m.Name, &calls, &m.ToolCallID, &m.Reasoning, &m.CreatedAt); err != nil {
				ms.Close()
				return nil, fmt.Errorf("session: export %s: %w", key, err)
			}
			if parts.Valid {
				m.Parts = &parts.String
			}
			if calls.Valid {
				m.ToolCalls = &calls.String
			}
			out[i].Messages = append(out[i].Messages, m)
		}
		ms.Close()
		if err := ms.Err(); err != nil {
			return nil, fmt.Errorf("session: export %s: %w", key, err)
		}
	}
	return out, nil
}

// Import adds sessions to key in one transaction, after the sessions key
// already has (a session open here is closed: at most one of the imported
// can be open). A session key already has (the same start, end and
// length) is skipped: an import repeated after a failure adds
// nothing twice. Messages are numbered 1..n again in their order, and
// what was already compressed into memory (MemorySeq) stays so. It
// returns how many messages were added.
func (s *Store) Import(ctx context.Context, key Key, sessions []PortableSession) (int, error) {
	if _, err := ParseKey(string(key)); err != nil {
		return 0, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("session: import %s: %w", key, err)
	}
	defer tx.Rollback()
	// A session is known by when it began and ended and its length; only
	// those here before this import count (two of one snapshot may agree).
	type ident struct{ created, last, n int64 }
	have := map[ident]bool{}
	rows, err := tx.QueryContext(ctx, `SELECT created_at, last_at, message_count FROM sessions WHERE key = ?`, string(key))
	if err != nil {
		return 0, fmt.Errorf("session: import %s: %w", key, err)
	}
	for rows.Next() {
		var id ident
		if err := rows.Scan(&id.created, &id.last, &id.n); err != nil {
			rows.Close()
			return 0, fmt.Errorf("session: import %s: %w", key, err)
		}
		have[id] = true
	}
	rows.Close()
	now := s.nowMS()
	n := 0
	opened := false
	for _, p := range sessions {
		if have[ident{p.CreatedAt, p.LastAt, int64(len(p.Messages))}] {
			continue
		}
		for _, m := range p.Messages {
			if m.Role == "" {
				return 0, fmt.Errorf("session: import %s: a message has no role", key)
			}
		}
		closed := sql.NullInt64{}
		if p.ClosedAt != nil {
			closed = sql.NullInt64{Int64: *p.ClosedAt, Valid: true}
		} else if opened {
			closed = sql.NullInt64{Int64: now, Valid: true} // only one may be open
		}
		if !closed.Valid {
			opened = true
			if _, err := tx.ExecContext(ctx, `UPDATE sessions SET closed_at = ? WHERE key = ? AND closed_at IS NULL`, now, string(key)); err != nil {
				return 0, fmt.Errorf("session: import %s: %w", key, err)
			}
		}
		// memory_seq counts the messages already compressed: renumbered,
		// it is the number of those with a sequence number up to it.
		var memSeq int64
		for _, m := range p.Messages {
			if m.Seq <= p.MemorySeq {
				memSeq++
			}
		}
		var id int64
		if err := tx.QueryRowContext(ctx, `INSERT INTO sessions(key, created_at, last_at, closed_at, message_count, memory_seq) VALUES (?, ?, ?, ?, ?, ?) RETURNING id`,
			string(key), p.CreatedAt, p.LastAt, closed, len(p.Messages), memSeq).Scan(&id); err != nil {
			return 0, fmt.Errorf("session: import %s: %w", key, err)
		}
		for i, m := range p.Messages {
			var parts, calls sql.NullString
			if m.Parts != nil {
				parts = sql.NullString{String: *m.Parts, Valid: true}
			}
			if m.ToolCalls != nil {
				calls = sql.NullString{String: *m.ToolCalls, Valid: true}
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO session_messages(session_id, seq, role, content, parts, name, tool_calls, tool_call_id, reasoning_content, created_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, i+1, m.Role, m.Content, parts, m.Name, calls, m.ToolCallID, m.Reasoning, m.CreatedAt); err != nil {
				return 0, fmt.Errorf("session: import %s: %w", key, err)
			}
			n++
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("session: import %s: %w", key, err)
	}
	s.c.reset(key)
	return n, nil
}

// Purge deletes every session of key with its messages and returns how
// many sessions went.
func (s *Store) Purge(ctx context.Context, key Key) (int, error) {
	if _, err := ParseKey(string(key)); err != nil {
		return 0, err
	}
	// The ids go from the cache too: SQLite may give a deleted id to a
	// new session.
	rows, err := s.db.QueryContext(ctx, `DELETE FROM sessions WHERE key = ? RETURNING id`, string(key))
	if err != nil {
		return 0, fmt.Errorf("session: purge %s: %w", key, err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("session: purge %s: %w", key, err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	s.c.reset(key)
	for _, id := range ids {
		s.c.drop(id)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("session: purge %s: %w", key, err)
	}
	return len(ids), nil
}
