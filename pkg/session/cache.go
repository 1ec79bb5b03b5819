package session

import (
	"encoding/json"
	"sync"

	"agent/pkg/llm"
)

// The window cache keeps the open sessions' last messages in RAM, so that
// a turn (a voice turn above all) reaches the model without waiting on
// SQLite reads. It is written through: Append commits to SQLite first and
// then appends to the cache, in sequence order, or drops the entry when
// it cannot tell (another append in between). Reset drops the key's
// entries. A read from SQLite is kept only when no write to what it read
// came between the read and the store (version counters), so two
// goroutines writing one session cannot leave it stale. Every write of
// sessions and their messages goes through this Store; a crash loses the
// cache, nothing else.
const (
	cacheSessions = 128       // sessions kept
	cacheMessages = 96        // messages kept per session (a window is 40)
	cacheBytes    = 256 << 10 // text kept per session; pictures make a session uncacheable
)

type cache struct {
	mu    sync.Mutex
	open  map[Key]Session      // Current's answer per key
	wins  map[int64]*cachedWin // by session id
	evict int                  // evictions (tests)
	// A read from SQLite is stored only when nothing changed what it read
	// meanwhile: resets counts Resets (for Current), vers the writes to
	// each session (for Window; a session not in it is at 0, and the map
	// starts over when large, which only costs a fill).
	resets uint64
	vers   map[int64]uint64
}

type cachedWin struct {
	seqs     []int64
	msgs     []llm.Message
	bytes    int
	complete bool // msgs begin with the session's first message
}

func newCache() *cache {
	return &cache{open: map[Key]Session{}, wins: map[int64]*cachedWin{}, vers: map[int64]uint64{}}
}

func msgBytes(m llm.Message) int {
	n := len(m.Content) + len(m.ReasoningContent) + len(m.ToolCallID) + len(m.Name)
	for _, p := range m.Parts {
		n += len(p.Text) + len(p.ImageURL)
	}
	for _, c := range m.ToolCalls {
		n += len(c.Function.Name) + len(c.Function.Arguments) + len(c.ID)
	}
	return n
}

func (c *cache) current(key Key) (Session, bool) {
	if c == nil {
		return Session{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.open[key]
	return s, ok
}

// resetsNow is what setCurrentRead needs to know nothing was reset since.
func (c *cache) resetsNow() uint64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resets
}

// setCurrentRead stores s as read from SQLite when no Reset ran since
// resetsNow returned mark (one may have closed s meanwhile).
func (c *cache) setCurrentRead(s Session, mark uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resets == mark {
		c.setCurrentLocked(s)
	}
}

func (c *cache) setCurrent(s Session) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setCurrentLocked(s)
}

func (c *cache) setCurrentLocked(s Session) {
	if len(c.open) >= cacheSessions {
		clear(c.open)
		c.evict++
	}
	c.open[s.Key] = s
}

// drop forgets session id's messages.
func (c *cache) drop(id int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bump(id)
	delete(c.wins, id)
}

// bump records a write to session id (mu held).
func (c *cache) bump(id int64) {
	if len(c.vers) >= 4*cacheSessions {
		clear(c.vers)
	}
	c.vers[id]++
}

// version is what fill needs to know session id was not written since.
func (c *cache) version(id int64) uint64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.vers[id]
}

// reset forgets key's open session and its messages.
func (c *cache) reset(key Key) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resets++
	if s, ok := c.open[key]; ok {
		c.bump(s.ID)
		delete(c.wins, s.ID)
	}
	delete(c.open, key)
}

