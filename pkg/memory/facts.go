package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"agent/pkg/clip"
)

// Fact is one remembered statement.
type Fact struct {
	ID       int64
	Scope    string
	Text     string
	Keywords []string
	Persons  []string
	Topic    string
	// TimeText is the time the fact refers to as the model wrote it; Time
	// is it parsed (zero when it could not be).
	TimeText string
	Time     time.Time
	Source   string // "session:ID", "tool", "admin"
	Created  time.Time
	Updated  time.Time // last stored or seen again
	Seen     int       // how many times it was stored (duplicates refresh it)
	// SupersededBy is the fact that replaced this one (0: current).
	SupersededBy int64
	SupersededAt time.Time
}

// Current reports whether f is the newest version of its fact.
func (f Fact) Current() bool { return f.SupersededBy == 0 }

// Input is a fact to store.
type Input struct {
	Text     string
	Keywords []string
	Persons  []string
	Topic    string
	Time     string // free text or ISO 8601; parsed when it can be
	// Supersedes names a current fact of the same scope that this one
	// corrects or contradicts; it is kept as history.
	Supersedes int64
	Source     string
}

// Action says what Add did.
type Action string

// Actions.
const (
	Inserted   Action = "inserted"
	Duplicate  Action = "duplicate"  // an equal fact was refreshed instead
	Superseded Action = "superseded" // stored, replacing an older fact
)

// Result is the outcome of Add.
type Result struct {
	ID     int64 // the stored or refreshed fact
	Action Action
	// Of is the fact that was refreshed (Duplicate) or replaced
	// (Superseded); Similarity its cosine to the new text when known.
	Of         int64
	Similarity float64
}

func clean(in Input) (Input, error) {
	in.Text = collapseSpace(in.Text)
	if in.Text == "" {
		return in, fmt.Errorf("%w: empty fact", ErrInvalid)
	}
	if len(in.Text) > MaxFactBytes {
		return in, fmt.Errorf("%w: fact is %d bytes, at most %d", ErrInvalid, len(in.Text), MaxFactBytes)
	}
	if !utf8.ValidString(in.Text) {
		in.Text = strings.ToValidUTF8(in.Text, "\uFFFD")
	}
	in.Keywords = cleanList(in.Keywords)
	in.Persons = cleanList(in.Persons)
	in.Topic = clip.Bytes(collapseSpace(in.Topic), 100)
	in.Time = clip.Bytes(collapseSpace(in.Time), 100)
	in.Source = clip.Bytes(in.Source, 100)
	return in, nil
}

// cleanList trims, drops empty and repeated (case-insensitively) items
// and bounds the joined size.
func cleanList(items []string) []string {
	var out []string
	size := 0
	for _, it := range items {
		it = strings.ReplaceAll(collapseSpace(it), ",", " ")
		it = clip.Bytes(it, 64)
		if it == "" || slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, it) }) {
			continue
		}
		if size+len(it)+1 > MaxListBytes {
			break
		}
		size += len(it) + 1
		out = append(out, it)
	}
	return out
}

func collapseSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

func joinList(l []string) string { return strings.Join(l, ", ") }

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// parseTime reads the dates a model writes for a fact's time; zero when
// the text is not one of them ("tomorrow", "last summer").
func parseTime(s string, loc *time.Location) time.Time {
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02T15:04", "2006-01-02", "2006-01", "2006"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t
		}
	}
	return time.Time{}
}

