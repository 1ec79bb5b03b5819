// Package cmdcache answers repeated voice and hardware commands on the
// box, without the model. A fast turn (voice, hardware) whose answer was
// one call of a tool that is safe to repeat (read-only or idempotent:
// tools.Tool's flags, MCP's readOnlyHint/idempotentHint) and a short reply
// is remembered with the utterance's embedding, for that channel, sender,
// device and profile and the exact set of tools offered then. The next
// utterance of the same device whose embedding is close enough (cosine at
// least voice.command_cache_threshold) runs the tool again with the same
// arguments and replies at once, also while the model service is down.
//
// The reply: the remembered one when the tool's result is unchanged, or
// with the old result replaced by the new one when the reply quoted it; an
// idempotent action's confirmation stands as it was; a read-only tool
// whose new result the reply cannot show goes to the model after all (or,
// with the model down, the result is the reply). Entries expire, a change
// of the tool set makes them unreachable (and they are dropped), owners
// list and clear them (agentctl cache).
package cmdcache

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"agent/pkg/clip"
	"agent/pkg/clock"
	"agent/pkg/llm"
)

// Embedder embeds utterances (*embed.Embedder).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Kind is what a tool promises about running it again.
type Kind int

const (
	// No: not safe to repeat without the model (the default).
	No Kind = iota
	// ReadOnly: changes nothing; its result may differ each time.
	ReadOnly
	// Idempotent: an action that is the same done twice (lights on).
	Idempotent
)

// Config of a Cache.
type Config struct {
	DB *sql.DB
	// Embedder returns the loaded model, nil while none is.
	Embedder func() Embedder
	// Enabled and Threshold are read per turn (voice.command_cache,
	// voice.command_cache_threshold).
	Enabled   func() bool
	Threshold func() float64
	// TTL is how long an entry lives (default 7 days).
	TTL time.Duration
	// Kind says whether a tool is safe to repeat.
	Kind func(tool string) Kind
	// ToolSet is a digest of the tools a profile is offered now.
	ToolSet func(profile string) string
	// Run runs a tool as the request's user.
	Run    func(ctx context.Context, r Request, tool, args string) (string, error)
	Clock  clock.Clock
	Logger *slog.Logger
}

// Request is a fast turn the cache is asked about.
type Request struct {
	Channel, Sender, Device, Profile string
	Session                          string // the conversation's key
	Text                             string
}

// Step is a tool call of a turn, as it ran.
type Step struct {
	Tool, Args, Result string
	Failed             bool
}

// Limits.
const (
	MaxReply     = 300 // bytes of a reply worth remembering
	MaxText      = 500 // bytes of an utterance
	maxResult    = 4 << 10
	maxPerDevice = 200   // entries per channel, sender, device and profile
	maxEntries   = 10000 // entries in all
)

// Cache is the command cache.
type Cache struct{ c Config }

// New returns a Cache on cfg.DB (the command_cache table).
func New(cfg Config) *Cache {
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 7 * 24 * time.Hour
	}
	return &Cache{c: cfg}
}

// Entry is one remembered command.
type Entry struct {
	ID        int64     `json:"id"`
	Channel   string    `json:"channel"`
	Sender    string    `json:"sender"`
	Device    string    `json:"device,omitempty"`
	Profile   string    `json:"profile"`
	Utterance string    `json:"utterance"`
	Tool      string    `json:"tool"`
	Args      string    `json:"args"`
	Reply     string    `json:"reply"`
	Hits      int       `json:"hits"`
	Created   time.Time `json:"created"`
	Expires   time.Time `json:"expires"`
	result    string
	vec       []float32
	toolSet   string
}

// Answer is a cache hit.
type Answer struct {
	Entry Entry
	Reply string
	// Similarity is the cosine of the utterance and the entry's.
	Similarity float64
}

// Probe is what Lookup learnt, for Learn after a miss.
type Probe struct {
	ok      bool      // Lookup ran with the cache on
	vec     []float32 // the utterance's embedding, when Lookup needed it
	toolSet string
}

// ErrOff is returned while the cache is off or has no embedding model.
var ErrOff = errors.New("command cache off")

