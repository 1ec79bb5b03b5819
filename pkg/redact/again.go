package redact

import (
	"slices"
	"strings"
)

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
		// Runs of digits (an ID's X counted as one) with at most three
		// separators between two of them.
		var ds []byte
		var at []int
		chain := func() {
			for i := 0; i < len(ds); {
				hit := 0
				for _, l := range lengths {
					if i+l <= len(ds) {
						if kv, ok := nums[l][string(ds[i:i+l])]; ok {
							add(at[i], at[i+l-1]+1, kv)
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
			ds, at = ds[:0], at[:0]
		}
		gap := 0
		for i := 0; i < len(v.n); i++ {
			c := v.n[i]
			switch {
			case c >= '0' && c <= '9' || c == 'X' || c == 'x':
				if c == 'x' {
					c = 'X'
				}
				ds, at = append(ds, c), append(at, i)
				gap = 0
			case c < 0x80 && numberASCII[c] && len(ds) > 0 && gap < 3:
				gap++
			default:
				chain()
				gap = 0
			}
		}
		chain()
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
