package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		fn   func(string, int) string
		in   string
		n    int
		want string
	}{
		{Bytes, "hello", 10, "hello"},
		{Bytes, "hello", 3, "hel"},
		{Bytes, "日本語", 4, "日"}, // 3-byte characters: never half of one
		{Bytes, "日本語", 2, ""},
		{Bytes, "abc", -1, ""},
		{String, "hello", 5, "hello"},
		{String, "hello world", 5, "hello…"},
		{String, "añb", 2, "a…"},
		{Line, "a\n\n  b\tc ", 10, "a b c"},
		{Line, "one two three", 7, "one two…"},
	} {
		if got := tc.fn(tc.in, tc.n); got != tc.want {
			t.Errorf("(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func FuzzBytes(f *testing.F) {
	f.Add("日本語 text", 4)
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := Bytes(s, n)
		if len(got) > max(n, 0) || !strings.HasPrefix(s, got) {
			t.Fatalf("Bytes(%q, %d) = %q", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Bytes(%q, %d) = %q splits a character", s, n, got)
		}
	})
}