// Lookup finds the closest entry of r's device and, when it is close
// enough, runs its tool and returns the answer. modelDown says the model
// service cannot answer: a read-only result the remembered reply cannot
// show is then the reply itself. ok false: ask the model (the Probe lets
// Learn skip embedding the utterance again).
func (c *Cache) Lookup(ctx context.Context, r Request, modelDown bool) (Answer, Probe, bool, error) {
	var p Probe
	emb := c.embedder()
	if emb == nil {
		return Answer{}, p, false, ErrOff
	}
	text := strings.TrimSpace(r.Text)
	if text == "" || len(text) > MaxText {
		return Answer{}, p, false, nil
	}
	if c.c.ToolSet != nil {
		p.toolSet = c.c.ToolSet(r.Profile)
	}
	p.ok = true
	entries, err := c.entries(ctx, r, p.toolSet)
	if err != nil {
		return Answer{}, p, false, err
	}
	candidates := 0
	for _, e := range entries {
		if sameSlots(text, e.Utterance) {
			candidates++
		}
	}
	if candidates == 0 {
		// Nothing to compare with: no embedding on the way to the model
		// (Learn embeds after the reply, when it remembers the turn).
		return Answer{}, p, false, nil
	}
	vecs, err := emb.Embed(ctx, []string{text})
	if err != nil || len(vecs) != 1 {
		return Answer{}, p, false, fmt.Errorf("command cache: embedding: %v", err)
	}
	p.vec = vecs[0]
	best, bestSim := -1, -2.0
	for i, e := range entries {
		// Close in meaning is not enough: "set it to 23" is close to
		// "set it to 21", "turn off" to "turn on". The numbers and the
		// on/off words must be the same, or the old arguments would do
		// what was not asked.
		if !sameSlots(text, e.Utterance) {
			continue
		}
		if s := cosine(p.vec, e.vec); s > bestSim {
			best, bestSim = i, s
		}
	}
	thr := 0.95
	if c.c.Threshold != nil {
		thr = c.c.Threshold()
	}
	if best < 0 || bestSim < thr {
		return Answer{}, p, false, nil
	}
	e := entries[best]
	kind := No
	if c.c.Kind != nil {
		kind = c.c.Kind(e.Tool)
	}
	if kind == No { // the tool lost its promise since
		c.drop(ctx, e.ID)
		return Answer{}, p, false, nil
	}
	result, err := c.c.Run(ctx, r, e.Tool, e.Args)
	if err != nil {
		// The tool failed: the model says what to do about it.
		c.c.Logger.Info("command cache: the remembered tool failed; asking the model", "tool", e.Tool, "err", err)
		return Answer{}, p, false, nil
	}
	reply, ok := replyFor(e, kind, result, modelDown)
	if !ok {
		return Answer{}, p, false, nil
	}
	if _, err := c.c.DB.ExecContext(ctx, `UPDATE command_cache SET hits = hits + 1, last_hit_at = ? WHERE id = ?`, c.c.Clock.Now().UnixMilli(), e.ID); err != nil {
		c.c.Logger.Warn("command cache: counting a hit failed", "err", err)
	}
	e.Hits++
	return Answer{Entry: e, Reply: reply, Similarity: bestSim}, p, true, nil
}

// replyFor is the answer to a hit whose tool returned result now.
func replyFor(e Entry, kind Kind, result string, modelDown bool) (string, bool) {
	switch {
	case result == e.result:
		return e.Reply, true
	case e.result != "" && strings.Contains(e.Reply, e.result):
		return strings.ReplaceAll(e.Reply, e.result, result), true
	case kind == Idempotent:
		return e.Reply, true // the action's confirmation
	case modelDown && utf8.ValidString(result):
		return clip.Bytes(strings.TrimSpace(result), MaxReply), true
	}
	return "", false
}

