// Package memory is the agent's long-term memory: facts per memory scope (a
// user, or a group chat), compressed from sessions by the LLM, embedded
// locally, deduplicated, corrected and forgotten on request, and retrieved
// by a hybrid of vector search (sqlite-vec) and keyword search (FTS5 with
// the trigram tokenizer, so Chinese works), fused by reciprocal rank.
//
// Vectors are kept twice: the float32 embedding in memory_facts (exact
// scores) and a 1-bit-per-dimension copy in a sqlite-vec table partitioned
// by scope. A search scans the bits (Hamming distance; 48 bytes per fact
// for a 384-d model, so 100k facts are 4.8 MB instead of 150 MB) for a few
// dozen candidates and re-ranks them by exact cosine. Without an embedding
// model, retrieval is keyword-only and facts are stored without vectors;
// they are embedded when a model appears.
//
// Nothing here opens a network connection: the only remote call of the
// memory layer is the compression request, made through the LLM client the
// caller passes to the Compressor.
package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"agent/pkg/memory/factcount"
)

// Embedder turns texts into L2-normalised vectors (pkg/embed).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Dim() int
}

// Config tunes the store. Zero fields take the defaults noted.
type Config struct {
	// DedupThreshold: a new fact whose nearest fact of the same scope has a
	// cosine similarity >= this is a duplicate of it; 0.92.
	DedupThreshold float64
	// TopK facts go into the prompt's memory block; 5.
	TopK int
	// Candidates read from the bit index before exact re-ranking; 64 (or
	// 8×k when larger).
	Candidates int
	// FastBudget is how long a voice/hardware turn waits for a fresh
	// retrieval before it takes the cached block; 2ms. It waits only when
	// the query's embedding is cached (otherwise the embedding alone takes
	// longer): the cached block is taken at once and the retrieval runs
	// RefreshDelay later, off the turn's way.
	// ColdBudget is the wait when nothing is cached for the scope yet (its
	// first turn); 250ms.
	FastBudget time.Duration
	ColdBudget time.Duration
	// BlockCache is the number of scopes whose last memory block is kept in
	// memory for the fast path; 256. EmbedCache is the number of query
	// embeddings kept; 512.
	BlockCache int
	EmbedCache int
	// Location dates the facts in the memory block; UTC when nil.
	Location *time.Location
}

// Defaults.
const (
	DefaultDedupThreshold = 0.92
	DefaultTopK           = 5
	DefaultCandidates     = 64
	DefaultFastBudget     = 2 * time.Millisecond
	DefaultColdBudget     = 250 * time.Millisecond
	DefaultBlockCache     = 256
	DefaultEmbedCache     = 512

	// MaxFactBytes bounds one fact's text; MaxListBytes its keywords and
	// persons (each, joined).
	MaxFactBytes = 2000
	MaxListBytes = 500
	// MaxQueryBytes is the part of a query that is embedded and searched.
	MaxQueryBytes = 4000

	// similarityEpsilon absorbs float32 rounding at the dedup threshold: a
	// similarity within it of the threshold counts as reaching it.
	similarityEpsilon = 1e-6
)

func (c Config) withDefaults() Config {
	if c.DedupThreshold <= 0 || c.DedupThreshold > 1 {
		c.DedupThreshold = DefaultDedupThreshold
	}
	if c.TopK <= 0 {
		c.TopK = DefaultTopK
	}
	if c.Candidates <= 0 {
		c.Candidates = DefaultCandidates
	}
	if c.FastBudget <= 0 {
		c.FastBudget = DefaultFastBudget
	}
	if c.ColdBudget <= 0 {
		c.ColdBudget = DefaultColdBudget
	}
	if c.BlockCache <= 0 {
		c.BlockCache = DefaultBlockCache
	}
	if c.EmbedCache <= 0 {
		c.EmbedCache = DefaultEmbedCache
	}
	if c.Location == nil {
		c.Location = time.UTC
	}
	return c
}

// Errors.
var (
	// ErrNotFound: no current fact with that id in that scope.
	ErrNotFound = errors.New("memory: no such fact")
	// ErrInvalid: a fact or query that cannot be stored or run.
	ErrInvalid = errors.New("memory: invalid input")
	// ErrTooMany: a /forget text matching more facts than it may delete.
	ErrTooMany = errors.New("memory: too many matches")
)

