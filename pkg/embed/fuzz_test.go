package embed

import (
	"slices"
	"testing"
)

// FuzzEmbedTokenize feeds arbitrary strings (any bytes) to the tokenizer,
// which needs no native library: it must not panic or fail, must respect
// the limit, must wrap the text in [CLS] ... [SEP], and tokenising a
// window of a long text must give the same ids as tokenising all of it.
func FuzzEmbedTokenize(f *testing.F) {
	for _, s := range corpus() {
		f.Add(s, uint16(512))
	}
	f.Add("\xff\xfe\xfd", uint16(2))
	f.Add("[SEP][CLS][MASK]", uint16(3))
	tok := fixtureTokenizer(f)
	vocab := tok.tk.GetVocabSize(true)
	f.Fuzz(func(t *testing.T, text string, limit uint16) {
		max := 2 + int(limit)%600
		ids, err := tok.Encode(text, max)
		if err != nil {
			t.Fatalf("Encode(%q, %d): %v", text, max, err)
		}
		if len(ids) < 2 || len(ids) > max {
			t.Fatalf("Encode(%q, %d): %d ids", text, max, len(ids))
		}
		if ids[0] != idCLS || ids[len(ids)-1] != idSEP {
			t.Fatalf("Encode(%q, %d) = %v: not [CLS] ... [SEP]", text, max, ids)
		}
		for _, id := range ids {
			if id < 0 || id >= vocab {
				t.Fatalf("Encode(%q): id %d outside the vocabulary", text, id)
			}
		}
		// A small limit makes the window matter for fuzz-sized inputs.
		for _, m := range []int{max, 3} {
			fast, err1 := tok.encode(text, m, true)
			slow, err2 := tok.encode(text, m, false)
			if err1 != nil || err2 != nil || !slices.Equal(fast, slow) {
				t.Fatalf("windowed %v (%v) != whole %v (%v) for %q, max %d", fast, err1, slow, err2, text, m)
			}
		}
	})
}