// Learn remembers a fast turn that answered with exactly one successful
// call of a tool safe to repeat and a short reply.
func (c *Cache) Learn(ctx context.Context, r Request, p Probe, steps []Step, reply string) error {
	if !c.on() || !p.ok || len(steps) != 1 {
		return nil
	}
	s := steps[0]
	reply = strings.TrimSpace(reply)
	if s.Failed || reply == "" || len(reply) > MaxReply || len(s.Result) > maxResult || !json.Valid([]byte(s.Args)) {
		return nil
	}
	if c.c.Kind == nil || c.c.Kind(s.Tool) == No {
		return nil
	}
	if p.vec == nil {
		emb := c.embedder()
		if emb == nil {
			return nil
		}
		vecs, err := emb.Embed(ctx, []string{strings.TrimSpace(r.Text)})
		if err != nil || len(vecs) != 1 {
			return fmt.Errorf("command cache: embedding: %v", err)
		}
		p.vec = vecs[0]
	}
	now := c.c.Clock.Now()
	tx, err := c.c.DB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO command_cache(channel, sender, device, profile, tool_set, utterance, vec, tool, args, result, reply, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.Channel, r.Sender, r.Device, r.Profile, p.toolSet, clip.Bytes(strings.TrimSpace(r.Text), MaxText), encodeVec(p.vec), s.Tool, s.Args, s.Result, reply,
		now.UnixMilli(), now.Add(c.c.TTL).UnixMilli()); err != nil {
		return fmt.Errorf("command cache: %w", err)
	}
	// Expired entries of every device go (device names are the devices'
	// own: one no longer heard from must not keep its rows for good), and
	// the table holds at most maxEntries.
	if _, err := tx.ExecContext(ctx, `DELETE FROM command_cache WHERE expires_at <= ?`, now.UnixMilli()); err != nil {
		return fmt.Errorf("command cache: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM command_cache WHERE id NOT IN (SELECT id FROM command_cache ORDER BY id DESC LIMIT ?)`, maxEntries); err != nil {
		return fmt.Errorf("command cache: %w", err)
	}
	// Bounded per device: the oldest go; stale tool sets too.
	if _, err := tx.ExecContext(ctx, `DELETE FROM command_cache WHERE channel = ? AND sender = ? AND device = ? AND profile = ?
		AND (expires_at <= ? OR tool_set != ? OR id NOT IN (SELECT id FROM command_cache WHERE channel = ? AND sender = ? AND device = ? AND profile = ? ORDER BY id DESC LIMIT ?))`,
		r.Channel, r.Sender, r.Device, r.Profile, now.UnixMilli(), p.toolSet, r.Channel, r.Sender, r.Device, r.Profile, maxPerDevice); err != nil {
		return fmt.Errorf("command cache: %w", err)
	}
	return tx.Commit()
}

// List is every live entry (owners: agentctl cache list).
func (c *Cache) List(ctx context.Context) ([]Entry, error) {
	rows, err := c.c.DB.QueryContext(ctx, `SELECT id, channel, sender, device, profile, utterance, tool, args, reply, hits, created_at, expires_at
		FROM command_cache WHERE expires_at > ? ORDER BY id`, c.c.Clock.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Entry{}
	for rows.Next() {
		var e Entry
		var created, expires int64
		if err := rows.Scan(&e.ID, &e.Channel, &e.Sender, &e.Device, &e.Profile, &e.Utterance, &e.Tool, &e.Args, &e.Reply, &e.Hits, &created, &expires); err != nil {
			return nil, err
		}
		e.Created, e.Expires = time.UnixMilli(created), time.UnixMilli(expires)
		out = append(out, e)
	}
	return out, rows.Err()
}

// Clear deletes entry id, or every entry when id is 0, and returns how
// many went.
func (c *Cache) Clear(ctx context.Context, id int64) (int, error) {
	var res sql.Result
	var err error
	if id == 0 {
		res, err = c.c.DB.ExecContext(ctx, `DELETE FROM command_cache`)
	} else {
		res, err = c.c.DB.ExecContext(ctx, `DELETE FROM command_cache WHERE id = ?`, id)
	}
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

func (c *Cache) on() bool { return c.c.Enabled == nil || c.c.Enabled() }

func (c *Cache) embedder() Embedder {
	if !c.on() || c.c.Embedder == nil {
		return nil
	}
	return c.c.Embedder()
}

func (c *Cache) drop(ctx context.Context, id int64) {
	if _, err := c.c.DB.ExecContext(ctx, `DELETE FROM command_cache WHERE id = ?`, id); err != nil {
		c.c.Logger.Warn("command cache: dropping an entry failed", "err", err)
	}
}

// entries are the live entries of r's device made with toolSet (read
// only: a lookup is on every voice turn's way to the model; those of other
// tool sets, and expired ones, are deleted by Learn).
func (c *Cache) entries(ctx context.Context, r Request, toolSet string) ([]Entry, error) {
	now := c.c.Clock.Now().UnixMilli()
	rows, err := c.c.DB.QueryContext(ctx, `SELECT id, utterance, vec, tool, args, result, reply, hits, created_at, expires_at FROM command_cache
		WHERE channel = ? AND sender = ? AND device = ? AND profile = ? AND tool_set = ? AND expires_at > ?`,
		r.Channel, r.Sender, r.Device, r.Profile, toolSet, now)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		e := Entry{Channel: r.Channel, Sender: r.Sender, Device: r.Device, Profile: r.Profile, toolSet: toolSet}
		var vec []byte
		var created, expires int64
		if err := rows.Scan(&e.ID, &e.Utterance, &vec, &e.Tool, &e.Args, &e.result, &e.Reply, &e.Hits, &created, &expires); err != nil {
			return nil, err
		}
		e.vec = decodeVec(vec)
		e.Created, e.Expires = time.UnixMilli(created), time.UnixMilli(expires)
		out = append(out, e)
	}
	return out, rows.Err()
}

// ToolSetDigest is a digest of a profile's tool specs (names, descriptions
// and schemas, in order) and each tool's repeat kind.
func ToolSetDigest(specs []llm.Tool, kind func(string) Kind) string {
	h := sha256.New()
	for _, s := range specs {
		b, _ := json.Marshal(s)
		h.Write(b)
		if kind != nil {
			fmt.Fprintf(h, "|%d\n", kind(s.Function.Name))
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// slotWords are words that flip or scale what a command does; two
// utterances answer alike only when they have the same ones (and the
// same numbers).
var slotWords = map[string]bool{
	"on": true, "off": true, "open": true, "close": true, "closed": true, "up": true, "down": true, "start": true, "stop": true,
	"enable": true, "disable": true, "lock": true, "unlock": true, "increase": true, "decrease": true, "raise": true, "lower": true,
	"more": true, "less": true, "higher": true, "max": true, "min": true, "mute": true, "unmute": true, "pause": true, "resume": true,
	"not": true, "don't": true, "no": true, "all": true, "left": true, "right": true, "first": true, "second": true, "third": true, "last": true,
}

// slotRunes are the same for Chinese, where words are not spaced: each
// of these characters counts.
const slotRunes = "开关启停升降增减加大小高低上下左右前后不别没全半一二两三四五六七八九十百千万零"

// slots are what an utterance says that a remembered call's arguments
// may depend on: its numbers, its on/off-like words, its Chinese number
// and direction characters, in order.
func slots(s string) []string {
	var out []string
	var num strings.Builder
	flush := func() {
		if num.Len() > 0 {
			out = append(out, num.String())
			num.Reset()
		}
	}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return r < utf8.RuneSelf && !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '\'' || r == '.')
	}) {
		w = strings.Trim(w, ".")
		if slotWords[w] {
			out = append(out, w)
		}
		for _, r := range w {
			switch {
			case r >= '0' && r <= '9' || r == '.' && num.Len() > 0:
				num.WriteRune(r)
				continue
			case strings.ContainsRune(slotRunes, r):
				flush()
				out = append(out, string(r))
				continue
			}
			flush()
		}
		flush()
	}
	return out
}

// sameSlots reports whether a and b say the same numbers and on/off
// words.
func sameSlots(a, b string) bool { return slices.Equal(slots(a), slots(b)) }

func cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return -2
	}
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return -2
	}
	return dot / math.Sqrt(na*nb)
}

func encodeVec(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func decodeVec(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