// fill stores a session's last messages as read from SQLite (seqs
// ascending; complete when they start with its first message) when the
// session was not written since version returned ver. What does not fit
// in cacheBytes is left out from the oldest on (a session of long tool
// results keeps its newest messages).
func (c *cache) fill(id int64, ver uint64, seqs []int64, msgs []llm.Message, complete bool) {
	if c == nil {
		return
	}
	w := &cachedWin{complete: complete}
	from := len(msgs)
	for from > 0 && w.bytes+msgBytes(msgs[from-1]) <= cacheBytes {
		from--
		w.bytes += msgBytes(msgs[from])
	}
	if from == len(msgs) && len(msgs) > 0 {
		return // the newest message alone is too large
	}
	if from > 0 {
		w.complete = false
	}
	w.seqs, w.msgs = seqs[from:], msgs[from:]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.vers[id] != ver {
		return // written meanwhile: this read may miss it
	}
	if len(c.wins) >= cacheSessions {
		for k := range c.wins { // any one: the map's order is random enough
			delete(c.wins, k)
			c.evict++
			break
		}
	}
	c.wins[id] = w
}

// appended records messages committed at seqs first.. of session id, with
// their parts and tool calls as stored (JSON), and the session's new last
// activity.
func (c *cache) appended(id int64, first int64, msgs []llm.Message, parts, calls []string, lastMS int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range c.open {
		if s.ID == id {
			s.LastActivity = fromMS(lastMS)
			c.open[k] = s
			break
		}
	}
	c.bump(id)
	w := c.wins[id]
	if w == nil {
		return
	}
	if len(w.seqs) > 0 && w.seqs[len(w.seqs)-1] != first-1 {
		delete(c.wins, id) // another append came between: read it again
		return
	}
	for i, m := range msgs {
		// As SQLite gives it back: parts and tool calls through their JSON.
		m.Parts, m.ToolCalls = nil, nil
		if parts[i] != "" && json.Unmarshal([]byte(parts[i]), &m.Parts) != nil ||
			calls[i] != "" && json.Unmarshal([]byte(calls[i]), &m.ToolCalls) != nil {
			delete(c.wins, id)
			return
		}
		w.seqs = append(w.seqs, first+int64(i))
		w.msgs = append(w.msgs, m)
		w.bytes += msgBytes(m)
	}
	drop := max(0, len(w.msgs)-cacheMessages)
	bytes := w.bytes
	for _, m := range w.msgs[:drop] {
		bytes -= msgBytes(m)
	}
	for drop < len(w.msgs) && bytes > cacheBytes { // the oldest go first
		bytes -= msgBytes(w.msgs[drop])
		drop++
	}
	if drop == len(w.msgs) {
		delete(c.wins, id) // the newest message alone is too large
		return
	}
	if drop > 0 {
		w.seqs = append([]int64(nil), w.seqs[drop:]...)
		w.msgs = append([]llm.Message(nil), w.msgs[drop:]...)
		w.bytes = bytes
		w.complete = false
	}
}

// window is Window from the cache: ok false when the session is not
// cached, or the window would reach before what is.
func (c *cache) window(id int64, n int) ([]llm.Message, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.wins[id]
	if w == nil {
		return nil, false
	}
	msgs := w.msgs
	start := max(0, len(msgs)-n)
	if start == 0 && len(msgs) < n && !w.complete {
		return nil, false
	}
	if start < len(msgs) && msgs[start].Role == llm.RoleTool {
		i := start - 1
		for i >= 0 && msgs[i].Role == llm.RoleTool {
			i--
		}
		switch {
		case i < 0 && !w.complete:
			return nil, false // the call may be before what is cached
		case i >= 0 && msgs[i].Role == llm.RoleAssistant && len(msgs[i].ToolCalls) > 0:
			start = i
		default: // the call is gone or was never stored: drop the orphans
			for start < len(msgs) && msgs[start].Role == llm.RoleTool {
				start++
			}
		}
	}
	return cloneMsgs(msgs[start:]), true
}

// cloneMsgs copies messages deeply enough that a caller changing them
// (appending to a slice, editing a part) cannot change the cache.
func cloneMsgs(in []llm.Message) []llm.Message {
	out := make([]llm.Message, len(in))
	for i, m := range in {
		if m.Parts != nil {
			m.Parts = append([]llm.Part(nil), m.Parts...)
		}
		if m.ToolCalls != nil {
			m.ToolCalls = append([]llm.ToolCall(nil), m.ToolCalls...)
		}
		out[i] = m
	}
	return out
}
