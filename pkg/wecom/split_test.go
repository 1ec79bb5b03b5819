package wecom

import (
	"slices"
	"strings"
	"testing"

	"agent/pkg/textsplit"
)

// Split is textsplit.Split; at MaxTextBytes every chunk is a message
// WeCom accepts.
func TestSplitWeComLimit(t *testing.T) {
	var b strings.Builder
	for i := range 400 {
		b.WriteString("第")
		b.WriteString(strings.Repeat("字", i%13))
		b.WriteString("句。 Sentence number one. ")
		if i%7 == 0 {
			b.WriteString("\n\n")
		}
	}
	chunks := Split(b.String(), MaxTextBytes)
	if len(chunks) < 2 {
		t.Fatalf("got %d chunks", len(chunks))
	}
	for i, c := range chunks {
		if len(c) > MaxTextBytes {
			t.Fatalf("chunk %d has %d bytes, limit %d", i, len(c), MaxTextBytes)
		}
	}
	if want := textsplit.Split(b.String(), MaxTextBytes); !slices.Equal(chunks, want) {
		t.Fatal("Split differs from textsplit.Split")
	}
}
