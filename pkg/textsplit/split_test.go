package textsplit

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// nonSpace is s without whitespace: what Split must keep, in order.
func nonSpace(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

// checkSplit asserts Split's invariants for one input.
func checkSplit(t *testing.T, text string, n int) []string {
	t.Helper()
	chunks := Split(text, n)
	limit := max(n, utf8.UTFMax)
	var all strings.Builder
	for i, c := range chunks {
		if c == "" || strings.TrimSpace(c) == "" {
			t.Fatalf("chunk %d is empty/blank: %q", i, c)
		}
		if len(c) > limit {
			t.Fatalf("chunk %d has %d bytes, limit %d", i, len(c), limit)
		}
		if !utf8.ValidString(c) {
			t.Fatalf("chunk %d is not valid UTF-8: %q", i, c)
		}
		all.WriteString(c)
	}
	if got, want := nonSpace(all.String()), nonSpace(strings.ToValidUTF8(text, "\uFFFD")); got != want {
		t.Fatalf("content changed:\n got %q\nwant %q", got, want)
	}
	return chunks
}

func TestSplitPreferences(t *testing.T) {
	tests := []struct {
		name string
		text string
		max  int
		want []string
	}{
		{"fits", "hello world", 20, []string{"hello world"}},
		{"empty", "", 20, nil},
		{"blank", " \n\n\t ", 20, nil},
		{"trims ends", "\n\nhello  \n", 20, []string{"hello"}},
		{"paragraph", "aaaa bbbb.\n\ncccc dddd", 16, []string{"aaaa bbbb.", "cccc dddd"}},
		{"paragraph over line", "aaaaa\n\nbb\ncc dddd", 14, []string{"aaaaa", "bb\ncc dddd"}},
		{"line", "aaaa bbbb\ncccc dddd", 16, []string{"aaaa bbbb", "cccc dddd"}},
		{"sentence", "One two. Three four five", 16, []string{"One two.", "Three four five"}},
		{"question", "Is it? Yes it is", 10, []string{"Is it?", "Yes it is"}},
		{"cjk sentence", "你好世界。再见世界", 20, []string{"你好世界。", "再见世界"}},
		{"cjk exclaim", "好！好好好好", 12, []string{"好！", "好好好好"}},
		{"space", "alpha beta gamma", 12, []string{"alpha beta", "gamma"}},
		{"hard cut ascii", "abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
		{"hard cut cjk", "你好世界", 7, []string{"你好", "世界"}},
		{"hard cut emoji", "😀😀😀", 5, []string{"😀", "😀", "😀"}},
		{"tiny max raised", "😀😀", 1, []string{"😀", "😀"}},
		{"crlf", "aaaa\r\n\r\nbbbb", 6, []string{"aaaa", "bbbb"}},
		{"early break skipped", "a. " + strings.Repeat("x", 20), 16, []string{"a. " + strings.Repeat("x", 13), strings.Repeat("x", 7)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkSplit(t, tt.text, tt.max)
			if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
				t.Fatalf("Split(%q, %d) = %q, want %q", tt.text, tt.max, got, tt.want)
			}
		})
	}
}

func TestSplitLongMixedText(t *testing.T) {
	var b strings.Builder
	for i := range 400 {
		b.WriteString("第")
		b.WriteString(strings.Repeat("字", i%13))
		b.WriteString("句。 Sentence number one. ")
		if i%7 == 0 {
			b.WriteString("\n\n")
		}
	}
	chunks := checkSplit(t, b.String(), 2048)
	if len(chunks) < 2 {
		t.Fatalf("got %d chunks", len(chunks))
	}
}

// TestSplitProperties runs the invariants over pseudo-random texts built
// from separators, ASCII, CJK, emoji and invalid bytes (fixed seed).
func TestSplitProperties(t *testing.T) {
	pieces := []string{"\n\n", "\n", " ", ". ", "! ", "? ", "。", "！", "？", "a", "word", "字", "😀",
		"\t", "\r\n", "\xff", "\xe4\xb8", "\u3000", strings.Repeat("z", 50)}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		var b strings.Builder
		for range rng.IntN(200) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		checkSplit(t, b.String(), 1+rng.IntN(64))
	}
}

func FuzzSplit(f *testing.F) {
	f.Add("hello world", 5)
	f.Add("para one.\n\npara two! line\nthree? 你好。世界！", 12)
	f.Add("😀😀😀😀", 3)
	f.Add("\xff\xfe\xe4\xb8 \xad", 4)
	f.Add(strings.Repeat("长", 1000), 2048)
	f.Add("a\r\n\r\n\r\nb", 1)
	f.Fuzz(func(t *testing.T, text string, max int) {
		if max > 1<<16 || max < -1<<16 {
			max %= 1 << 16
		}
		checkSplit(t, text, max)
	})
}