// Store is the memory of every scope, on the agent's database. It is safe
// for concurrent use.
type Store struct {
	db     *sql.DB
	cfg    Config
	logger *slog.Logger
	now    func() time.Time

	emb     atomic.Pointer[embedderState]
	hasVec  atomic.Bool // the memory_vec table exists (from this or an earlier run)
	bits    *bitIndexes // the scopes' vectors in RAM (bitindex.go)
	writeMu sync.Mutex  // fact writes: dedup check and insert are one step

	cacheMu sync.Mutex // orders block caching against fact changes
	gen     uint64     // fact changes so far (guarded by cacheMu)
	// refreshing holds the scopes whose cached block is being rebuilt,
	// with the query to rebuild it for once more ("" = none) (cacheMu).
	refreshing map[string]string
	blocks     *lru[string, blockEntry]
	vectors    *lru[string, []float32]
	docFreqs   *lru[string, docFreqEntry] // words' fact counts (docFreq)

	bg       sync.WaitGroup // cache refreshes and backfills
	bgCtx    context.Context
	bgCancel context.CancelFunc
}

type embedderState struct {
	e   Embedder
	id  string
	dim int
}

// New returns the memory on db, whose schema pkg/store created. Without an
// embedder (SetEmbedder) it works keyword-only.
func New(db *sql.DB, cfg Config, logger *slog.Logger, now func() time.Time) *Store {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	cfg = cfg.withDefaults()
	s := &Store{
		db: db, cfg: cfg, logger: logger.With("component", "memory"), now: now,
		blocks:   newLRU[string, blockEntry](cfg.BlockCache),
		vectors:  newLRU[string, []float32](cfg.EmbedCache),
		docFreqs: newLRU[string, docFreqEntry](4096),

		refreshing: map[string]string{},
		bits:       newBitIndexes(),
	}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'memory_vec'`).Scan(&n); err == nil {
		s.hasVec.Store(n == 1)
	}
	return s
}

// dropVec removes the vectors of ids from the index (a fact superseded or
// forgotten while no model is loaded must not come back when one is).
func (s *Store) dropVec(ctx context.Context, tx execer, ids ...int64) error {
	if !s.hasVec.Load() {
		return nil
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `DELETE FROM memory_vec WHERE rowid = ?`, id); err != nil {
			return fmt.Errorf("memory: vector of %d: %w", id, err)
		}
	}
	return nil
}

// Semantic reports whether vector search is on (an embedding model is
// loaded).
func (s *Store) Semantic() bool { return s.emb.Load() != nil }

// SetEmbedder switches vector search on with e, whose model is named by id
// (any string that changes when the model does). The vector index is
// created for e's width; when the model changed since the facts were
// embedded, their vectors are dropped and recomputed in the background, as
// are those of facts stored while no model was loaded. Passing nil turns
// vector search off.
func (s *Store) SetEmbedder(ctx context.Context, e Embedder, id string) error {
	if e == nil {
		s.emb.Store(nil)
		return nil
	}
	if s.bgCtx.Err() != nil {
		return errors.New("memory: closed")
	}
	dim := e.Dim()
	if dim <= 0 || dim%8 != 0 || dim > 8192 {
		return fmt.Errorf("memory: embedding width %d: %w (want a positive multiple of 8)", dim, ErrInvalid)
	}
	if err := s.prepareVectors(ctx, dim, id); err != nil {
		return err
	}
	s.vectors.Clear()
	s.emb.Store(&embedderState{e: e, id: id, dim: dim})
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		n, err := s.Backfill(s.bgCtx)
		if err != nil {
			s.logger.Warn("embedding stored facts failed", "err", err, "embedded", n)
		} else if n > 0 {
			s.logger.Info("embedded stored facts", "facts", n)
		}
	}()
	return nil
}

// Wait blocks until background work (backfills, cache refreshes) is done.
func (s *Store) Wait() { s.bg.Wait() }

// Close stops background work (a backfill stops between batches; what it
// did not embed is embedded at the next start) and waits for it. The
// store stays usable for reads and writes; it starts no more background
// work and no longer uses the embedder.
func (s *Store) Close() {
	s.bgCancel()
	s.emb.Store(nil)
	s.bg.Wait()
}

// prepareVectors makes the vector index match a model of width dim named
// id, rebuilding it (and clearing stored embeddings) when either changed.
func (s *Store) prepareVectors(ctx context.Context, dim int, id string) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	oldDim, _ := s.meta(ctx, "memory_vec_dim")
	oldID, _ := s.meta(ctx, "memory_embed_model")
	var exists int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = 'memory_vec'`).Scan(&exists); err != nil {
		return fmt.Errorf("memory: vector index: %w", err)
	}
	if exists == 1 && oldDim == strconv.Itoa(dim) && oldID == id {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("memory: vector index: %w", err)
	}
	defer tx.Rollback()
	stmts := []string{`DROP TABLE IF EXISTS memory_vec`,
		// dim is our own validated integer.
		fmt.Sprintf(`CREATE VIRTUAL TABLE memory_vec USING vec0(scope TEXT PARTITION KEY, embedding bit[%d])`, dim)}
	if oldID != id || oldDim != strconv.Itoa(dim) {
		// Another model: its vectors are not comparable; Backfill redoes them.
		stmts = append(stmts, `UPDATE memory_facts SET embedding = NULL WHERE embedding IS NOT NULL`)
	} else {
		// Same model, index lost: rebuild it from the stored vectors.
		stmts = append(stmts, `INSERT INTO memory_vec(rowid, scope, embedding)
			SELECT id, scope, vec_quantize_binary(embedding) FROM memory_facts
			WHERE superseded_by IS NULL AND embedding IS NOT NULL`)
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("memory: vector index: %w", err)
		}
	}
	for k, v := range map[string]string{"memory_vec_dim": strconv.Itoa(dim), "memory_embed_model": id} {
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES (?, ?)
			ON CONFLICT(key) DO UPDATE SET value = excluded.value`, k, v); err != nil {
			return fmt.Errorf("memory: vector index: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("memory: vector index: %w", err)
	}
	s.bits.reset()
	s.hasVec.Store(true)
	if exists == 1 {
		s.logger.Info("vector index rebuilt for a new embedding model", "dim", dim, "model", id)
	}
	return nil
}

func (s *Store) meta(ctx context.Context, key string) (string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	return v, err
}

// Backfill embeds the current facts that have no vector (stored while no
// model was loaded, or before the model changed), in batches. It returns
// how many it embedded.
func (s *Store) Backfill(ctx context.Context) (int, error) {
	total := 0
	for {
		st := s.emb.Load()
		if st == nil {
			return total, nil
		}
		rows, err := s.db.QueryContext(ctx, `SELECT id, scope, fact FROM memory_facts
			WHERE embedding IS NULL AND superseded_by IS NULL ORDER BY id LIMIT 32`)
		if err != nil {
			return total, fmt.Errorf("memory: backfill: %w", err)
		}
		var (
			ids    []int64
			scopes []string
			texts  []string
		)
		for rows.Next() {
			var id int64
			var scope, text string
			if err := rows.Scan(&id, &scope, &text); err != nil {
				rows.Close()
				return total, fmt.Errorf("memory: backfill: %w", err)
			}
			ids, scopes, texts = append(ids, id), append(scopes, scope), append(texts, text)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return total, fmt.Errorf("memory: backfill: %w", err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		vecs, err := st.e.Embed(ctx, texts)
		if err != nil {
			return total, fmt.Errorf("memory: backfill: embed: %w", err)
		}
		s.writeMu.Lock()
		err = s.storeVectors(ctx, st, ids, scopes, vecs)
		s.writeMu.Unlock()
		if err != nil {
			return total, err
		}
		total += len(ids)
	}
}

func (s *Store) storeVectors(ctx context.Context, st *embedderState, ids []int64, scopes []string, vecs [][]float32) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("memory: store vectors: %w", err)
	}
	defer tx.Rollback()
	var stored []int64
	var storedScopes []string
	var storedVecs [][]float32
	for i, id := range ids {
		if len(vecs[i]) != st.dim {
			return fmt.Errorf("memory: store vectors: width %d, want %d", len(vecs[i]), st.dim)
		}
		blob := encodeVector(vecs[i])
		res, err := tx.ExecContext(ctx, `UPDATE memory_facts SET embedding = ? WHERE id = ? AND superseded_by IS NULL`, blob, id)
		if err != nil {
			return fmt.Errorf("memory: store vectors: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			continue // superseded or forgotten meanwhile
		}
		if err := insertVec(ctx, tx, id, scopes[i], blob); err != nil {
			return err
		}
		stored, storedScopes, storedVecs = append(stored, id), append(storedScopes, scopes[i]), append(storedVecs, vecs[i])
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("memory: store vectors: %w", err)
	}
	for i, id := range stored {
		s.bits.put(storedScopes[i], id, storedVecs[i])
	}
	return nil
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func insertVec(ctx context.Context, tx execer, id int64, scope string, blob []byte) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM memory_vec WHERE rowid = ?`, id); err != nil {
		return fmt.Errorf("memory: vector of %d: %w", id, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO memory_vec(rowid, scope, embedding) VALUES (?, ?, vec_quantize_binary(?))`,
		id, scope, blob); err != nil {
		return fmt.Errorf("memory: vector of %d: %w", id, err)
	}
	return nil
}

// Stats are counts for /status, doctor and agentctl.
type Stats struct {
	Facts      int  // current facts
	Superseded int  // older versions kept as history
	Unembedded int  // current facts without a vector
	Semantic   bool // vector search on
}

// Stats counts the facts of scope ("" = all scopes).
func (s *Store) Stats(ctx context.Context, scope string) (Stats, error) {
	c, err := factcount.Count(ctx, s.db, scope)
	return Stats{Facts: c.Facts, Superseded: c.Superseded, Unembedded: c.Unembedded, Semantic: s.Semantic()}, err
}
