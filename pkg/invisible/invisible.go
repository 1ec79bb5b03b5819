// Package invisible finds, strips and shows the characters a reader does
// not see but a program or a model does: control characters other than
// newline and tab, Unicode's default-ignorable code points (zero-width
// characters, bidirectional controls, variation selectors, fillers, tag
// characters U+E0000-E0FFF), the line and paragraph separators U+2028 and
// U+2029 (a line break in some viewers, nothing in others) and the
// interlinear annotation characters U+FFF9-FFFB (they hide the text between
// them).
//
// Text from outside the binary has them stripped before it reaches the
// model (Strip); what a reviewer approves is shown with them spelled out
// (Escape); what must be refused names the first one and its line (Find).
//
// Strip also removes the zero width joiner U+200D and the variation
// selectors U+FE00-FE0F that emoji sequences use: the model reads
// "👨‍👩‍👧" as "👨👩👧" and "❤️" as "❤", which changes no meaning. Tag
// characters are what subdivision flags (🏴 England) are made of: those
// flags lose their tags and read as a black flag. Accepted: tag characters
// are also how text is hidden from a reader and shown to a model.
//
// Standard library only.
package invisible

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// defaultIgnorable reports whether r is one of Unicode's
// Default_Ignorable_Code_Point (derived property, DerivedCoreProperties.txt,
// unchanged from 15.0 to 16.0), unassigned code points in its ranges
// included. A switch, not a unicode.RangeTable: it runs on every rune of
// every tool result.
func defaultIgnorable(r rune) bool {
	switch {
	case r < 0x2000:
		return r == 0x00AD || r == 0x034F || r == 0x061C || r == 0x115F || r == 0x1160 ||
			r == 0x17B4 || r == 0x17B5 || (r >= 0x180B && r <= 0x180F)
	case r < 0x3000:
		return (r >= 0x200B && r <= 0x200F) || (r >= 0x202A && r <= 0x202E) || (r >= 0x2060 && r <= 0x206F)
	case r < 0xFE00:
		return r == 0x3164
	case r < 0x10000:
		return r <= 0xFE0F || r == 0xFEFF || r == 0xFFA0 || (r >= 0xFFF0 && r <= 0xFFF8)
	}
	return (r >= 0x1BCA0 && r <= 0x1BCA3) || (r >= 0x1D173 && r <= 0x1D17A) || (r >= 0xE0000 && r <= 0xE0FFF)
}

// Is reports whether r is invisible: a control character other than
// '\n' and '\t' (C0, DEL, C1; '\r' too: a bare carriage return hides
// the line before it on a terminal), a default-ignorable code point, a
// line or paragraph separator, an interlinear annotation character, or a
// format control outside the BMP. (Private-use characters are not: they
// show as boxes, and fonts use them for icons.)
func Is(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || (r >= 0x7F && r <= 0x9F):
		return true
	case r < 0xAD:
		return false
	case r == 0x2028 || r == 0x2029 || (r >= 0xFFF9 && r <= 0xFFFB):
		return true
	case r >= 0x10000 && r < 0xE0000 && unicode.Is(unicode.Cf, r):
		// Format controls outside the BMP that are not default-ignorable
		// (U+110BD, U+110CD, the Egyptian hieroglyph format controls
		// U+13430...): alone they show nothing, so they can carry text.
		return true
	case r == 0x16FE4: // KHITAN SMALL SCRIPT FILLER
		return true
	}
	return defaultIgnorable(r)
}

