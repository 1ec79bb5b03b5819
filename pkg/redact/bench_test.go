package redact

import (
	"strings"
	"testing"
)

// benchText is 1 KB of office chat with a phone number, an e-mail, a card
// number and a plate in it.
func benchText() string {
	s := "Please call Zhang San at 13800138000 about the invoice, or mail zhang.san@example.com. " +
		"The company card " + card + " pays the hotel; the car 京A12345 is parked at gate 3. "
	for len(s) < 1024 {
		s += "The meeting moved to Thursday 15:00 in room 402, bring the Q3 figures and the draft. "
	}
	return s[:1024]
}

// BenchmarkRedact1KB: finding and replacing every kind in 1 KB of text
// and putting the values back (a request's text and its answer's).
func BenchmarkRedact1KB(b *testing.B) {
	text := benchText()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		m := NewMap(Kinds)
		red := m.Text(text)
		if m.Restore(red) != text {
			b.Fatal("round trip")
		}
	}
}

// BenchmarkRedact1KBClean: 1 KB with nothing to redact (the common case).
func BenchmarkRedact1KBClean(b *testing.B) {
	text := strings.Repeat("The meeting moved to Thursday in room 402, bring the figures. ", 20)[:1024]
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		NewMap(Kinds).Text(text)
	}
}
