// Package toolselect chooses the tools a turn offers the model. Sending
// every tool's schema on every request costs latency and money (53 tools
// with two MCP servers are 32 KB per request); a turn is offered only:
//
//   - what the caller may use: the profile's tools, owner-only tools
//     (tools.Tool.Owner) for agent.owners and the operator only, and tools
//     whose When says they can do something now;
//   - the few that matter for the message: ranked by keywords (the tool's
//     name, description and aliases in English and Chinese) and, when the
//     embedding model is loaded and the turn is not a fast one (voice,
//     hardware), by cosine similarity of the message and the description;
//   - the tools the session already used, and those the model pulled in
//     with find_tools during the turn;
//   - find_tools itself, through which the model reaches every other tool
//     it may use.
//
// Selector.Allowed is also the gate for running a tool: a call to a tool
// the caller may not use (an owner-only tool asked for by someone else)
// fails as an unknown tool, offered or not.
package toolselect

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"

	"agent/pkg/clip"
	"agent/pkg/tools"
)

// FindTools is the name of the tool that pulls other tools into a turn.
const FindTools = "find_tools"

// AdminChannel is the operator's channel (agentctl): it may use every tool.
const AdminChannel = "admin"

// Defaults for Config.
const (
	DefaultTopK      = 5  // tools offered by rank on a normal turn
	DefaultFastK     = 3  // on a fast (voice, hardware) turn
	DefaultMaxPulled = 16 // tools find_tools may pull into one turn
	DefaultFindLimit = 6  // tools one find_tools call returns
	maxKeep          = 8  // tools kept because the session used them
	maxSemantic      = 2  // tools offered on the embedding model's word alone
	maxQueryBytes    = 1000
	vectorCacheSize  = 64   // message vectors kept (a turn's steps reuse one)
	maxTerms         = 2048 // tools whose keyword terms are kept
)

// Embedder embeds texts into normalised vectors (pkg/embed).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Config configures a Selector.
type Config struct {
	Registry *tools.Registry
	// IsOwner reports whether a caller is one of agent.owners; the admin
	// channel always is. nil: nobody but the admin channel.
	IsOwner func(channel, user string) bool
	// Embedder returns the embedding model, or nil while there is none
	// (keywords only).
	Embedder func() Embedder
	TopK     int // DefaultTopK when 0
	FastK    int // DefaultFastK when 0
	Logger   *slog.Logger
}

// Selector chooses tools; it is safe for concurrent use.
type Selector struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	terms   map[string]termsEntry // by tool name (keywords.go)
	emb     Embedder              // the model the vectors below are from
	toolVec map[string]toolEntry  // by tool name
	textVec map[string][]float32  // message vectors
}

type termsEntry struct {
	doc   string // name and description the terms are of
	terms toolTerms
}

