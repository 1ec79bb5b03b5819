package invisible

import (
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestDefaultIgnorableMatchesUnicodeDerivation checks the switch against
// the derivation in DerivedCoreProperties.txt, computed from the standard
// library's Unicode tables: Other_Default_Ignorable_Code_Point + Cf +
// Variation_Selector - White_Space - FFF9..FFFB - 13430..1343F -
// Prepended_Concatenation_Mark.
func TestDefaultIgnorableMatchesUnicodeDerivation(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		want := (unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) || unicode.Is(unicode.Cf, r) ||
			unicode.Is(unicode.Variation_Selector, r)) &&
			!unicode.Is(unicode.White_Space, r) && !(r >= 0xFFF9 && r <= 0xFFFB) &&
			!(r >= 0x13430 && r <= 0x13440) && !unicode.Is(unicode.Prepended_Concatenation_Mark, r)
		if got := defaultIgnorable(r); got != want {
			t.Errorf("U+%04X: in table %v, Unicode says %v", r, got, want)
		}
	}
}

func TestIsCoversTheAttackCharacters(t *testing.T) {
	for _, r := range []rune{'\r', 0, 0x1B, 0x7F, 0x85, 0x9B, 0x00AD, 0x034F, 0x061C, 0x115F, 0x17B4, 0x180E,
		0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x202A, 0x202E, 0x2028, 0x2029, 0x2060, 0x2066, 0x2069, 0x3164,
		0xFE0F, 0xFEFF, 0xFFA0, 0xFFF0, 0xFFF9, 0xFFFB, 0x1BCA0, 0x1D173, 0xE0000, 0xE0001, 0xE0041, 0xE007F, 0xE0100, 0xE0FFF, 0x110BD, 0x110CD, 0x13430, 0x1343F, 0x16FE4} {
		if !Is(r) {
			t.Errorf("Is(U+%04X) = false", r)
		}
	}
	for _, r := range []rune{'\n', '\t', ' ', 'a', 'é', '中', 0x00A0, 0x0600, 0x1F600, 0x13000, 0xE1000, 0xF0041} {
		if Is(r) {
			t.Errorf("Is(U+%04X) = true", r)
		}
	}
}

func TestStrip(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		n        int
	}{
		{"plain text\nline two\ttab", "plain text\nline two\ttab", 0},
		{"a\u200bb\u202ec\u2066d", "abcd", 3},
		{"ignore\U000E0041\U000E0042 this", "ignore this", 2},
		{"crlf\r\nline", "crlf\nline", 0},
		{"shown\rhidden", "shown\nhidden", 1},
		{"para\u2029graph", "para\ngraph", 1},
		{"👨\u200d👩\u200d👧 ❤\ufe0f", "👨👩👧 ❤", 3},
		{"bad\xffbyte", "bad\uFFFDbyte", 0},
		// removing U+200B must not join F3 and A0 80 81 into U+E0001
		{"\xf3\u200b\xa0\x80\x81", "\uFFFD\uFFFD\uFFFD\uFFFD", 1},
	} {
		got, n := Strip(tc.in)
		if got != tc.want || n != tc.n {
			t.Errorf("Strip(%q) = %q, %d; want %q, %d", tc.in, got, n, tc.want, tc.n)
		}
	}
}

func TestEscapeShowsEveryHiddenCharacter(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"print('hi')\n\tpass", "print('hi')\n\tpass"},
		{"x = 1\rimport os", `x = 1\u{000D}import os`},
		{"a\u202eb", `a\u{202E}b`},
		{"tag\U000E0041", `tag\u{E0041}`},
		{"nbsp\u00a0", `nbsp\u{00A0}`},
		{"bad\xff", `bad\x{FF}`},
		{`re.sub(r"\u{41}", s)`, `re.sub(r"\u{005C}u{41}", s)`},
		{`"\n" and \x and \\`, `"\n" and \x and \\`},
	} {
		if got := Escape(tc.in); got != tc.want {
			t.Errorf("Escape(%q) = %q; want %q", tc.in, got, tc.want)
		}
		if back, ok := unescape(tc.want); !ok || back != tc.in {
			t.Errorf("unescape(%q) = %q, %v; want %q", tc.want, back, ok, tc.in)
		}
	}
}

func TestFindNamesCharacterAndLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"line one\r\nline two\nok = 1\rimport os", "U+000D CARRIAGE RETURN (a control character) on line 3"},
		{"# comment\n\n\"\"\"doc\U000E0069\"\"\"", "U+E0069 TAG LATIN SMALL LETTER I (a tag character) on line 3"},
		{"a\u202e", "U+202E RIGHT-TO-LEFT OVERRIDE (a bidirectional control) on line 1"},
		{"x\ufe0f", "U+FE0F VARIATION SELECTOR-16 (a variation selector) on line 1"},
		{"x\u17b4", "U+17B4 (a default-ignorable character) on line 1"},
	} {
		f, ok := Find(tc.in)
		if !ok || f.String() != tc.want {
			t.Errorf("Find(%q) = %v, %v; want %q", tc.in, f, ok, tc.want)
		}
	}
	if f, ok := Find("all\r\nvisible\n\ttext é 中 😀"); ok {
		t.Errorf("Find found %v in visible text", f)
	}
}

// unescape reverses Escape; ok false when s is not an Escape rendering.
func unescape(s string) (string, bool) {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '\\')
		if i < 0 || len(s) < i+3 || (s[i+1] != 'u' && s[i+1] != 'x') || s[i+2] != '{' {
			if i < 0 {
				b.WriteString(s)
				return b.String(), true
			}
			b.WriteString(s[:i+1])
			s = s[i+1:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", false
		}
		v, err := strconv.ParseUint(s[i+3:i+end], 16, 32)
		if err != nil {
			return "", false
		}
		if s[i+1] == 'x' {
			b.WriteByte(byte(v))
		} else {
			b.WriteRune(rune(v))
		}
		s = s[i+end+1:]
	}
}

func FuzzStripEscape(f *testing.F) {
	for _, s := range []string{"", "a\u200bb", "x\ry", "\r\n", "\U000E0041", "\xf3\u200b\xa0\x80\x81", `\u{41}`, "\\x{FF}\xff", "👨\u200d👩"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, n := Strip(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Strip(%q) = %q: not UTF-8", s, out)
		}
		for _, r := range out {
			if Is(r) {
				t.Fatalf("Strip(%q) = %q keeps U+%04X", s, out, r)
			}
		}
		if n == 0 && utf8.ValidString(s) && strings.ReplaceAll(s, "\r\n", "\n") != out {
			t.Fatalf("Strip(%q) = %q but counted nothing", s, out)
		}
		if again, m := Strip(out); again != out || m != 0 {
			t.Fatalf("Strip is not idempotent on %q: %q, %d", out, again, m)
		}
		e := Escape(s)
		for _, r := range e {
			if r != '\n' && r != '\t' && !unicode.IsPrint(r) {
				t.Fatalf("Escape(%q) = %q holds U+%04X", s, e, r)
			}
		}
		if back, ok := unescape(e); !ok || back != s {
			t.Fatalf("Escape(%q) = %q reads back as %q", s, e, back)
		}
	})
}
