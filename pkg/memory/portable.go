package memory

import (
	"context"
	"database/sql"
	"fmt"
)

// A scope's memory moves between boxes of a fleet (pkg/fleet): Export
// reads its current facts with their vectors, Import writes them into
// another box's memory, Purge deletes them from the box they left. The
// history of corrected facts (superseded versions) does not move.

// Portable is one exported fact.
type Portable struct {
	Text      string `json:"text"`
	Keywords  string `json:"keywords,omitempty"`
	Persons   string `json:"persons,omitempty"`
	Topic     string `json:"topic,omitempty"`
	TimeText  string `json:"time_text,omitempty"`
	TimeAt    *int64 `json:"time_at,omitempty"`
	Source    string `json:"source,omitempty"`
	CreatedAt int64  `json:"created_at"`
	UpdatedAt int64  `json:"updated_at"`
	Seen      int    `json:"seen"`
	// Embedding is the vector as stored (little-endian float32) by the
	// model Export names; Import keeps it only under the same model.
	Embedding []byte `json:"embedding,omitempty"`
}

// Export returns scope's current facts, oldest first, and the id of the
// embedding model their vectors come from ("" keyword-only).
func (s *Store) Export(ctx context.Context, scope string) ([]Portable, string, error) {
	if scope == "" {
		return nil, "", fmt.Errorf("%w: no scope", ErrInvalid)
	}
	model := ""
	if st := s.emb.Load(); st != nil {
		model = st.id
	}
	rows, err := s.db.QueryContext(ctx, `SELECT fact, keywords, persons, topic, time_text, time_at, source, created_at, updated_at, seen, embedding
		FROM memory_facts WHERE scope = ? AND superseded_by IS NULL ORDER BY id`, scope)
	if err != nil {
		return nil, "", fmt.Errorf("memory: export %s: %w", scope, err)
	}
	defer rows.Close()
	var out []Portable
	for rows.Next() {
		var p Portable
		var at sql.NullInt64
		if err := rows.Scan(&p.Text, &p.Keywords, &p.Persons, &p.Topic, &p.TimeText, &at, &p.Source, &p.CreatedAt, &p.UpdatedAt, &p.Seen, &p.Embedding); err != nil {
			return nil, "", fmt.Errorf("memory: export %s: %w", scope, err)
		}
		if at.Valid {
			p.TimeAt = &at.Int64
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("memory: export %s: %w", scope, err)
	}
	return out, model, nil
}

// Import adds facts to scope in one transaction. A fact whose text scope
// already holds is skipped (an import repeated after a failure adds
// nothing twice). Vectors made by another model than this box's (model)
// are dropped and made again in the background (Backfill). It returns how
// many facts were added.
func (s *Store) Import(ctx context.Context, scope, model string, facts []Portable) (int, error) {
	if scope == "" {
		return 0, fmt.Errorf("%w: no scope", ErrInvalid)
	}
	st := s.emb.Load()
	keep := st != nil && model == st.id
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("memory: import %s: %w", scope, err)
	}
	defer tx.Rollback()
	type added struct {
		id  int64
		vec []float32
	}
	// The texts scope holds, read once (a query per fact would scan the
	// scope per fact).
	have := map[string]bool{}
	rows, err := tx.QueryContext(ctx, `SELECT fact FROM memory_facts WHERE scope = ? AND superseded_by IS NULL`, scope)
	if err != nil {
		return 0, fmt.Errorf("memory: import %s: %w", scope, err)
	}
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return 0, fmt.Errorf("memory: import %s: %w", scope, err)
		}
		have[t] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("memory: import %s: %w", scope, err)
	}
	var news []added
	for _, p := range facts {
		if p.Text == "" || len(p.Text) > MaxFactBytes || have[p.Text] {
			continue
		}
		have[p.Text] = true
		var blob []byte
		var vec []float32
		if keep {
			if v, ok := decodeVector(p.Embedding, st.dim); ok {
				blob, vec = p.Embedding, v
			}
		}
		var at sql.NullInt64
		if p.TimeAt != nil {
			at = sql.NullInt64{Int64: *p.TimeAt, Valid: true}
		}
		var id int64
		err := tx.QueryRowContext(ctx, `INSERT INTO memory_facts
			(scope, tag, fact, keywords, persons, topic, time_text, time_at, source, created_at, updated_at, seen, embedding)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			scope, scopeTag(scope), p.Text, p.Keywords, p.Persons, p.Topic, p.TimeText, at, p.Source, p.CreatedAt, p.UpdatedAt, max(p.Seen, 1), blob).Scan(&id)
		if err != nil {
			return 0, fmt.Errorf("memory: import %s: %w", scope, err)
		}
		if blob != nil && s.hasVec.Load() {
			if err := insertVec(ctx, tx, id, scope, blob); err != nil {
				return 0, err
			}
		}
		news = append(news, added{id, vec})
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("memory: import %s: %w", scope, err)
	}
	for _, a := range news {
		if a.vec != nil {
			s.bits.put(scope, a.id, a.vec)
		}
	}
	if len(news) > 0 {
		s.changed(scope, false)
		if st != nil && !keep {
			s.backfillLater()
		}
	}
	return len(news), nil
}

// Purge deletes every fact of scope, history included, and returns how
// many rows went.
func (s *Store) Purge(ctx context.Context, scope string) (int, error) {
	if scope == "" {
		return 0, fmt.Errorf("%w: no scope", ErrInvalid)
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("memory: purge %s: %w", scope, err)
	}
	defer tx.Rollback()
	if s.hasVec.Load() {
		if _, err := tx.ExecContext(ctx, `DELETE FROM memory_vec WHERE rowid IN (SELECT id FROM memory_facts WHERE scope = ?)`, scope); err != nil {
			return 0, fmt.Errorf("memory: purge %s: %w", scope, err)
		}
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM memory_facts WHERE scope = ?`, scope)
	if err != nil {
		return 0, fmt.Errorf("memory: purge %s: %w", scope, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("memory: purge %s: %w", scope, err)
	}
	n, _ := res.RowsAffected()
	s.bits.drop(scope)
	s.changed(scope, true)
	return int(n), nil
}

// backfillLater embeds the facts without a vector in the background.
func (s *Store) backfillLater() {
	if s.bgCtx.Err() != nil {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		if n, err := s.Backfill(s.bgCtx); err != nil && s.bgCtx.Err() == nil {
			s.logger.Warn("embedding imported facts failed", "err", err, "embedded", n)
		}
	}()
}