// Add stores a fact in scope: a duplicate of a current fact (cosine >= the
// dedup threshold, or the same text) refreshes that fact and merges its
// keywords and persons; a fact naming a current one in Supersedes replaces
// it, keeping the old one as history; anything else is inserted.
func (s *Store) Add(ctx context.Context, scope string, in Input) (Result, error) {
	if scope == "" {
		return Result{}, fmt.Errorf("%w: no scope", ErrInvalid)
	}
	in, err := clean(in)
	if err != nil {
		return Result{}, err
	}
	st := s.emb.Load()
	var vec []float32
	if st != nil {
		if vec, err = s.embedOne(ctx, st, in.Text); err != nil {
			// Keep the fact; Backfill embeds it later.
			s.logger.Warn("embedding a fact failed; stored without a vector", "err", err)
			vec = nil
		}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	res, err := s.add(ctx, scope, in, st, vec)
	if err == nil {
		s.changed(scope, false)
	}
	return res, err
}

func (s *Store) add(ctx context.Context, scope string, in Input, st *embedderState, vec []float32) (Result, error) {
	now := s.now().UnixMilli()
	if in.Supersedes != 0 {
		ok, err := s.isCurrent(ctx, scope, in.Supersedes)
		if err != nil {
			return Result{}, err
		}
		if !ok {
			s.logger.Warn("fact names an unknown fact to supersede; storing it as new", "scope", scope, "supersedes", in.Supersedes)
			in.Supersedes = 0
		}
	}
	if in.Supersedes == 0 {
		dup, sim, err := s.duplicateOf(ctx, scope, in.Text, st, vec)
		if err != nil {
			return Result{}, err
		}
		if dup != 0 {
			if err := s.refresh(ctx, dup, in, now); err != nil {
				return Result{}, err
			}
			return Result{ID: dup, Action: Duplicate, Of: dup, Similarity: sim}, nil
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Result{}, fmt.Errorf("memory: add: %w", err)
	}
	defer tx.Rollback()
	var blob []byte
	if vec != nil {
		blob = encodeVector(vec)
	}
	var timeAt sql.NullInt64
	if t := parseTime(in.Time, s.cfg.Location); !t.IsZero() {
		timeAt = sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
	}
	var id int64
	err = tx.QueryRowContext(ctx, `INSERT INTO memory_facts
		(scope, tag, fact, keywords, persons, topic, time_text, time_at, source, created_at, updated_at, embedding)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		scope, scopeTag(scope), in.Text, joinList(in.Keywords), joinList(in.Persons), in.Topic, in.Time, timeAt, in.Source, now, now, blob).Scan(&id)
	if err != nil {
		return Result{}, fmt.Errorf("memory: add: %w", err)
	}
	if blob != nil {
		if err := insertVec(ctx, tx, id, scope, blob); err != nil {
			return Result{}, err
		}
	}
	res := Result{ID: id, Action: Inserted}
	if in.Supersedes != 0 {
		if _, err := tx.ExecContext(ctx, `UPDATE memory_facts SET superseded_by = ?, superseded_at = ? WHERE id = ?`,
			id, now, in.Supersedes); err != nil {
			return Result{}, fmt.Errorf("memory: supersede %d: %w", in.Supersedes, err)
		}
		if err := s.dropVec(ctx, tx, in.Supersedes); err != nil {
			return Result{}, fmt.Errorf("memory: supersede %d: %w", in.Supersedes, err)
		}
		res.Action, res.Of = Superseded, in.Supersedes
	}
	if err := tx.Commit(); err != nil {
		return Result{}, fmt.Errorf("memory: add: %w", err)
	}
	if blob != nil {
		s.bits.put(scope, id, vec)
	}
	if in.Supersedes != 0 {
		s.bits.remove(scope, in.Supersedes)
	}
	return res, nil
}

func (s *Store) isCurrent(ctx context.Context, scope string, id int64) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM memory_facts WHERE id = ? AND scope = ? AND superseded_by IS NULL`, id, scope).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("memory: fact %d: %w", id, err)
	}
	return n == 1, nil
}

// duplicateOf finds the current fact of scope that text repeats: the same
// text, or the nearest vector at or above the dedup threshold.
func (s *Store) duplicateOf(ctx context.Context, scope, text string, st *embedderState, vec []float32) (int64, float64, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, `SELECT id FROM memory_facts
		WHERE scope = ? AND superseded_by IS NULL AND fact = ? ORDER BY id LIMIT 1`, scope, text).Scan(&id)
	if err == nil {
		return id, 1, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, 0, fmt.Errorf("memory: dedup: %w", err)
	}
	if vec == nil {
		return 0, 0, nil
	}
	near, err := s.nearest(ctx, scope, vec, st, 1)
	if err != nil {
		return 0, 0, err
	}
	if len(near) == 1 && near[0].sim >= s.cfg.DedupThreshold-similarityEpsilon {
		return near[0].id, near[0].sim, nil
	}
	return 0, 0, nil
}

