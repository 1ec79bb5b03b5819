package memory

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"agent/pkg/clip"
	"agent/pkg/clock"
	"agent/pkg/llm"
	"agent/pkg/session"
)

// LLM is the part of *llm.Client compression uses.
type LLM interface {
	Chat(ctx context.Context, req llm.Request) (llm.Response, error)
}

// CompressorConfig tunes the compressor. Zero fields take the defaults.
type CompressorConfig struct {
	// SessionMax: a session with more uncompressed messages than this is
	// compressed; 40. Overlap messages stay uncompressed, to be compressed
	// with the next batch for continuity; 5.
	SessionMax int
	Overlap    int
	Model      string // "" = the client's
	// Backoff after a failed LLM call for a session, doubling to MaxBackoff;
	// 1m and 1h.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Sweep is how often sessions are checked for work a missed trigger
	// left (closed sessions with uncompressed messages); 10m.
	Sweep time.Duration
	// TranscriptBytes bounds the transcript sent in one request; 24 KiB.
	TranscriptBytes int
	// Quiet: work triggered by a turn waits until no turn has ended for
	// this long (2s), but at most MaxDelay (30s) — compression embeds and
	// writes, and on a two-core box it would otherwise land on the next
	// turn's critical milliseconds.
	Quiet    time.Duration
	MaxDelay time.Duration
	// Clock times the quiet period, the sweep and the back-off. nil: the
	// Store's clock (its now, with real timers).
	Clock clock.Clock
}

func (c CompressorConfig) withDefaults() CompressorConfig {
	if c.SessionMax <= 0 {
		c.SessionMax = 40
	}
	if c.Overlap < 0 || c.Overlap >= c.SessionMax {
		c.Overlap = 0
	} else if c.Overlap == 0 {
		c.Overlap = 5
	}
	if c.Backoff <= 0 {
		c.Backoff = time.Minute
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = time.Hour
	}
	if c.Sweep <= 0 {
		c.Sweep = 10 * time.Minute
	}
	if c.TranscriptBytes <= 0 {
		c.TranscriptBytes = 24 << 10
	}
	if c.Quiet <= 0 {
		c.Quiet = 2 * time.Second
	}
	if c.MaxDelay <= 0 {
		c.MaxDelay = 30 * time.Second
	}
	return c
}

