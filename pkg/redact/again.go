package redact

import (
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxGap is how many characters of any kind may stand between two digits
// of a known value in a tool's result.
const maxGap = 4

// digitOf is the digit r stands for ('0'-'9', a Chinese numeral's, 'X'
// for an ID's check character when xDigit), or 0.
func digitOf(r rune, xDigit bool) byte {
	switch {
	case r >= '0' && r <= '9':
		return byte(r)
	case xDigit && (r == 'X' || r == 'x'):
		return 'X'
	}
	if r >= 0x3007 {
		if d, ok := chineseDigits[r]; ok {
			return d
		}
	}
	return 0
}

// chineseDigits are the numerals as Chinese reads a number digit by digit
// (幺 for one and 两 for two as said over the phone).
var chineseDigits = map[rune]byte{
	'〇': '0', '零': '0', '一': '1', '幺': '1', '二': '2', '两': '2', '三': '3',
	'四': '4', '五': '5', '六': '6', '七': '7', '八': '8', '九': '9',
}

// encodings are the forms of a value one command makes of it (xxd -p,
// od, base64): hex in either case, and the parts of its base64 that stand
// whatever bytes come before or after it, at each of the three offsets.
// Parts shorter than 8 characters are left out (they match too much).
func encodings(v string) []string {
	var out []string
	if len(v) >= 6 {
		h := hex.EncodeToString([]byte(v))
		out = append(out, h, strings.ToUpper(h))
	}
	for k := 0; k < 3; k++ {
		// With k bytes before it, v's bytes from (3-k)%3 on fill whole
		// groups of three; the last partial group depends on what follows.
		from := (3 - k) % 3
		if from >= len(v) {
			continue
		}
		core := v[from:]
		core = core[:len(core)/3*3]
		if enc := base64.StdEncoding.EncodeToString([]byte(core)); len(enc) >= 8 {
			out = append(out, enc)
			if u := base64.URLEncoding.EncodeToString([]byte(core)); u != enc {
				out = append(out, u)
			}
		}
	}
	return out
}

// known is a value a map has: its kind and canonical form.
type known struct {
	kind  Kind
	canon string
}

// again returns found (the values detected in s) with the values m
// already has wherever else they are in s: numbers by their digits in any
// run of digits and separators (glued to letters or other digits, or
// reversed), e-mail addresses in any case, plates as they are. Detected
// values win where the two overlap. m.mu is held.
func (m *Map) again(s string, found []match) []match {
	nums := map[int]map[string]known{} // by length: digits (and reversed) -> value
	var lengths []int
	var texts []known // e-mail addresses, plates
	for key := range m.byCanon {
		k, c, _ := strings.Cut(key, "\x00")
		kv := known{Kind(k), c}
		switch kv.kind {
		case Email, Plate:
			texts = append(texts, kv)
		default:
			if len(c) < 7 {
				continue
			}
			if nums[len(c)] == nil {
				nums[len(c)] = map[string]known{}
				lengths = append(lengths, len(c))
			}
			nums[len(c)][c] = kv
			r := []byte(c)
			slices.Reverse(r)
			if _, ok := nums[len(c)][string(r)]; !ok {
				nums[len(c)][string(r)] = kv
			}
		}
	}
	slices.Sort(lengths)
	slices.Reverse(lengths) // longest first
	v := newView(s)
	var extra []match
	add := func(a, b int, kv known) { // a span of v.n
		sa, sb := v.span(a, b)
		extra = append(extra, match{sa, sb, kv.kind, kv.canon})
	}
	if len(lengths) > 0 {
		// Runs of digits (an ID's X counted as one, Chinese numerals as
		// theirs) with at most maxGap other characters between two of
		// them: "138-0013-8000", "1a3a8a0a0a...", "一三八零零...". Twice:
		// with 'X' a digit (an ID's check character) and with it a gap
		// (a separator chosen to break the first reading).
		for _, xDigit := range []bool{true, false} {
			var ds []byte
			var at, end []int
			chain := func() {
				for i := 0; i < len(ds); {
					hit := 0
					for _, l := range lengths {
						if i+l <= len(ds) {
							if kv, ok := nums[l][string(ds[i:i+l])]; ok {
								add(at[i], end[i+l-1], kv)
								hit = l
								break
							}
						}
					}
					if hit == 0 {
						hit = 1
					}
					i += hit
				}
				ds, at, end = ds[:0], at[:0], end[:0]
			}
			gap := 0
			for i := 0; i < len(v.n); {
				r, size := utf8.DecodeRuneInString(v.n[i:])
				d := digitOf(r, xDigit)
				switch {
				case d != 0:
					ds, at, end = append(ds, d), append(at, i), append(end, i+size)
					gap = 0
				case len(ds) > 0 && gap < maxGap && r != '\n':
					gap++
				default:
					chain()
					gap = 0
				}
				i += size
			}
			chain()
		}
	}
	// Encodings a command makes of a value in one step: hex, base64.
	for key := range m.byCanon {
		k, c, _ := strings.Cut(key, "\x00")
		kv := known{Kind(k), c}
		for _, enc := range encodings(c) {
			for from := 0; ; {
				i := strings.Index(v.n[from:], enc)
				if i < 0 {
					break
				}
				add(from+i, from+i+len(enc), kv)
				from += i + len(enc)
			}
		}
	}
	if len(texts) > 0 {
		lower := asciiLower(v.n)
		for _, kv := range texts {
			hay := v.n
			if kv.kind == Email {
				hay = lower
			}
			for from := 0; ; {
				i := strings.Index(hay[from:], kv.canon)
				if i < 0 {
					break
				}
				add(from+i, from+i+len(kv.canon), kv)
				from += i + len(kv.canon)
			}
		}
	}
	if len(extra) == 0 {
		return found
	}
	slices.SortFunc(extra, func(a, b match) int { return a.start - b.start })
	out := found
	for _, e := range extra {
		overlaps := false
		for _, f := range out {
			if e.start < f.end && f.start < e.end {
				overlaps = true
				break
			}
		}
		if !overlaps {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b match) int { return a.start - b.start })
	return out
}

// asciiLower is s with ASCII letters in lower case (byte offsets kept).
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
