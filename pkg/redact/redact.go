package redact

import (
	"fmt"
	"regexp"
	"strings"
)

// Map is the placeholders of one request: the same value is the same
// placeholder throughout it, numbered per kind by first appearance.
type Map struct {
	kinds    []Kind
	reserved map[string]bool   // placeholders written literally in the request
	byValue  map[string]string // value -> placeholder
	byPH     map[string]string // placeholder -> value
	next     map[Kind]int
	counts   map[Kind]int // values replaced (every occurrence)
}

// NewMap starts a request's placeholders for kinds.
func NewMap(kinds []Kind) *Map {
	return &Map{kinds: kinds, byValue: map[string]string{}, byPH: map[string]string{}, next: map[Kind]int{}, counts: map[Kind]int{}, reserved: map[string]bool{}}
}

// Reserve keeps the placeholders written literally in s (a user's text, a
// fetched page) from being handed out: they stay what they are and are
// never put back as someone's value. Every text of a request is reserved
// before any is redacted.
func (m *Map) Reserve(s string) {
	if !strings.Contains(s, "[") {
		return
	}
	for _, ph := range rePH.FindAllString(s, -1) {
		m.reserved[ph] = true
	}
}

// Counts is how many values of each kind were replaced.
func (m *Map) Counts() map[Kind]int { return m.counts }

// Len is how many distinct values have placeholders.
func (m *Map) Len() int { return len(m.byPH) }

// Text replaces the values in s by their placeholders.
func (m *Map) Text(s string) string {
	if len(m.kinds) == 0 || s == "" {
		return s
	}
	found := find(s, m.kinds)
	if len(found) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, f := range found {
		b.WriteString(s[last:f.start])
		b.WriteString(m.placeholder(f.kind, s[f.start:f.end]))
		m.counts[f.kind]++
		last = f.end
	}
	b.WriteString(s[last:])
	return b.String()
}

func (m *Map) placeholder(k Kind, v string) string {
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
	return ph
}

// rePH matches a placeholder.
var rePH = regexp.MustCompile(`\[(?:PHONE|ID_CARD|EMAIL|BANK_CARD|PLATE)_[0-9]{1,6}\]`)

// Restore puts the values back for this request's placeholders; others
// (a placeholder the model made up, or text that only looks like one)
// stay as they are.
func (m *Map) Restore(s string) string {
	if len(m.byPH) == 0 || !strings.Contains(s, "[") {
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
