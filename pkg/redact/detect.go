// Package redact keeps personal data out of what leaves the box for the
// model: mainland phone numbers, resident ID numbers, e-mail addresses,
// bank card numbers and licence plates in a request (user text, memory
// facts, tool results, history) are replaced by placeholders such as
// [PHONE_1] before it is sent, and the placeholders in the answer (its
// text, streamed or not, and the arguments of the tool calls it asks
// for) are put back, so users and tools see the real values and the
// model never does.
//
// Detection is by pattern with validation where a number carries its own
// (the ID number's ISO 7064 check digit and date, the bank card's Luhn
// digit). What it cannot see: values spelled out in words, split across
// messages, with unusual separators, foreign formats, or inside pictures
// and files the model is sent.
package redact

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Kind is a kind of personal data.
type Kind string

// The kinds, as [privacy] redact names them.
const (
	Phone    Kind = "phone"
	IDCard   Kind = "id_card"
	Email    Kind = "email"
	BankCard Kind = "bank_card"
	Plate    Kind = "plate"
)

// Kinds are all kinds, in the order overlapping matches are decided (an
// e-mail before the digits in it; an ID number before a card number of
// the same digits).
var Kinds = []Kind{Email, IDCard, BankCard, Phone, Plate}

// ParseKinds reads [privacy] redact.
func ParseKinds(names []string) ([]Kind, error) {
	var out []Kind
	for _, n := range names {
		k := Kind(strings.TrimSpace(strings.ToLower(n)))
		if !slices.Contains(Kinds, k) {
			return nil, fmt.Errorf("unknown kind %q (known: phone, id_card, email, bank_card, plate)", n)
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

var (
	reEmail = regexp.MustCompile(`[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63})*\.[A-Za-z]{2,24}`)
	reID    = regexp.MustCompile(`[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx]`)
	reCard  = regexp.MustCompile(`[1-9]\d{3}(?:[ \-]?\d{4}){2}(?:[ \-]?\d{4}[ \-]?\d{1,3}|[ \-]?\d{4}|[ \-]?\d{1,3})`) // longest first
	// Mobile: 1[3-9]X XXXX XXXX, optionally +86; landline: area code
	// (010, 02X or 0XXX, maybe in parentheses) and 7-8 digits, maybe an
	// extension.
	reMobile   = regexp.MustCompile(`(?:\+?86[ \-]?)?1[3-9]\d(?:[ \-]?\d{4}){2}`)
	reLandline = regexp.MustCompile(`(?:\(0(?:10|2\d|[3-9]\d{2})\)|0(?:10|2\d|[3-9]\d{2}))[ \-]?[2-9]\d{6,7}(?:-\d{1,5})?`)
	rePlate    = regexp.MustCompile(`[京津沪渝冀豫云辽黑湘皖鲁新苏浙赣鄂桂甘晋蒙陕吉闽贵粤青藏川宁琼][A-HJ-NP-Z][·• ]?[A-HJ-NP-Z0-9]{4,5}[A-HJ-NP-Z0-9挂学警港澳]`)
)

// match is one detected value.
type match struct {
	start, end int
	kind       Kind
}

// find returns the non-overlapping values of the enabled kinds in s, in
// order.
func find(s string, enabled []Kind) []match {
	var all []match
	taken := func(a, b int) bool {
		for _, m := range all {
			if a < m.end && m.start < b {
				return true
			}
		}
		return false
	}
	digits, at, province := scan(s)
	for _, k := range Kinds {
		if !slices.Contains(enabled, k) {
			continue
		}
		// Cheap tests first: most text has none of what a kind needs.
		switch k {
		case Email:
			if !at {
				continue
			}
		case Phone, IDCard, BankCard:
			if digits < 7 {
				continue
			}
		case Plate:
			if !province {
				continue
			}
		}
		for _, loc := range locate(s, k) {
			if !taken(loc[0], loc[1]) {
				all = append(all, match{loc[0], loc[1], k})
			}
		}
	}
	slices.SortFunc(all, func(a, b match) int { return a.start - b.start })
	return all
}

// provinces are the first characters of licence plates.
const provinces = "京津沪渝冀豫云辽黑湘皖鲁新苏浙赣鄂桂甘晋蒙陕吉闽贵粤青藏川宁琼"

// scan counts what the kinds need: the longest run of digits (spaces and
// dashes between them allowed), an '@', a province character.
func scan(s string) (digits int, at, province bool) {
	run := 0
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			run++
			digits = max(digits, run)
		case r == ' ' || r == '-':
		case r == '@':
			at, run = true, 0
		default:
			run = 0
			if r >= 0x4e00 && !province && strings.ContainsRune(provinces, r) {
				province = true
			}
		}
	}
	return digits, at, province
}

// locate finds kind's values in s: pattern matches that stand alone (not
// inside a longer run of letters or digits) and pass the kind's check.
func locate(s string, k Kind) [][2]int {
	var out [][2]int
	add := func(re *regexp.Regexp, ok func(string) bool, digitsOnly bool) {
		// The patterns run only over the windows where such a value can
		// be (around an '@', a run of digits, a province character), not
		// over the whole text: the same matches, far less work.
		for _, w := range windows(s, k) {
			for _, loc := range re.FindAllStringIndex(s[w[0]:w[1]], -1) {
				a, b := w[0]+loc[0], w[0]+loc[1]
				if !alone(s, a, b, digitsOnly) {
					continue
				}
				if ok == nil || ok(s[a:b]) {
					out = append(out, [2]int{a, b})
				}
			}
		}
	}
	switch k {
	case Email:
		add(reEmail, nil, false)
	case IDCard:
		add(reID, validID, true)
	case BankCard:
		add(reCard, validCard, true)
	case Phone:
		add(reMobile, nil, true)
		add(reLandline, nil, true)
	case Plate:
		add(rePlate, nil, false)
	}
	return out
}

// windows are the spans of s where a value of kind k may be: each is
// whole tokens of the characters the kind's pattern uses, so a match in a
// window is the match in s.
func windows(s string, k Kind) [][2]int {
	var in func(r rune) bool
	var need func(w string) bool
	switch k {
	case Email:
		in = func(r rune) bool {
			return r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._%+-@", r))
		}
		need = func(w string) bool { return strings.Contains(w, "@") }
	case Plate:
		in = func(r rune) bool {
			return r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == ' ' || r == '·' || r == '•' || strings.ContainsRune(provinces+"挂学警港澳", r)
		}
		need = func(w string) bool { return strings.ContainsAny(w, provinces) }
	default: // numbers
		in = func(r rune) bool {
			return r >= '0' && r <= '9' || r == ' ' || r == '-' || r == '+' || r == '(' || r == ')' || r == 'X' || r == 'x'
		}
		need = func(w string) bool {
			n := 0
			for i := 0; i < len(w); i++ {
				if w[i] >= '0' && w[i] <= '9' {
					n++
				}
			}
			return n >= 7
		}
	}
	var out [][2]int
	start := -1
	flush := func(end int) {
		if start >= 0 && need(s[start:end]) {
			out = append(out, [2]int{start, end})
		}
		start = -1
	}
	for i, r := range s {
		if in(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		flush(i)
	}
	flush(len(s))
	return out
}

// alone reports whether s[a:b] is not part of a longer token: for numbers
// no digit (or letter, for an ID's X) touches it; for the others no ASCII
// letter or digit.
func alone(s string, a, b int, digits bool) bool {
	if escapeBefore(s, a) {
		a = 0 // a JSON escape ("\n", "\u8bdd") ends just before: a boundary
	}
	before, _ := utf8.DecodeLastRuneInString(s[:a])
	after, _ := utf8.DecodeRuneInString(s[b:])
	edge := func(r rune) bool {
		if r >= '0' && r <= '9' {
			return true
		}
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return true
		}
		return digits && (r == '-' || r == '+')
	}
	return !(a > 0 && edge(before)) && !(b < len(s) && edge(after))
}

// escapeBefore reports whether a JSON (or C) escape ends at s[a]: "\n",
// "\t" and the like, or "\uXXXX". Text in tool results is often JSON, where
// a value follows such an escape directly.
func escapeBefore(s string, a int) bool {
	if a >= 2 && s[a-2] == '\\' && strings.IndexByte("nrtbf\"/\\", s[a-1]) >= 0 {
		return true
	}
	if a >= 6 && s[a-6] == '\\' && s[a-5] == 'u' {
		for i := a - 4; i < a; i++ {
			if !strings.ContainsRune("0123456789abcdefABCDEF", rune(s[i])) {
				return false
			}
		}
		return true
	}
	return false
}

// validID checks an 18-digit resident ID number: a real date of birth
// and the ISO 7064 MOD 11-2 check digit.
func validID(v string) bool {
	if len(v) != 18 {
		return false
	}
	if _, err := time.Parse("20060102", v[6:14]); err != nil {
		return false
	}
	weights := [17]int{7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2}
	sum := 0
	for i := range 17 {
		sum += int(v[i]-'0') * weights[i]
	}
	return "10X98765432"[sum%11] == upper(v[17])
}

func upper(c byte) byte {
	if c == 'x' {
		return 'X'
	}
	return c
}

// validCard checks a bank card number: 16 to 19 digits (separators
// aside) with a valid Luhn check digit.
func validCard(v string) bool {
	var digits []byte
	for i := 0; i < len(v); i++ {
		if v[i] >= '0' && v[i] <= '9' {
			digits = append(digits, v[i]-'0')
		}
	}
	if len(digits) < 16 || len(digits) > 19 {
		return false
	}
	sum := 0
	for i := range digits {
		d := int(digits[len(digits)-1-i])
		if i%2 == 1 {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return sum%10 == 0
}
