package redact

import (
	"sort"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// view is a text as the detectors read it: every rune folded (see fold),
// with the way back from a span of the folded text to the bytes of the
// original it came from. Matching on the folded text and replacing in the
// original keeps the original bytes of everything but the values.
type view struct {
	s string // the original
	n string // the folded text
	// edits are the runes fold changed, in order: between two of them the
	// folded text is the original shifted by a constant.
	edits []edit
}

// edit is one changed rune: folded bytes n[nAt:nAt+nLen] (none when it
// was dropped) came from s[sAt:sAt+sLen].
type edit struct {
	nAt, nLen, sAt, sLen int
}

// newView folds s. Text that fold leaves as it is (all ASCII, plain Chinese
// text) costs one pass and no copy.
func newView(s string) view {
	v := view{s: s, n: s}
	first := -1
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			continue
		}
		if ideograph(s, i) {
			i += 3
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if _, same := fold(r, s[i:i+size]); !same {
			first = i
			break
		}
		i += size
	}
	if first < 0 {
		return v
	}
	b := make([]byte, 0, len(s)+16)
	b = append(b, s[:first]...)
	for i := first; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			b = append(b, c)
			i++
			continue
		}
		if ideograph(s, i) {
			b = append(b, s[i:i+3]...)
			i += 3
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		f, same := fold(r, s[i:i+size])
		if same {
			b = append(b, s[i:i+size]...)
		} else {
			v.edits = append(v.edits, edit{nAt: len(b), nLen: len(f), sAt: i, sLen: size})
			b = append(b, f...)
		}
		i += size
	}
	v.n = string(b)
	return v
}

// ideograph reports whether s[i:] starts with U+4000 to U+9FFF (most of
// Chinese text), which fold leaves as it is: three bytes, a lead byte from
// 0xE4 to 0xE9, told without decoding.
func ideograph(s string, i int) bool {
	return i+2 < len(s) && s[i] >= 0xe4 && s[i] <= 0xe9 && s[i+1]&0xc0 == 0x80 && s[i+2]&0xc0 == 0x80
}

// fold is what a rune reads as: its NFKC form (fullwidth letters, digits
// and punctuation become ASCII), with every space a space, every dash a
// '-', every slash a '/', every dot between digits a '.' or '·', and
// nothing for the invisible ones (zero-width spaces
// and joiners, direction marks, combining and enclosing marks, variation
// selectors), so they hide nothing between two digits. same reports that
// the rune stays as it is (raw is its bytes in the original).
func fold(r rune, raw string) (f string, same bool) {
	switch {
	case r >= 0x4000 && r <= 0x9fff: // CJK ideographs: most of Chinese text
		return raw, true
	case r >= 0xff01 && r <= 0xff5e: // fullwidth ASCII
		return string(r - 0xfee0), false
	case r == 0x3000 || r == 0xa0:
		return " ", false
	case r >= 0x3001 && r <= 0x303f: // CJK punctuation, none of which NFKC changes that matters here
		return raw, true
	case r >= 0x2010 && r <= 0x2015, r == 0x2212, r == 0xfe58, r == 0xfe63, r == 0x2043,
		r == 0x30fc, r == 0x2e3a, r == 0x2e3b, r == 0xfe31, r == 0xfe32: // dashes, the long vowel mark
		return "-", false
	case r == 0x2215 || r == 0x2044: // division and fraction slash
		return "/", false
	case r == 0x2219 || r == 0x22c5 || r == 0x2027: // dots that are operators or hyphenation points
		return "·", false
	case r == utf8.RuneError && len(raw) == 1: // not UTF-8: left as it is
		return raw, true
	case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		return "", false
	case unicode.Is(unicode.Zs, r):
		return " ", false
	}
	if norm.NFKC.PropertiesString(raw).Decomposition() == nil {
		return raw, true
	}
	f = norm.NFKC.String(raw)
	return f, f == raw
}

// span is the original bytes that folded bytes n[a:b] came from: whole
// runes of s, so a span starts and ends on rune boundaries; a changed rune
// partly in n[a:b] is taken whole.
func (v view) span(a, b int) (int, int) {
	if len(v.edits) == 0 {
		return a, b
	}
	return v.start(a), v.end(b)
}

// start is where in s the rune holding folded byte p starts.
func (v view) start(p int) int {
	i := sort.Search(len(v.edits), func(i int) bool { return v.edits[i].nAt > p }) - 1
	if i < 0 {
		return p
	}
	e := v.edits[i]
	if p < e.nAt+e.nLen {
		return e.sAt
	}
	return p - (e.nAt + e.nLen) + e.sAt + e.sLen
}

// end is where in s the rune holding folded byte p-1 ends (p > 0).
func (v view) end(p int) int {
	q := p - 1
	i := sort.Search(len(v.edits), func(i int) bool { return v.edits[i].nAt > q }) - 1
	if i < 0 {
		return p
	}
	e := v.edits[i]
	if q < e.nAt+e.nLen {
		return e.sAt + e.sLen
	}
	return p - (e.nAt + e.nLen) + e.sAt + e.sLen
}