// refresh marks fact id as seen again now, merging in's lists into it.
func (s *Store) refresh(ctx context.Context, id int64, in Input, now int64) error {
	var kw, ps, topic string
	if err := s.db.QueryRowContext(ctx, `SELECT keywords, persons, topic FROM memory_facts WHERE id = ?`, id).Scan(&kw, &ps, &topic); err != nil {
		return fmt.Errorf("memory: refresh %d: %w", id, err)
	}
	kws := cleanList(append(splitList(kw), in.Keywords...))
	pss := cleanList(append(splitList(ps), in.Persons...))
	if topic == "" {
		topic = in.Topic
	}
	_, err := s.db.ExecContext(ctx, `UPDATE memory_facts SET updated_at = ?, seen = seen + 1, keywords = ?, persons = ?, topic = ?
		WHERE id = ?`, now, joinList(kws), joinList(pss), topic, id)
	if err != nil {
		return fmt.Errorf("memory: refresh %d: %w", id, err)
	}
	return nil
}

// Correct replaces current fact id of scope with text (the correct_memory
// tool): the old version is kept as history and no longer retrieved.
func (s *Store) Correct(ctx context.Context, scope string, id int64, text, source string) (Result, error) {
	old, err := s.Get(ctx, scope, id)
	if err != nil {
		return Result{}, err
	}
	if !old.Current() {
		return Result{}, fmt.Errorf("%w: fact %d was already replaced by %d", ErrNotFound, id, old.SupersededBy)
	}
	return s.Add(ctx, scope, Input{Text: text, Keywords: old.Keywords, Persons: old.Persons, Topic: old.Topic,
		Time: old.TimeText, Supersedes: id, Source: source})
}

// Forget deletes fact id of scope ("" = any scope: the operator) with its
// history. It returns the fact as it was.
func (s *Store) Forget(ctx context.Context, scope string, id int64) (Fact, error) {
	f, err := s.Get(ctx, scope, id)
	if err != nil {
		return Fact{}, err
	}
	for f.SupersededBy != 0 { // forget the whole fact, from its newest version
		if f, err = s.Get(ctx, scope, f.SupersededBy); err != nil {
			return Fact{}, err
		}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.deleteChain(ctx, f.ID); err != nil {
		return Fact{}, err
	}
	s.bits.remove(f.Scope, f.ID) // its older versions were not in the index
	s.changed(f.Scope, true)
	return f, nil
}

// deleteChain deletes fact id; ON DELETE CASCADE takes its older versions.
func (s *Store) deleteChain(ctx context.Context, id int64) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("memory: forget %d: %w", id, err)
	}
	defer tx.Rollback()
	if s.hasVec.Load() {
		if _, err := tx.ExecContext(ctx, `DELETE FROM memory_vec WHERE rowid IN (
			WITH RECURSIVE chain(id) AS (SELECT ? UNION SELECT f.id FROM memory_facts f JOIN chain c ON f.superseded_by = c.id)
			SELECT id FROM chain)`, id); err != nil {
			return fmt.Errorf("memory: forget %d: %w", id, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM memory_facts WHERE id = ?`, id); err != nil {
		return fmt.Errorf("memory: forget %d: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("memory: forget %d: %w", id, err)
	}
	return nil
}

// MaxForget is how many facts one /forget may delete; a text matching more
// is refused (ErrTooMany) so a short word cannot wipe a memory.
const MaxForget = 10

// forgetSimilarity is the cosine from which a fact counts as "about" the
// /forget text even without sharing its words.
const forgetSimilarity = 0.85

// ForgetMatching deletes the current facts of scope that contain text (or,
// with a model, mean nearly the same), with their history: what /forget
// TEXT does. "#ID" names one fact.
func (s *Store) ForgetMatching(ctx context.Context, scope, text string) ([]Fact, error) {
	text = collapseSpace(text)
	if text == "" {
		return nil, fmt.Errorf("%w: say what to forget", ErrInvalid)
	}
	if rest, ok := strings.CutPrefix(text, "#"); ok {
		var id int64
		if _, err := fmt.Sscan(rest, &id); err == nil && id > 0 {
			f, err := s.Forget(ctx, scope, id)
			if err != nil {
				return nil, err
			}
			return []Fact{f}, nil
		}
	}
	ids := map[int64]bool{}
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM memory_facts WHERE scope = ? AND superseded_by IS NULL
		AND (instr(lower(fact), lower(?)) > 0 OR instr(lower(keywords), lower(?)) > 0) LIMIT ?`, scope, text, text, MaxForget+1)
	if err != nil {
		return nil, fmt.Errorf("memory: forget: %w", err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("memory: forget: %w", err)
		}
		ids[id] = true
	}
	rows.Close()
	if st := s.emb.Load(); st != nil {
		if vec, err := s.embedOne(ctx, st, text); err == nil {
			near, err := s.nearest(ctx, scope, vec, st, MaxForget+1)
			if err != nil {
				return nil, err
			}
			for _, n := range near {
				if n.sim >= forgetSimilarity {
					ids[n.id] = true
				}
			}
		}
	}
	if len(ids) > MaxForget {
		return nil, fmt.Errorf("%w: %q matches more than %d facts; be more specific or forget them one by one (#ID)", ErrTooMany, text, MaxForget)
	}
	var out []Fact
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		f, err := s.Forget(ctx, scope, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, f)
	}
	return out, nil
}