// Strip returns s without its invisible characters and how many it
// removed. A line ending "\r\n" becomes "\n" and is not counted; a bare
// '\r' and the separators U+2028 and U+2029 become "\n" (counted).
// Invalid UTF-8 becomes U+FFFD (not counted): removing a character must
// not join the bytes around it into a new one.
func Strip(s string) (string, int) {
	i := firstStrip(s)
	if i < 0 {
		return s, 0
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	n := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r == '\r' && strings.HasPrefix(s[i+1:], "\n"):
			// a line ending: the '\n' follows
		case r == '\r' || r == 0x2028 || r == 0x2029:
			b.WriteByte('\n')
			n++
		case Is(r):
			n++
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String(), n
}

// firstStrip is the offset of the first byte Strip changes; -1: none.
func firstStrip(s string) int {
	for i, r := range s {
		if Is(r) || (r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD")) {
			return i
		}
	}
	return -1
}

// Escape shows s to someone who must see every character: each invisible
// or unprintable one (unicode.IsPrint false: also unassigned and private
// use code points and spaces other than ' ') as \u{XXXX}, each byte of
// invalid UTF-8 as \x{XX}, and a backslash that starts "u{" or "x{" as
// \u{005C}, so that the rendering reads back to exactly s. '\n' and '\t'
// stay. Escape(s) == s when s has nothing to show.
func Escape(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x{%02X}`, s[i])
		case r == '\\' && (strings.HasPrefix(s[i+1:], "u{") || strings.HasPrefix(s[i+1:], "x{")):
			b.WriteString(`\u{005C}`)
		case shown(r):
			fmt.Fprintf(&b, `\u{%04X}`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// shown reports whether Escape spells r out.
func shown(r rune) bool {
	return r != '\n' && r != '\t' && (Is(r) || !unicode.IsPrint(r))
}

func needsEscape(s string) bool {
	for i, r := range s {
		if shown(r) || (r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD")) ||
			(r == '\\' && (strings.HasPrefix(s[i+1:], "u{") || strings.HasPrefix(s[i+1:], "x{"))) {
			return true
		}
	}
	return false
}

// Found is an invisible character found in a text.
type Found struct {
	Rune rune
	Line int // 1-based
}

// String is "U+202E RIGHT-TO-LEFT OVERRIDE (a bidirectional control) on
// line 3".
func (f Found) String() string {
	return fmt.Sprintf("%s on line %d", Describe(f.Rune), f.Line)
}

// Find returns the first invisible character of s and its line; ok false
// when there is none. A '\r' directly before '\n' is a line ending, not a
// find.
func Find(s string) (f Found, ok bool) {
	line := 1
	for i, r := range s {
		switch {
		case r == '\n':
			line++
		case r == '\r' && strings.HasPrefix(s[i+1:], "\n"):
		case Is(r):
			return Found{Rune: r, Line: line}, true
		}
	}
	return Found{}, false
}

// Describe names r for an error or a reviewer: "U+000D CARRIAGE RETURN
// (a control character)", "U+E0041 TAG LATIN CAPITAL LETTER A (a tag
// character)".
func Describe(r rune) string {
	name := names[r]
	switch {
	case r >= 0xE0020 && r <= 0xE007E:
		name = "TAG " + tagName(r)
	case r >= 0xFE00 && r <= 0xFE0F:
		name = fmt.Sprintf("VARIATION SELECTOR-%d", r-0xFE00+1)
	case r >= 0xE0100 && r <= 0xE01EF:
		name = fmt.Sprintf("VARIATION SELECTOR-%d", r-0xE0100+17)
	}
	if name != "" {
		return fmt.Sprintf("U+%04X %s (%s)", r, name, Class(r))
	}
	return fmt.Sprintf("U+%04X (%s)", r, Class(r))
}

func tagName(r rune) string {
	c := r - 0xE0000
	switch {
	case c == ' ':
		return "SPACE"
	case c >= 'A' && c <= 'Z':
		return "LATIN CAPITAL LETTER " + string(c)
	case c >= 'a' && c <= 'z':
		return "LATIN SMALL LETTER " + string(c-'a'+'A')
	case c >= '0' && c <= '9':
		return "DIGIT " + string(c)
	}
	return fmt.Sprintf("%q", string(c))
}

// Class is the kind of invisible character r is: "a control character",
// "a bidirectional control", "a zero-width character", "a tag character",
// "a variation selector", "a line separator", "an annotation character",
// "a default-ignorable character"; "" when r is not invisible.
func Class(r rune) string {
	switch {
	case !Is(r):
		return ""
	case r < 0x20 || (r >= 0x7F && r <= 0x9F):
		return "a control character"
	case (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069) || r == 0x200E || r == 0x200F || r == 0x061C:
		return "a bidirectional control"
	case (r >= 0x200B && r <= 0x200D) || r == 0x2060 || r == 0xFEFF:
		return "a zero-width character"
	case r >= 0xE0000 && r <= 0xE007F:
		return "a tag character"
	case (r >= 0xFE00 && r <= 0xFE0F) || (r >= 0xE0100 && r <= 0xE01EF) || (r >= 0x180B && r <= 0x180D) || r == 0x180F:
		return "a variation selector"
	case r == 0x2028 || r == 0x2029:
		return "a line separator"
	case r >= 0xFFF9 && r <= 0xFFFB:
		return "an annotation character"
	}
	return "a default-ignorable character"
}

// names are the names of the invisible characters most seen in attacks
// and pasted text.
var names = map[rune]string{
	0x00: "NULL", 0x07: "BELL", 0x08: "BACKSPACE", 0x0B: "LINE TABULATION", 0x0C: "FORM FEED",
	0x0D: "CARRIAGE RETURN", 0x1B: "ESCAPE", 0x7F: "DELETE", 0x85: "NEXT LINE", 0x9B: "CONTROL SEQUENCE INTRODUCER",
	0x00AD: "SOFT HYPHEN", 0x034F: "COMBINING GRAPHEME JOINER", 0x061C: "ARABIC LETTER MARK",
	0x115F: "HANGUL CHOSEONG FILLER", 0x1160: "HANGUL JUNGSEONG FILLER", 0x180E: "MONGOLIAN VOWEL SEPARATOR",
	0x200B: "ZERO WIDTH SPACE", 0x200C: "ZERO WIDTH NON-JOINER", 0x200D: "ZERO WIDTH JOINER",
	0x200E: "LEFT-TO-RIGHT MARK", 0x200F: "RIGHT-TO-LEFT MARK",
	0x2028: "LINE SEPARATOR", 0x2029: "PARAGRAPH SEPARATOR",
	0x202A: "LEFT-TO-RIGHT EMBEDDING", 0x202B: "RIGHT-TO-LEFT EMBEDDING", 0x202C: "POP DIRECTIONAL FORMATTING",
	0x202D: "LEFT-TO-RIGHT OVERRIDE", 0x202E: "RIGHT-TO-LEFT OVERRIDE",
	0x2060: "WORD JOINER", 0x2061: "FUNCTION APPLICATION", 0x2062: "INVISIBLE TIMES", 0x2063: "INVISIBLE SEPARATOR", 0x2064: "INVISIBLE PLUS",
	0x2066: "LEFT-TO-RIGHT ISOLATE", 0x2067: "RIGHT-TO-LEFT ISOLATE", 0x2068: "FIRST STRONG ISOLATE", 0x2069: "POP DIRECTIONAL ISOLATE",
	0x3164: "HANGUL FILLER", 0xFEFF: "ZERO WIDTH NO-BREAK SPACE", 0xFFA0: "HALFWIDTH HANGUL FILLER",
	0xFFF9: "INTERLINEAR ANNOTATION ANCHOR", 0xFFFA: "INTERLINEAR ANNOTATION SEPARATOR", 0xFFFB: "INTERLINEAR ANNOTATION TERMINATOR",
	0xE0001: "LANGUAGE TAG", 0xE007F: "CANCEL TAG",
}
