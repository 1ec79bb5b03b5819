package session

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"agent/pkg/llm"
)

// Sentinel errors.
var (
	// ErrNotFound means no session has the given id.
	ErrNotFound = errors.New("session not found")
	// ErrClosed means the session was closed by /new; append to Current.
	ErrClosed = errors.New("session is closed")
)

// Session is one conversation of a routing key.
type Session struct {
	ID           int64
	Key          Key
	CreatedAt    time.Time
	LastActivity time.Time
	// ClosedAt is zero while the session is open.
	ClosedAt time.Time
}

// Open reports whether the session is the key's current one.
func (s Session) Open() bool { return s.ClosedAt.IsZero() }

// Summary is a session with its message count, for agentctl sessions.
type Summary struct {
	Session
	Messages int
}

// Store reads and writes sessions in the database's sessions and
// session_messages tables (created by pkg/store's migrations).
type Store struct {
	db  *sql.DB
	now func() time.Time
	c   *cache // open sessions and their last messages (cache.go)
}

// New returns a Store on db. now is the clock (time.Now when nil).
func New(db *sql.DB, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, now: now, c: newCache()}
}

func (s *Store) nowMS() int64 { return s.now().UnixMilli() }

func fromMS(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

const sessionCols = `id, key, created_at, last_at, closed_at`

type scanner interface{ Scan(...any) error }

func scanSession(r scanner, extra ...any) (Session, error) {
	var (
		ss      Session
		key     string
		created int64
		last    int64
		closed  sql.NullInt64
	)
	dest := append([]any{&ss.ID, &key, &created, &last, &closed}, extra...)
	if err := r.Scan(dest...); err != nil {
		return Session{}, err
	}
	ss.Key, ss.CreatedAt, ss.LastActivity = Key(key), fromMS(created), fromMS(last)
	if closed.Valid {
		ss.ClosedAt = fromMS(closed.Int64)
	}
	return ss, nil
}

// Current returns key's open session, creating it on first use.
func (s *Store) Current(ctx context.Context, key Key) (Session, error) {
	if _, err := ParseKey(string(key)); err != nil {
		return Session{}, err
	}
	if ss, ok := s.c.current(key); ok {
		return ss, nil
	}
	mark := s.c.resetsNow()
	row := s.db.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE key = ? AND closed_at IS NULL`, string(key))
	ss, err := scanSession(row)
	if err == nil {
		s.c.setCurrentRead(ss, mark)
		return ss, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("session: current %s: %w", key, err)
	}
	// Not there: create it. INSERT OR IGNORE against the unique partial
	// index makes a concurrent creator harmless; then read whichever won.
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Session{}, fmt.Errorf("session: current %s: %w", key, err)
	}
	defer tx.Rollback()
	now := s.nowMS()
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO sessions(key, created_at, last_at) VALUES (?, ?, ?)`, string(key), now, now); err != nil {
		return Session{}, fmt.Errorf("session: create %s: %w", key, err)
	}
	ss, err = scanSession(tx.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE key = ? AND closed_at IS NULL`, string(key)))
	if err != nil {
		return Session{}, fmt.Errorf("session: create %s: %w", key, err)
	}
	if err := tx.Commit(); err != nil {
		return Session{}, fmt.Errorf("session: create %s: %w", key, err)
	}
	s.c.setCurrentRead(ss, mark)
	return ss, nil
}

// Reset closes key's open session (if any), keeping it and its messages, and
// returns a new open one: what /new does.
func (s *Store) Reset(ctx context.Context, key Key) (Session, error) {
	if _, err := ParseKey(string(key)); err != nil {
		return Session{}, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Session{}, fmt.Errorf("session: reset %s: %w", key, err)
	}
	defer tx.Rollback()
	now := s.nowMS()
	if _, err := tx.ExecContext(ctx, `UPDATE sessions SET closed_at = ? WHERE key = ? AND closed_at IS NULL`, now, string(key)); err != nil {
		return Session{}, fmt.Errorf("session: reset %s: close: %w", key, err)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO sessions(key, created_at, last_at) VALUES (?, ?, ?)`, string(key), now, now)
	if err != nil {
		return Session{}, fmt.Errorf("session: reset %s: create: %w", key, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return Session{}, fmt.Errorf("session: reset %s: %w", key, err)
	}
	if err := tx.Commit(); err != nil {
		s.c.reset(key) // committed or not, read it again
		return Session{}, fmt.Errorf("session: reset %s: %w", key, err)
	}
	ss := Session{ID: id, Key: key, CreatedAt: fromMS(now), LastActivity: fromMS(now)}
	s.c.reset(key)
	s.c.setCurrent(ss)
	return ss, nil
}

// Get returns the session with id.
func (s *Store) Get(ctx context.Context, id int64) (Session, error) {
	ss, err := scanSession(s.db.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("session: get %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Session{}, fmt.Errorf("session: get %d: %w", id, err)
	}
	return ss, nil
}

// Summarize returns the session with id and its message count.
func (s *Store) Summarize(ctx context.Context, id int64) (Summary, error) {
	var sum Summary
	var err error
	sum.Session, err = scanSession(s.db.QueryRowContext(ctx, `SELECT `+sessionCols+`, message_count FROM sessions WHERE id = ?`, id), &sum.Messages)
	if errors.Is(err, sql.ErrNoRows) {
		return Summary{}, fmt.Errorf("session: summarize %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Summary{}, fmt.Errorf("session: summarize %d: %w", id, err)
	}
	return sum, nil
}

// Append stores msgs at the end of the open session id, in one transaction,
// numbering them with the session's next sequence numbers. A closed session
// gives ErrClosed, an unknown one ErrNotFound.
func (s *Store) Append(ctx context.Context, sessionID int64, msgs ...llm.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	type row struct {
		parts, calls sql.NullString
	}
	rows := make([]row, len(msgs))
	for i, m := range msgs {
		if m.Role == "" {
			return fmt.Errorf("session: append to %d: message %d has no role", sessionID, i)
		}
		if len(m.Parts) > 0 {
			b, err := json.Marshal(m.Parts)
			if err != nil {
				return fmt.Errorf("session: append to %d: message %d parts: %w", sessionID, i, err)
			}
			rows[i].parts = sql.NullString{String: string(b), Valid: true}
		}
		if len(m.ToolCalls) > 0 {
			b, err := json.Marshal(m.ToolCalls)
			if err != nil {
				return fmt.Errorf("session: append to %d: message %d tool calls: %w", sessionID, i, err)
			}
			rows[i].calls = sql.NullString{String: string(b), Valid: true}
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("session: append to %d: %w", sessionID, err)
	}
	defer tx.Rollback()
	now := s.nowMS()
	// Reserve the sequence numbers: the count after the update minus n.
	var count int64
	err = tx.QueryRowContext(ctx, `UPDATE sessions SET message_count = message_count + ?, last_at = ?
		WHERE id = ? AND closed_at IS NULL RETURNING message_count`, len(msgs), now, sessionID).Scan(&count)
	if errors.Is(err, sql.ErrNoRows) {
		var closed sql.NullInt64
		switch err := tx.QueryRowContext(ctx, `SELECT closed_at FROM sessions WHERE id = ?`, sessionID).Scan(&closed); {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("session: append to %d: %w", sessionID, ErrNotFound)
		case err != nil:
			return fmt.Errorf("session: append to %d: %w", sessionID, err)
		default:
			return fmt.Errorf("session: append to %d: %w", sessionID, ErrClosed)
		}
	}
	if err != nil {
		return fmt.Errorf("session: append to %d: %w", sessionID, err)
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO session_messages
		(session_id, seq, role, content, parts, name, tool_calls, tool_call_id, reasoning_content, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("session: append to %d: %w", sessionID, err)
	}
	defer stmt.Close()
	seq := count - int64(len(msgs))
	first := seq + 1
	for i, m := range msgs {
		seq++
		if _, err := stmt.ExecContext(ctx, sessionID, seq, m.Role, m.Content, rows[i].parts, m.Name,
			rows[i].calls, m.ToolCallID, m.ReasoningContent, now); err != nil {
			return fmt.Errorf("session: append to %d: message %d: %w", sessionID, i, err)
		}
	}
	if err := tx.Commit(); err != nil {
		s.c.drop(sessionID) // committed or not: read it again
		return fmt.Errorf("session: append to %d: %w", sessionID, err)
	}
	parts, calls := make([]string, len(msgs)), make([]string, len(msgs))
	for i, r := range rows {
		parts[i], calls[i] = r.parts.String, r.calls.String
	}
	s.c.appended(sessionID, first, msgs, parts, calls, now)
	return nil
}

const messageCols = `seq, role, content, parts, name, tool_calls, tool_call_id, reasoning_content`

func scanMessage(r scanner) (int64, llm.Message, error) {
	var (
		seq          int64
		m            llm.Message
		parts, calls sql.NullString
	)
	if err := r.Scan(&seq, &m.Role, &m.Content, &parts, &m.Name, &calls, &m.ToolCallID, &m.ReasoningContent); err != nil {
		return 0, m, err
	}
	if parts.Valid {
		if err := json.Unmarshal([]byte(parts.String), &m.Parts); err != nil {
			return 0, m, fmt.Errorf("message %d parts: %w", seq, err)
		}
	}
	if calls.Valid {
		if err := json.Unmarshal([]byte(calls.String), &m.ToolCalls); err != nil {
			return 0, m, fmt.Errorf("message %d tool calls: %w", seq, err)
		}
	}
	return seq, m, nil
}

func (s *Store) query(ctx context.Context, q string, args ...any) ([]int64, []llm.Message, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var (
		seqs []int64
		msgs []llm.Message
	)
	for rows.Next() {
		seq, m, err := scanMessage(rows)
		if err != nil {
			return nil, nil, err
		}
		seqs, msgs = append(seqs, seq), append(msgs, m)
	}
	return seqs, msgs, rows.Err()
}

// Window returns the last n messages of the session, oldest first. It never
// starts in the middle of a tool exchange: when the n-th last message is a
// tool result, the window is extended back to the assistant message that
// made the calls (so it may hold a few more than n messages), or, when that
// call is not in the session, the leading results are trimmed. n <= 0
// returns nothing.
func (s *Store) Window(ctx context.Context, sessionID int64, n int) ([]llm.Message, error) {
	if n <= 0 {
		return nil, nil
	}
	if msgs, ok := s.c.window(sessionID, n); ok {
		return msgs, nil
	}
	if n <= cacheMessages {
		// Read what the cache keeps and answer from it from now on.
		ver := s.c.version(sessionID)
		seqs, msgs, err := s.query(ctx, `SELECT `+messageCols+` FROM session_messages
			WHERE session_id = ? ORDER BY seq DESC LIMIT ?`, sessionID, cacheMessages)
		if err != nil {
			return nil, fmt.Errorf("session: window of %d: %w", sessionID, err)
		}
		reverse(seqs)
		reverse(msgs)
		s.c.fill(sessionID, ver, seqs, msgs, len(msgs) < cacheMessages || (len(seqs) > 0 && seqs[0] == 1))
		if msgs, ok := s.c.window(sessionID, n); ok {
			return msgs, nil
		}
	}
	seqs, msgs, err := s.query(ctx, `SELECT `+messageCols+` FROM session_messages
		WHERE session_id = ? ORDER BY seq DESC LIMIT ?`, sessionID, n)
	if err != nil {
		return nil, fmt.Errorf("session: window of %d: %w", sessionID, err)
	}
	reverse(seqs)
	reverse(msgs)
	if len(msgs) == 0 || msgs[0].Role != llm.RoleTool {
		return msgs, nil
	}
	// Find the nearest earlier non-tool message.
	var start int64
	err = s.db.QueryRowContext(ctx, `SELECT seq FROM session_messages
		WHERE session_id = ? AND seq < ? AND role != 'tool' ORDER BY seq DESC LIMIT 1`, sessionID, seqs[0]).Scan(&start)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session: window of %d: %w", sessionID, err)
	}
	if err == nil {
		_, head, err := s.query(ctx, `SELECT `+messageCols+` FROM session_messages
			WHERE session_id = ? AND seq >= ? AND seq < ? ORDER BY seq`, sessionID, start, seqs[0])
		if err != nil {
			return nil, fmt.Errorf("session: window of %d: %w", sessionID, err)
		}
		if len(head) > 0 && head[0].Role == llm.RoleAssistant && len(head[0].ToolCalls) > 0 {
			return append(head, msgs...), nil
		}
	}
	// The call is gone or was never stored: drop the orphaned results.
	i := 0
	for i < len(msgs) && msgs[i].Role == llm.RoleTool {
		i++
	}
	return msgs[i:], nil
}

func reverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// List returns every session, most recently active first.
func (s *Store) List(ctx context.Context) ([]Summary, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sessionCols+`, message_count FROM sessions ORDER BY last_at DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("session: list: %w", err)
	}
	defer rows.Close()
	var out []Summary
	for rows.Next() {
		var sum Summary
		if sum.Session, err = scanSession(rows, &sum.Messages); err != nil {
			return nil, fmt.Errorf("session: list: %w", err)
		}
		out = append(out, sum)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("session: list: %w", err)
	}
	return out, nil
}

// Range returns the messages of a session with after < seq <= upto, oldest
// first, with their sequence numbers: what memory compression reads.
func (s *Store) Range(ctx context.Context, sessionID, after, upto int64) ([]int64, []llm.Message, error) {
	seqs, msgs, err := s.query(ctx, `SELECT `+messageCols+` FROM session_messages
		WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq`, sessionID, after, upto)
	if err != nil {
		return nil, nil, fmt.Errorf("session: range of %d: %w", sessionID, err)
	}
	return seqs, msgs, nil
}
