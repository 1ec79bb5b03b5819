package embed

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// bertNormalizer is Hugging Face's BertNormalizer, written here because
// github.com/sugarme/tokenizer's differs from it in ways that change token
// ids (measured against the reference on the test corpus):
//   - it reads "strip_accents": null as false, where Hugging Face strips
//     accents whenever lowercase is on, so "café", "naïve", "Zürich",
//     Japanese kana with dakuten, Korean and Devanagari words became [UNK];
//   - its clean_text maps whitespace to ' ' only next to a removed control
//     character and knows only ' ', \t, \n, \r as whitespace, so text
//     with U+00A0 or U+3000 in it became one [UNK] word;
//   - it lowercases rune by rune, without the final-sigma rule ("ΟΔΟΣ"
//     must end in "ος").
//
// The reference is Hugging Face's tokenizer as published in JavaScript
// (@huggingface/tokenizers, which scripts/ref runs in the tests), step for
// step: clean_text (drop NUL, U+FFFD and Cc/Cf/Co/Cs except \t \n \r; map
// JavaScript whitespace to ' '), pad CJK ideographs with spaces, lowercase
// (full Unicode mapping with final sigma, as String.prototype.toLowerCase),
// then NFD and drop Mn. One deliberate difference: ideographs outside the
// Basic Multilingual Plane (CJK Extension B and later) are padded as the
// Rust and Python tokenizers do; the JavaScript one walks UTF-16 code units
// and never sees them.
type bertNormalizer struct {
	cleanText          bool
	handleChineseChars bool
	lowercase          bool
	stripAccents       bool
}

func (n bertNormalizer) normalize(s string) string {
	if n.cleanText {
		s = cleanText(s)
	}
	if n.handleChineseChars {
		s = padChinese(s)
	}
	if n.lowercase {
		s = lowerFull(s)
	}
	if n.stripAccents {
		s = stripAccents(s)
	}
	return s
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// isControl is BertNormalizer's control test: Cc, Cf, Co or Cs, except the
// three that count as whitespace. (Surrogates cannot occur in a Go string.)
func isControl(r rune) bool {
	switch r {
	case '\t', '\n', '\r':
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co)
}

// isJSSpace is JavaScript's \s: WhiteSpace (TAB, VT, FF, ZWNBSP, Zs) and
// LineTerminator (LF, CR, LS, PS).
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0xFEFF, 0x2028, 0x2029:
		return true
	}
	return r > 0xFF && unicode.Is(unicode.Zs, r)
}

func cleanText(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s { // invalid UTF-8 arrives as U+FFFD and is dropped
		switch {
		case r == 0 || r == utf8.RuneError || isControl(r):
		case isJSSpace(r):
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isChinese is the CJK ideograph test of BERT's BasicTokenizer.
func isChinese(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) ||
		(r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) ||
		(r >= 0x2B820 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) ||
		(r >= 0x2F800 && r <= 0x2FA1F)
}

func padChinese(s string) string {
	if isASCII(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for _, r := range s {
		if isChinese(r) {
			b.WriteByte(' ')
			b.WriteRune(r)
			b.WriteByte(' ')
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// lowerFull is Unicode full lowercasing in the root locale, as JavaScript's
// String.prototype.toLowerCase (ICU) does it: the simple mappings, İ → i̇
// (the only unconditional multi-rune one), and the Final_Sigma context.
func lowerFull(s string) string {
	if isASCII(s) {
		return strings.ToLower(s)
	}
	rs := []rune(s)
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range rs {
		switch r {
		case 0x130:
			b.WriteString("i\u0307")
		case 0x3A3:
			if casedAround(rs, i, -1) && !casedAround(rs, i, +1) {
				b.WriteRune(0x3C2) // ς
			} else {
				b.WriteRune(0x3C3) // σ
			}
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// casedAround reports whether, skipping case-ignorable runes, the first rune
// in direction dir from rs[i] is cased (Unicode 3.13, Final_Sigma).
func casedAround(rs []rune, i, dir int) bool {
	for j := i + dir; j >= 0 && j < len(rs); j += dir {
		r := rs[j]
		if isCaseIgnorable(r) {
			continue
		}
		return isCased(r)
	}
	return false
}

func isCased(r rune) bool {
	return unicode.IsLower(r) || unicode.IsUpper(r) || unicode.IsTitle(r) ||
		unicode.In(r, unicode.Other_Lowercase, unicode.Other_Uppercase)
}

func isCaseIgnorable(r rune) bool {
	switch r {
	// Word_Break MidLetter, MidNumLet and Single_Quote
	case '\'', '.', ':', 0xB7, 0x387, 0x55F, 0x5F4, 0x2018, 0x2019, 0x2024, 0x2027,
		0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}

// stripAccents decomposes (NFD) and drops nonspacing marks (Mn).
func stripAccents(s string) string {
	if isASCII(s) {
		return s
	}
	d := norm.NFD.String(s)
	var b strings.Builder
	b.Grow(len(d))
	for _, r := range d {
		if !unicode.Is(unicode.Mn, r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}