// termsFor returns t's keyword terms, computed once per description.
func (s *Selector) termsFor(t tools.Tool) toolTerms {
	d := doc(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.terms[t.Name]; ok && e.doc == d {
		return e.terms
	}
	tt := termsOf(t)
	if len(s.terms) >= maxTerms {
		clear(s.terms) // tools come and go (MCP reloads): start over
	}
	s.terms[t.Name] = termsEntry{doc: d, terms: tt}
	return tt
}

type toolEntry struct {
	doc string // what was embedded; a changed description is embedded again
	vec []float32
}

// New returns a Selector.
func New(cfg Config) *Selector {
	if cfg.TopK <= 0 {
		cfg.TopK = DefaultTopK
	}
	if cfg.FastK <= 0 {
		cfg.FastK = DefaultFastK
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Selector{cfg: cfg, log: cfg.Logger, terms: map[string]termsEntry{}, toolVec: map[string]toolEntry{}, textVec: map[string][]float32{}}
}

// owner reports whether the caller of q may use owner-only tools.
func (s *Selector) owner(q tools.Query) bool {
	return q.Channel == AdminChannel || (s.cfg.IsOwner != nil && s.cfg.IsOwner(q.Channel, q.User))
}

// may reports whether the caller of q may use t at all (its profile is
// checked by the registry's List and by Allowed).
func (s *Selector) may(q tools.Query, t tools.Tool) bool {
	return !t.Owner || s.owner(q)
}

// Allowed reports whether the caller of q may run the named tool. When
// does not count here: it keeps a tool out of the default offer, but a
// tool asked for by name may still know better (reload_mcp after the
// first server was added to the file).
func (s *Selector) Allowed(q tools.Query, name string) bool {
	t, ok := s.cfg.Registry.Get(name)
	return ok && t.Allowed(q.Profile) && s.may(q, t)
}

// eligible is every tool the caller of q may use, find_tools excepted;
// offering also skips tools whose When says they can do nothing now.
func (s *Selector) eligible(q tools.Query, offering bool) []tools.Tool {
	var out []tools.Tool
	for _, t := range s.cfg.Registry.List(q.Profile) {
		if t.Name != FindTools && s.may(q, t) && (!offering || t.When == nil || t.When()) {
			out = append(out, t)
		}
	}
	return out
}

// Offer returns the tools for a step of q's turn, sorted by name (a
// stable order keeps the model service's prompt cache warm).
func (s *Selector) Offer(ctx context.Context, q tools.Query) []tools.Tool {
	all := s.eligible(q, true)
	k := s.cfg.TopK
	if q.Fast {
		k = s.cfg.FastK
	}
	find, haveFind := s.cfg.Registry.Get(FindTools)
	if len(all) <= k+1 || !haveFind {
		return all
	}
	// Keyword matches first; the embedding model alone (no word in
	// common) adds at most maxSemantic, so a greeting costs little.
	pick := map[string]bool{}
	semantic := 0
	for _, r := range s.rank(ctx, q.Text, all, !q.Fast) {
		if len(pick) >= k {
			break
		}
		switch {
		case r.words > 0:
		case r.score > 0 && semantic < maxSemantic:
			semantic++
		default:
			continue
		}
		pick[r.tool.Name] = true
	}
	kept := 0
	for _, n := range q.Keep {
		if !pick[n] && kept < maxKeep+DefaultMaxPulled && slices.ContainsFunc(all, func(t tools.Tool) bool { return t.Name == n }) {
			pick[n] = true
			kept++
		}
	}
	out := make([]tools.Tool, 0, len(pick)+1)
	for _, t := range all {
		if pick[t.Name] {
			out = append(out, t)
		}
	}
	if len(out) < len(all) && find.Allowed(q.Profile) {
		out = append(out, find)
		slices.SortFunc(out, func(a, b tools.Tool) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

type ranked struct {
	tool  tools.Tool
	score float64
	words float64 // the keyword part
}

// rank orders ts by relevance to text: keywords, plus cosine similarity
// when semantic and an embedding model is loaded.
func (s *Selector) rank(ctx context.Context, text string, ts []tools.Tool, semantic bool) []ranked {
	text = clip.Bytes(text, maxQueryBytes)
	terms := queryTerms(text)
	out := make([]ranked, len(ts))
	for i, t := range ts {
		w := keywordScore(text, terms, s.termsFor(t))
		out[i] = ranked{tool: t, score: w, words: w}
	}
	if semantic && strings.TrimSpace(text) != "" {
		if cos := s.cosines(ctx, text, ts); cos != nil {
			for i := range out {
				out[i].score += cos[i]
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].score != out[j].score {
			return out[i].score > out[j].score
		}
		return out[i].tool.Name < out[j].tool.Name
	})
	return out
}

// cosines is the similarity of text to each tool's description, or nil
// without an embedding model (or when it fails: keywords still work).
func (s *Selector) cosines(ctx context.Context, text string, ts []tools.Tool) []float64 {
	if s.cfg.Embedder == nil {
		return nil
	}
	e := s.cfg.Embedder()
	if e == nil {
		return nil
	}
	s.mu.Lock()
	if s.emb != e { // a new model: every vector is stale
		s.emb, s.toolVec, s.textVec = e, map[string]toolEntry{}, map[string][]float32{}
	}
	var docs, names []string
	for _, t := range ts {
		d := doc(t)
		if en, ok := s.toolVec[t.Name]; !ok || en.doc != d {
			docs, names = append(docs, d), append(names, t.Name)
		}
	}
	qv, haveQ := s.textVec[text]
	s.mu.Unlock()
	if !haveQ {
		docs = append(docs, text)
	}
	if len(docs) > 0 {
		vecs, err := e.Embed(ctx, docs)
		if err != nil || len(vecs) != len(docs) {
			s.log.Debug("tool ranking without embeddings", "err", err)
			return nil
		}
		s.mu.Lock()
		if len(s.toolVec)+len(names) > maxTerms {
			clear(s.toolVec) // tools come and go (MCP reloads): start over
		}
		for i, n := range names {
			s.toolVec[n] = toolEntry{doc: docs[i], vec: vecs[i]}
		}
		if !haveQ {
			qv = vecs[len(vecs)-1]
			if len(s.textVec) >= vectorCacheSize {
				clear(s.textVec)
			}
			s.textVec[text] = qv
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]float64, len(ts))
	for i, t := range ts {
		v := s.toolVec[t.Name].vec
		if len(v) != len(qv) {
			return nil
		}
		var dot float64
		for j := range v {
			dot += float64(v[j]) * float64(qv[j])
		}
		out[i] = dot
	}
	return out
}

// doc is what a tool's vector is made of: its name in words and its
// description.
func doc(t tools.Tool) string {
	return strings.NewReplacer("_", " ", "-", " ").Replace(t.Name) + ": " + t.Description
}

type findArgs struct {
	Query string `json:"query" desc:"what you want to do, in a few words (or tool names)"`
}

// Tool is find_tools: it returns the tools that match a query and offers
// them for the rest of the turn.
func (s *Selector) Tool() tools.Tool {
	return tools.Tool{
		Name:        FindTools,
		Description: "Find more tools: describe what you need (or name tools); the matches become available for the rest of this turn.",
		Schema:      tools.SchemaFor[findArgs](),
		ReadOnly:    true,
		Handler: func(ctx context.Context, call tools.Call) (string, error) {
			a, err := tools.Decode[findArgs](call.Args)
			if err != nil {
				return "", fmt.Errorf("%w: %v", tools.ErrBadArgs, err)
			}
			return s.find(ctx, tools.Query{User: call.User, Channel: call.Channel, Profile: call.Profile}, a.Query), nil
		},
	}
}

func (s *Selector) find(ctx context.Context, q tools.Query, query string) string {
	query = clip.Bytes(strings.TrimSpace(query), maxQueryBytes)
	all := s.eligible(q, false)
	var names []string
	// Tools named in the query come first.
	words := strings.FieldsFunc(strings.ToLower(query), func(r rune) bool { return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-') })
	for _, t := range all {
		if slices.Contains(words, strings.ToLower(t.Name)) {
			names = append(names, t.Name)
		}
	}
	if query != "" {
		// Voice and hardware turns wait for no embedding, here either.
		semantic := q.Profile != "voice" && q.Profile != "hardware"
		for _, r := range s.rank(ctx, query, all, semantic) {
			if len(names) >= DefaultFindLimit {
				break
			}
			if r.words > 0 && !slices.Contains(names, r.tool.Name) {
				names = append(names, r.tool.Name)
			}
		}
	}
	if len(names) == 0 {
		list := make([]string, len(all))
		for i, t := range all {
			list[i] = t.Name
		}
		return fmt.Sprintf("No tool matches %q. Tools you can ask for by name: %s.", clip.Bytes(query, 100), strings.Join(list, ", "))
	}
	names = names[:min(len(names), DefaultFindLimit)]
	added := names
	if p := tools.PullsFrom(ctx); p != nil {
		added = p.Add(DefaultMaxPulled, names...)
	}
	var b strings.Builder
	if len(added) < len(names) && len(added) == 0 {
		fmt.Fprintf(&b, "These are available already, or this turn has pulled in the most tools it may (%d):\n", DefaultMaxPulled)
	} else {
		b.WriteString("Available now:\n")
	}
	for _, n := range names {
		t, _ := s.cfg.Registry.Get(n)
		fmt.Fprintf(&b, "- %s: %s\n", n, firstSentence(t.Description))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i > 0 {
		s = s[:i+1]
	}
	return clip.Bytes(s, 200)
}