// Compressor turns the messages leaving sessions into facts, in one
// background worker: the second memory layer. A batch is sent to the LLM
// with the scope's existing facts that look related; the reply is a JSON
// list of facts, each stored through Store.Add (dedup, supersede). A reply
// that is not valid JSON is asked for again once, then the batch is dropped
// with a log line; the session's messages are never touched.
type Compressor struct {
	cfg      CompressorConfig
	mem      *Store
	llm      LLM
	sessions *session.Store
	db       *sql.DB
	logger   *slog.Logger
	clock    clock.Clock

	mu      sync.Mutex
	queued  map[int64]bool
	retryAt map[int64]time.Time
	backoff map[int64]time.Duration
	queue   chan int64
	wake    chan struct{}
	// lastTurn is when Notify was last called (unix nanoseconds on the
	// clock): the quiet period counts from it.
	lastTurn atomic.Int64

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// NewCompressor returns a compressor; Start runs it.
func NewCompressor(cfg CompressorConfig, mem *Store, client LLM, sessions *session.Store, logger *slog.Logger) *Compressor {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.Func(mem.now)
	}
	return &Compressor{
		cfg: cfg.withDefaults(), mem: mem, llm: client, sessions: sessions, db: mem.db,
		logger: logger.With("component", "memory"), clock: clk,
		queued: map[int64]bool{}, retryAt: map[int64]time.Time{}, backoff: map[int64]time.Duration{},
		queue: make(chan int64, 1024), wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// Start runs the worker until Close.
func (c *Compressor) Start() {
	go c.run()
}

// Close stops the worker, abandoning (not losing: the session keeps it) a
// batch in flight, and waits for it.
func (c *Compressor) Close(ctx context.Context) error {
	c.once.Do(func() { close(c.stop) })
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Notify tells the compressor that session id grew (after a turn) or was
// closed (/new). It never blocks.
func (c *Compressor) Notify(sessionID int64) {
	c.lastTurn.Store(c.clock.Now().UnixNano())
	c.enqueue(sessionID)
}

// enqueue queues a session for the worker unless it is queued already.
func (c *Compressor) enqueue(sessionID int64) {
	c.mu.Lock()
	if c.queued[sessionID] {
		c.mu.Unlock()
		return
	}
	c.queued[sessionID] = true
	c.mu.Unlock()
	select {
	case c.queue <- sessionID:
	default: // full: the sweep finds it
		c.mu.Lock()
		delete(c.queued, sessionID)
		c.mu.Unlock()
	}
}

func (c *Compressor) run() {
	defer close(c.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-c.stop
		cancel()
	}()
	c.sweep(ctx)
	tick := c.clock.NewTimer(c.cfg.Sweep)
	defer func() { tick.Stop() }()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C():
			c.sweep(ctx)
			tick = c.clock.NewTimer(c.cfg.Sweep)
		case id := <-c.queue:
			c.awaitQuiet(ctx)
			c.mu.Lock()
			delete(c.queued, id)
			c.mu.Unlock()
			if _, err := c.Compress(ctx, id); err != nil && ctx.Err() == nil {
				c.logger.Warn("memory compression failed", "session", id, "err", err)
			}
		}
	}
}

// awaitQuiet returns once no turn has ended for Quiet, after MaxDelay at
// the latest, or when ctx ends.
func (c *Compressor) awaitQuiet(ctx context.Context) {
	deadline := c.clock.Now().Add(c.cfg.MaxDelay)
	for {
		now := c.clock.Now()
		wait := c.cfg.Quiet - now.Sub(time.Unix(0, c.lastTurn.Load()))
		wait = min(wait, deadline.Sub(now))
		if wait <= 0 {
			return
		}
		t := c.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// sweep queues the sessions with work: open ones over the limit, closed
// ones with anything uncompressed.
func (c *Compressor) sweep(ctx context.Context) {
	rows, err := c.db.QueryContext(ctx, `SELECT id FROM sessions
		WHERE (closed_at IS NULL AND message_count - memory_seq > ?)
		   OR (closed_at IS NOT NULL AND message_count > memory_seq)
		ORDER BY last_at LIMIT 512`, c.cfg.SessionMax)
	if err != nil {
		if ctx.Err() == nil {
			c.logger.Warn("memory sweep failed", "err", err)
		}
		return
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if rows.Scan(&id) == nil {
			ids = append(ids, id)
		}
	}
	rows.Close()
	for _, id := range ids {
		c.enqueue(id)
	}
	// Facts stored while the embedder failed get their vectors now.
	if n, err := c.mem.Backfill(ctx); err != nil && ctx.Err() == nil {
		c.logger.Warn("embedding stored facts failed", "err", err, "embedded", n)
	}
}

// Outcome is what one Compress call did.
type Outcome struct {
	Messages int // messages read
	Facts    []Result
	Dropped  bool // the LLM's reply was unusable twice; the batch was skipped
	Skipped  string
}

// Compress compresses the next batch of session id, if it has one: for an
// open session, everything but the last Overlap messages once more than
// SessionMax are uncompressed; for a closed one, the rest.
func (c *Compressor) Compress(ctx context.Context, id int64) (Outcome, error) {
	var out Outcome
	c.mu.Lock()
	wait := c.retryAt[id]
	c.mu.Unlock()
	if c.clock.Now().Before(wait) {
		out.Skipped = "backing off after a failure"
		return out, nil
	}
	var (
		key         string
		count, done int64
		closed      sql.NullInt64
	)
	err := c.db.QueryRowContext(ctx, `SELECT key, message_count, memory_seq, closed_at FROM sessions WHERE id = ?`, id).
		Scan(&key, &count, &done, &closed)
	if errors.Is(err, sql.ErrNoRows) {
		out.Skipped = "no such session"
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("memory: compress session %d: %w", id, err)
	}
	upto := count
	if !closed.Valid {
		if count-done <= int64(c.cfg.SessionMax) {
			out.Skipped = "under the limit"
			return out, nil
		}
		upto = count - int64(c.cfg.Overlap)
	}
	if upto <= done {
		out.Skipped = "nothing new"
		return out, nil
	}
	scope, err := session.Key(key).MemoryScope()
	if err != nil {
		return out, fmt.Errorf("memory: compress session %d: %w", id, err)
	}
	_, msgs, err := c.sessions.Range(ctx, id, done, upto)
	if err != nil {
		return out, err
	}
	out.Messages = len(msgs)
	transcript, userText := c.transcript(msgs)
	if strings.TrimSpace(userText) == "" {
		// Only tool traffic or empty turns: nothing a person said.
		return out, c.advance(ctx, id, done, upto)
	}
	facts, dropped, err := c.extract(ctx, scope, transcript, userText)
	if err != nil {
		c.failed(id)
		return out, err
	}
	c.succeeded(id)
	out.Dropped = dropped
	for _, f := range facts {
		f.Source = "session:" + strconv.FormatInt(id, 10)
		res, err := c.mem.Add(ctx, scope, f)
		if err != nil {
			if errors.Is(err, ErrInvalid) {
				c.logger.Info("memory fact skipped", "session", id, "err", err)
				continue
			}
			return out, err // not advanced: the batch runs again, and dedup absorbs what was stored
		}
		out.Facts = append(out.Facts, res)
	}
	c.logger.Info("session compressed into memory", "session", id, "messages", len(msgs), "facts", len(out.Facts), "dropped", dropped)
	return out, c.advance(ctx, id, done, upto)
}

func (c *Compressor) advance(ctx context.Context, id, from, to int64) error {
	if _, err := c.db.ExecContext(ctx, `UPDATE sessions SET memory_seq = ? WHERE id = ? AND memory_seq = ?`, to, id, from); err != nil {
		return fmt.Errorf("memory: compress session %d: %w", id, err)
	}
	return nil
}

func (c *Compressor) failed(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.backoff[id]
	if b == 0 {
		b = c.cfg.Backoff
	} else {
		b = min(2*b, c.cfg.MaxBackoff)
	}
	c.backoff[id] = b
	c.retryAt[id] = c.clock.Now().Add(b)
}

func (c *Compressor) succeeded(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.backoff, id)
	delete(c.retryAt, id)
}

// transcript renders msgs for the compression request, bounded: tool
// results are shortened and the oldest lines go first when it is too long.
// userText is what the user said, for finding related facts.
func (c *Compressor) transcript(msgs []llm.Message) (string, string) {
	var lines []string
	var user strings.Builder
	for _, m := range msgs {
		text := strings.TrimSpace(m.Content)
		switch m.Role {
		case llm.RoleUser:
			user.WriteString(text + "\n")
			lines = append(lines, "User: "+clip.Bytes(text, 4000))
		case llm.RoleAssistant:
			for _, tc := range m.ToolCalls {
				lines = append(lines, "Assistant called "+tc.Function.Name+" "+clip.Bytes(tc.Function.Arguments, 300))
			}
			if text != "" {
				lines = append(lines, "Assistant: "+clip.Bytes(text, 4000))
			}
		case llm.RoleTool:
			lines = append(lines, "Tool result: "+clip.Bytes(collapseSpace(text), 300))
		}
	}
	size := 0
	start := len(lines)
	for start > 0 && size+len(lines[start-1]) < c.cfg.TranscriptBytes {
		start--
		size += len(lines[start]) + 1
	}
	return strings.Join(lines[start:], "\n"), clip.Bytes(user.String(), MaxQueryBytes)
}

const compressInstructions = `You maintain the long-term memory of an assistant about the user it talks to.
Read the conversation excerpt and extract the facts worth remembering for later conversations:
stable preferences, personal details, plans and appointments, decisions, people and their roles,
commitments, and anything the user asked to be remembered. Skip small talk, questions without
answers, and what the assistant merely said it would do.

Write each fact as one self-contained sentence in the language of the conversation, about "the user"
(or the person it concerns), with absolute dates where the conversation gives them.

Existing facts are listed with their ids. If a new fact updates or contradicts one of them
(the user moved, changed a preference, a plan was cancelled), give that fact's id in "supersedes".
Do not repeat existing facts that did not change.

Reply with only a JSON object, no prose and no code fences:
{"facts": [{"fact": "...", "keywords": ["..."], "persons": ["..."], "time": "YYYY-MM-DD or empty",
"topic": "one or two words", "supersedes": null}]}
Reply {"facts": []} when there is nothing worth remembering.`

// extract asks the LLM for facts. A reply that does not parse is asked for
// again once with the error; a second bad reply drops the batch (dropped).
// An LLM failure is returned as an error.
func (c *Compressor) extract(ctx context.Context, scope, transcript, userText string) ([]Input, bool, error) {
	related, err := c.mem.Search(ctx, scope, userText, 10)
	if err != nil {
		return nil, false, err
	}
	shown := map[int64]bool{}
	var b strings.Builder
	b.WriteString("Conversation excerpt:\n")
	b.WriteString(transcript)
	b.WriteString("\n\nExisting facts:\n")
	if len(related) == 0 {
		b.WriteString("(none)\n")
	}
	for _, h := range related {
		shown[h.ID] = true
		fmt.Fprintf(&b, "- id %d: %s\n", h.ID, h.Text)
	}
	msgs := []llm.Message{
		{Role: llm.RoleSystem, Content: compressInstructions},
		{Role: llm.RoleUser, Content: b.String()},
	}
	temp := 0.0
	for attempt := 1; ; attempt++ {
		resp, err := c.llm.Chat(ctx, llm.Request{Model: c.cfg.Model, Messages: msgs, Temperature: &temp})
		if err != nil {
			return nil, false, fmt.Errorf("memory: compression request: %w", err)
		}
		facts, perr := ParseFacts(resp.Message.Content)
		if perr == nil {
			for i := range facts {
				if facts[i].Supersedes != 0 && !shown[facts[i].Supersedes] {
					// Only facts we showed (this scope's) may be replaced.
					c.logger.Warn("compression named a fact it was not shown; ignored", "supersedes", facts[i].Supersedes)
					facts[i].Supersedes = 0
				}
			}
			return facts, false, nil
		}
		if attempt == 2 {
			c.logger.Warn("compression reply unusable twice; batch dropped (the session keeps its messages)",
				"scope", scope, "err", perr, "reply", clip.Bytes(resp.Message.Content, 200))
			return nil, true, nil
		}
		c.logger.Info("compression reply unusable; asking again", "err", perr)
		msgs = append(msgs, resp.Message, llm.Message{Role: llm.RoleUser, Content: "That reply was not usable: " + perr.Error() +
			`. Reply with only the JSON object {"facts": [...]} as specified.`})
	}
}

// MaxFactsPerBatch bounds what one compression reply may store.
const MaxFactsPerBatch = 50

// ParseFacts reads the compression reply: {"facts": [...]} or a bare
// array, optionally in a code fence. Each fact needs a non-empty "fact";
// keywords and persons may be lists or comma-separated strings;
// supersedes a number, a numeric string or null. An entry without a fact
// is skipped; a reply that is not such JSON at all is an error.
func ParseFacts(reply string) ([]Input, error) {
	s := strings.TrimSpace(reply)
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		rest = strings.TrimPrefix(rest, "json")
		if i := strings.LastIndex(rest, "```"); i >= 0 {
			rest = rest[:i]
		}
		s = strings.TrimSpace(rest)
	}
	if s == "" {
		return nil, errors.New("empty reply")
	}
	var raw []json.RawMessage
	if s[0] == '[' {
		if err := json.Unmarshal([]byte(s), &raw); err != nil {
			return nil, fmt.Errorf("invalid JSON: %v", err)
		}
	} else {
		var obj struct {
			Facts *[]json.RawMessage `json:"facts"`
		}
		if err := json.Unmarshal([]byte(s), &obj); err != nil {
			return nil, fmt.Errorf("invalid JSON: %v", err)
		}
		if obj.Facts == nil {
			return nil, errors.New(`no "facts" list`)
		}
		raw = *obj.Facts
	}
	var out []Input
	for _, r := range raw {
		var f struct {
			Fact       string          `json:"fact"`
			Keywords   json.RawMessage `json:"keywords"`
			Persons    json.RawMessage `json:"persons"`
			Time       json.RawMessage `json:"time"`
			Topic      json.RawMessage `json:"topic"`
			Supersedes json.RawMessage `json:"supersedes"`
		}
		if err := json.Unmarshal(r, &f); err != nil {
			continue // not an object: skip the entry
		}
		if strings.TrimSpace(f.Fact) == "" || len(f.Fact) > MaxFactBytes {
			continue
		}
		in := Input{Text: f.Fact, Keywords: stringList(f.Keywords), Persons: stringList(f.Persons),
			Time: scalarString(f.Time), Topic: scalarString(f.Topic), Supersedes: idOf(f.Supersedes)}
		out = append(out, in)
		if len(out) == MaxFactsPerBatch {
			break
		}
	}
	return out, nil
}

func stringList(r json.RawMessage) []string {
	var l []any
	if json.Unmarshal(r, &l) == nil {
		var out []string
		for _, v := range l {
			if s := scalarOf(v); s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	if s := scalarString(r); s != "" {
		return strings.Split(s, ",")
	}
	return nil
}

func scalarString(r json.RawMessage) string {
	var v any
	if json.Unmarshal(r, &v) != nil {
		return ""
	}
	return scalarOf(v)
}

func scalarOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	return ""
}

func idOf(r json.RawMessage) int64 {
	var v any
	if json.Unmarshal(r, &v) != nil {
		return 0
	}
	switch x := v.(type) {
	case float64:
		if x > 0 && x == float64(int64(x)) {
			return int64(x)
		}
	case string:
		if n, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(x), "#"), 10, 64); err == nil && n > 0 {
			return n
		}
	case []any: // a list: take the first id
		if len(x) > 0 {
			b, _ := json.Marshal(x[0])
			return idOf(b)
		}
	}
	return 0
}
