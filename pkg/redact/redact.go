package redact

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Map is the placeholders of one request, or of one conversation (see
// Conversations): the same value is the same placeholder throughout it,
// numbered per kind by first appearance. It is safe for concurrent use.
type Map struct {
	mu       sync.Mutex
	kinds    []Kind
	reserved map[string]bool   // placeholders written literally in the text, not this map's
	byValue  map[string]string // kind, value (as written) -> placeholder
	byCanon  map[string]string // kind, canonical form -> its first placeholder
	byPH     map[string]string // placeholder -> value
	next     map[Kind]int
	counts   map[Kind]int // values replaced (every occurrence)
}

// NewMap starts a request's placeholders for kinds.
func NewMap(kinds []Kind) *Map {
	return &Map{kinds: kinds, byValue: map[string]string{}, byCanon: map[string]string{}, byPH: map[string]string{},
		next: map[Kind]int{}, counts: map[Kind]int{}, reserved: map[string]bool{}}
}

// setKinds changes the kinds detected from now on (a reload); the values
// already replaced keep their placeholders.
func (m *Map) setKinds(kinds []Kind) {
	m.mu.Lock()
	m.kinds = kinds
	m.mu.Unlock()
}

// Reserve keeps the placeholders written literally in s (a user's text, a
// fetched page) that are not this map's from being handed out: they stay
// what they are and are never put back as someone's value. Every text of
// a request is reserved before any is redacted.
func (m *Map) Reserve(s string) {
	if !strings.Contains(s, "[") {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ph := range rePH.FindAllString(s, -1) {
		if _, ours := m.byPH[ph]; !ours {
			m.reserved[ph] = true
		}
	}
}

// Counts is how many values of each kind were replaced.
func (m *Map) Counts() map[Kind]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[Kind]int, len(m.counts))
	for k, n := range m.counts {
		out[k] = n
	}
	return out
}

// Len is how many distinct values have placeholders.
func (m *Map) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byPH)
}

// Text replaces the values in s by their placeholders.
func (m *Map) Text(s string) string { return m.text(s, false, nil) }

// Result replaces the values in s, text that came back from a tool (a
// command's output, a web page, a file), and more: every value this map
// already has is found again wherever it is, glued to letters or digits
// ("abc13800138000xyz"), written another way ("138-0013-8000",
// "１３８００１３８０００") or its digits reversed, and replaced by its
// placeholder, so a tool the model ran on a placeholder or on a file
// holding the value hands the value back to nobody.
func (m *Map) Result(s string) string { return m.text(s, true, nil) }

// text replaces the values in s (and, for a tool's result, the values
// already known anywhere in it), counting them in counted when not nil.
func (m *Map) text(s string, result bool, counted map[Kind]int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.kinds) == 0 || s == "" {
		return s
	}
	found := find(s, m.kinds)
	if result && len(m.byCanon) > 0 {
		found = m.again(s, found)
	}
	if len(found) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, f := range found {
		b.WriteString(s[last:f.start])
		ph := ""
		if result {
			ph = m.byCanon[string(f.kind)+"\x00"+f.canon]
		}
		if ph == "" {
			ph = m.placeholder(f.kind, s[f.start:f.end], f.canon)
		}
		b.WriteString(ph)
		m.counts[f.kind]++
		if counted != nil {
			counted[f.kind]++
		}
		last = f.end
	}
	b.WriteString(s[last:])
	return b.String()
}

func (m *Map) placeholder(k Kind, v, canon string) string {
	key := string(k) + "\x00" + v
	if ph, ok := m.byValue[key]; ok {
		return ph
	}
	var ph string
	for {
		m.next[k]++
		ph = fmt.Sprintf("[%s_%d]", strings.ToUpper(string(k)), m.next[k])
		if !m.reserved[ph] {
			break
		}
	}
	m.byValue[key] = ph
	m.byPH[ph] = v
	if ck := string(k) + "\x00" + canon; m.byCanon[ck] == "" {
		m.byCanon[ck] = ph
	}
	return ph
}

// rePH matches a placeholder.
var rePH = regexp.MustCompile(`\[(?:PHONE|ID_CARD|EMAIL|BANK_CARD|PLATE)_[0-9]{1,6}\]`)

// Restore puts the values back for this request's placeholders; others
// (a placeholder the model made up, or text that only looks like one)
// stay as they are.
func (m *Map) Restore(s string) string {
	if !strings.Contains(s, "[") {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.byPH) == 0 {
		return s
	}
	return rePH.ReplaceAllStringFunc(s, func(ph string) string {
		if v, ok := m.byPH[ph]; ok {
			return v
		}
		return ph
	})
}

// maxPH is the longest placeholder ("[BANK_CARD_999999]").
const maxPH = len("[BANK_CARD_999999]")

// Stream restores placeholders in text that arrives in fragments: a
// fragment's end that may be the start of a placeholder is held back until
// the next fragment (or Flush) shows what it is.
type Stream struct {
	m    *Map
	held string
}

// NewStream restores m's placeholders in a stream.
func (m *Map) NewStream() *Stream { return &Stream{m: m} }

// Write takes a fragment and returns what can be shown now.
func (s *Stream) Write(fragment string) string {
	t := s.held + fragment
	s.held = ""
	if i := strings.LastIndexByte(t, '['); i >= 0 && !strings.Contains(t[i:], "]") && len(t)-i < maxPH {
		t, s.held = t[:i], t[i:]
	}
	return s.m.Restore(t)
}

// Flush returns what is held back (the stream ended).
func (s *Stream) Flush() string {
	t := s.held
	s.held = ""
	return s.m.Restore(t)
}
