package websearch

import "testing"

func TestCleanDropsInvisibleCharactersThatAreNotFormatControls(t *testing.T) {
	// U+3164 HANGUL FILLER and U+FFA0 are letters, U+FE0F and U+034F are
	// marks: none is a control or a format character, all are invisible.
	in := "Office\u3164 hours\ufe0f: 9\u034f-5\uffa0 (\U000E0041call me\u200b)"
	if got, want := clean(in, 200), "Office hours: 9-5 (call me)"; got != want {
		t.Fatalf("clean(%q) = %q, want %q", in, got, want)
	}
}