const factCols = `id, scope, fact, keywords, persons, topic, time_text, time_at, source, created_at, updated_at, seen, superseded_by, superseded_at`

func scanFact(r interface{ Scan(...any) error }) (Fact, error) {
	var (
		f                Fact
		kw, ps           string
		timeAt, supAt    sql.NullInt64
		supBy            sql.NullInt64
		created, updated int64
	)
	if err := r.Scan(&f.ID, &f.Scope, &f.Text, &kw, &ps, &f.Topic, &f.TimeText, &timeAt, &f.Source,
		&created, &updated, &f.Seen, &supBy, &supAt); err != nil {
		return Fact{}, err
	}
	f.Keywords, f.Persons = splitList(kw), splitList(ps)
	f.Created, f.Updated = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
	if timeAt.Valid {
		f.Time = time.UnixMilli(timeAt.Int64).UTC()
	}
	if supBy.Valid {
		f.SupersededBy = supBy.Int64
	}
	if supAt.Valid {
		f.SupersededAt = time.UnixMilli(supAt.Int64).UTC()
	}
	return f, nil
}

// Get returns fact id of scope ("" = any scope), current or not.
func (s *Store) Get(ctx context.Context, scope string, id int64) (Fact, error) {
	f, err := scanFact(s.db.QueryRowContext(ctx, `SELECT `+factCols+` FROM memory_facts WHERE id = ?1 AND (?2 = '' OR scope = ?2)`, id, scope))
	if errors.Is(err, sql.ErrNoRows) {
		return Fact{}, fmt.Errorf("%w: #%d", ErrNotFound, id)
	}
	if err != nil {
		return Fact{}, fmt.Errorf("memory: fact %d: %w", id, err)
	}
	return f, nil
}

// Filter selects facts for List and Recall.
type Filter struct {
	Scope   string // "" = every scope (operators only)
	Topic   string // substring, case-insensitive
	Person  string // substring, case-insensitive
	From    time.Time
	To      time.Time // exclusive; both compare the fact's time, else when it was stored
	History bool      // include superseded versions
	Limit   int       // default 50, at most 1000
	Offset  int
}

// List returns facts matching f, newest first.
func (s *Store) List(ctx context.Context, f Filter) ([]Fact, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	f.Limit = min(f.Limit, 1000)
	q := `SELECT ` + factCols + ` FROM memory_facts WHERE 1`
	var args []any
	if f.Scope != "" {
		q += ` AND scope = ?`
		args = append(args, f.Scope)
	}
	if !f.History {
		q += ` AND superseded_by IS NULL`
	}
	if f.Topic != "" {
		q += ` AND instr(lower(topic), lower(?)) > 0`
		args = append(args, f.Topic)
	}
	if f.Person != "" {
		q += ` AND instr(lower(persons), lower(?)) > 0`
		args = append(args, f.Person)
	}
	if !f.From.IsZero() {
		q += ` AND coalesce(time_at, created_at) >= ?`
		args = append(args, f.From.UnixMilli())
	}
	if !f.To.IsZero() {
		q += ` AND coalesce(time_at, created_at) < ?`
		args = append(args, f.To.UnixMilli())
	}
	q += ` ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?`
	args = append(args, f.Limit, f.Offset)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("memory: list: %w", err)
	}
	defer rows.Close()
	var out []Fact
	for rows.Next() {
		fact, err := scanFact(rows)
		if err != nil {
			return nil, fmt.Errorf("memory: list: %w", err)
		}
		out = append(out, fact)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory: list: %w", err)
	}
	return out, nil
}
