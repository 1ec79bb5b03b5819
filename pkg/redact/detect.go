// Package redact keeps personal data out of what leaves the box for the
// model: mainland phone numbers, resident ID numbers, e-mail addresses,
// bank card numbers and licence plates in a request (user text, memory
// facts, tool results, history) are replaced by placeholders such as
// [PHONE_1] before it is sent, and the placeholders in the answer (its
// text, streamed or not, and the arguments of the tool calls the caller's
// policy allows: Client.Restore) are put back, so users and those tools
// see the real values and the model never does. Every other tool works on
// the placeholders, and a value the conversation had that comes back in a
// tool's result, however written, is its placeholder again (Map.Result).
// A conversation keeps one map for all its requests (Conversations).
//
// Detection is by pattern with validation where a number carries its own
// (the ID number's ISO 7064 check digit and date, the bank card's Luhn
// digit). The patterns run on a folded copy of the text (NFKC, every dash
// a '-', invisible characters dropped: see fold), so fullwidth digits,
// NBSP or zero-width spaces and the like hide nothing; digit groups may be
// separated by spaces, dots, dashes, slashes or parentheses. A value found
// in the copy is replaced in the original text, its exact bytes, and put
// back as they were. What it cannot see: values spelled out in words,
// split across messages, grouped in unusual ways, foreign formats, or
// inside pictures and files the model is sent.
package redact

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
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

// sep is what may stand between two digit groups (in the folded text):
// up to three of space, tab, dot, dash, slash, parenthesis, middle dot.
const sep = `[ \t.\-/()·•・]{0,3}`

var (
	// An e-mail address: an ASCII local part, or a Chinese name (at most
	// four characters: the text before it is often Chinese too), or Latin,
	// Greek or Cyrillic letters; a domain of letters of any script ending
	// in an ASCII top-level domain, a punycode one, a Chinese one from a
	// list, or one in those scripts.
	reEmail = regexp.MustCompile(`(?:[A-Za-z0-9._%+\-]{1,64}|\p{Han}{1,4}|[\p{Latin}\p{Greek}\p{Cyrillic}0-9._%+\-]{1,64})@` +
		`(?:[\p{L}\p{N}](?:[\p{L}\p{N}\-]{0,61}[\p{L}\p{N}])?\.)+` +
		`(?:[A-Za-z]{2,24}|xn--[A-Za-z0-9\-]{1,59}|中国|中國|公司|网络|網絡|香港|台湾|台灣|澳门|澳門|新加坡|在线|网址|商城|企业|集团|我爱你|游戏|购物|信息|手机|[\p{Latin}\p{Greek}\p{Cyrillic}]{2,24})`)
	reID = regexp.MustCompile(`[1-9]\d{5}` + sep + `(?:18|19|20)\d{2}` + sep + `(?:0[1-9]|1[0-2])` + sep + `(?:0[1-9]|[12]\d|3[01])` + sep + `\d{3}` + sep + `[\dXx]`)
	// Cards are written in groups of four (the last of 1-3): longest first.
	reCard = regexp.MustCompile(`[1-9]\d{3}(?:` + sep + `\d{4}){2}(?:` + sep + `\d{4}` + sep + `\d{1,3}|` + sep + `\d{4}|` + sep + `\d{1,3})`)
	// Mobile: 1[3-9]X XXXX XXXX, optionally +86 (or 0086, or in
	// parentheses); landline: area code (010, 02X or 0XXX, maybe in
	// parentheses) and 7-8 digits (maybe split after the third or fourth),
	// maybe an extension.
	reMobile   = regexp.MustCompile(`(?:\(?(?:\+|00)?86\)?` + sep + `)?\(?1[3-9]\d` + sep + `\d{4}` + sep + `\d{4}`)
	reLandline = regexp.MustCompile(`(?:\(0(?:10|2\d|[3-9]\d{2})\)|0(?:10|2\d|[3-9]\d{2}))` + sep + `[2-9]\d{2,3}` + sep + `\d{4}(?:-\d{1,5})?`)
	rePlate    = regexp.MustCompile(`[京津沪渝冀豫云辽黑湘皖鲁新苏浙赣鄂桂甘晋蒙陕吉闽贵粤青藏川宁琼][A-HJ-NP-Z][·•・ .\-]?[A-HJ-NP-Z0-9]{4,5}[A-HJ-NP-Z0-9挂学警港澳]`)
)

// match is one detected value: s[start:end] of the original text, and
// its canonical form (see canonical).
type match struct {
	start, end int
	kind       Kind
	canon      string
}

// find returns the non-overlapping values of the enabled kinds in s, in
// order.
func find(s string, enabled []Kind) []match {
	digits, at, province := scan(s)
	var v view
	folded := false
	var numWins [][2]int // shared by the number kinds
	var all []match
	taken := func(a, b int) bool {
		for _, m := range all {
			if a < m.end && m.start < b {
				return true
			}
		}
		return false
	}
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
		if !folded {
			v, folded = newView(s), true
		}
		var wins [][2]int
		switch k {
		case Phone, IDCard, BankCard:
			if numWins == nil {
				numWins = windows(v.n, k)
			}
			wins = numWins
		default:
			wins = windows(v.n, k)
		}
		for _, loc := range locate(v.n, k, wins) {
			// Spans are decided in the original: two values folded from
			// one rune ("⑩") cannot both have it.
			a, b := v.span(loc[0], loc[1])
			if !taken(a, b) {
				all = append(all, match{a, b, k, canonical(k, v.n[loc[0]:loc[1]])})
			}
		}
	}
	slices.SortFunc(all, func(a, b match) int { return a.start - b.start })
	return all
}

// canonical is what is the same in every way of writing a value (folded
// already): a number's digits (a mobile's without +86), an ID number's
// digits and X, an e-mail address in lower case, a plate without its
// separator. Values of one canonical form are one value.
func canonical(k Kind, f string) string {
	switch k {
	case Email:
		return asciiLower(f)
	case Plate:
		return strings.Map(func(r rune) rune {
			if strings.ContainsRune("·•・ .-", r) {
				return -1
			}
			return r
		}, f)
	}
	b := make([]byte, 0, len(f))
	for i := 0; i < len(f); i++ {
		switch c := f[i]; {
		case c >= '0' && c <= '9':
			b = append(b, c)
		case c == 'x' || c == 'X':
			b = append(b, 'X')
		}
	}
	if k == Phone && len(b) > 11 && b[len(b)-11] == '1' {
		if p := string(b[:len(b)-11]); p == "86" || p == "0086" {
			b = b[len(b)-11:]
		}
	}
	return string(b)
}

// provinces are the first characters of licence plates.
const provinces = "京津沪渝冀豫云辽黑湘皖鲁新苏浙赣鄂桂甘晋蒙陕吉闽贵粤青藏川宁琼"

// scan counts what the kinds need, on the original text and generously
// (it only decides what is not worth looking at): the longest run of
// digits (ASCII or any other, counted as two for "⑩") that no letter
// interrupts, an '@' (or its fullwidth or small form), a province
// character.
func scan(s string) (digits int, at, province bool) {
	run := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch asciiClass[c] {
			case classDigit:
				run++
				digits = max(digits, run)
			case classAt:
				at, run = true, 0
			case classOther:
				run = 0
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r >= 0x4e00 && r <= 0x9fff:
			run = 0
			if !province && isProvince(r) {
				province = true
			}
		case r == 0xff20 || r == 0xfe6b:
			at, run = true, 0
		case unicode.IsNumber(r):
			run += 2
			digits = max(digits, run)
		case unicode.IsLetter(r) && r != 0x30fc: // the long vowel mark folds to a dash
			run = 0
		}
	}
	return digits, at, province
}

// What scan makes of an ASCII byte: a digit, an '@', a separator (the
// run of digits goes on) or anything else.
const (
	classOther = iota
	classDigit
	classAt
	classSep
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := '0'; c <= '9'; c++ {
		t[c] = classDigit
	}
	t['@'] = classAt
	for _, c := range " \t.-/()+" {
		t[c] = classSep
	}
	return t
}()

// locate finds kind's values in s: pattern matches that stand alone (not
// inside a longer run of letters or digits) and pass the kind's check.
// The patterns run only over wins, the windows where such a value can be
// (around an '@', a run of digits, a province character: see windows),
// not over the whole text: the same matches, far less work.
func locate(s string, k Kind, wins [][2]int) [][2]int {
	var out [][2]int
	add := func(re *regexp.Regexp, ok func(string) bool, digitsOnly bool) {
		for _, w := range wins {
			// A match that is not a value ("(13800138000" glued to a
			// digit before its parenthesis) may hide one that is
			// ("13800138000"): the search goes on from its second rune.
			for pos := w[0]; pos < w[1]; {
				loc := re.FindStringIndex(s[pos:w[1]])
				if loc == nil {
					break
				}
				a, b := pos+loc[0], pos+loc[1]
				if alone(s, a, b, digitsOnly) && (ok == nil || ok(s[a:b])) {
					out = append(out, [2]int{a, b})
					pos = b
					continue
				}
				_, size := utf8.DecodeRuneInString(s[a:])
				pos = a + size
				// A start inside a run of letters and digits is glued
				// to the one before it: never alone.
				for pos < w[1] && alnum(s[pos-1]) && alnum(s[pos]) && !escapeBefore(s, pos) {
					pos++
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

// The characters of each kind's windows: ASCII by table, the rest by
// function.
var (
	emailASCII  = asciiSet("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-@")
	plateASCII  = asciiSet("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .-")
	numberASCII = asciiSet("0123456789 \t.-/()+Xx")
)

func asciiSet(chars string) (t [utf8.RuneSelf]bool) {
	for i := 0; i < len(chars); i++ {
		t[chars[i]] = true
	}
	return t
}

// windows are the spans of s where a value of kind k may be: each is
// whole tokens of the characters the kind's pattern uses, so a match in a
// window is the match in s. (The number kinds share their windows.) A
// window is grown from a seed, a character every value of the kind has
// (a digit, an '@', a province character), so text far from one costs a
// byte search, not a decoding of every rune.
func windows(s string, k Kind) [][2]int {
	var ascii *[utf8.RuneSelf]bool
	var other func(r rune) bool
	var need func(w string) bool
	var seed func(s string, from int) int
	switch k {
	case Email:
		ascii = &emailASCII
		other = func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }
		need = func(string) bool { return true }
		seed = func(s string, from int) int {
			if i := strings.IndexByte(s[from:], '@'); i >= 0 {
				return from + i
			}
			return -1
		}
	case Plate:
		ascii = &plateASCII
		other = func(r rune) bool { return isProvince(r) || strings.ContainsRune(plateOther, r) }
		need = func(string) bool { return true }
		seed = nextProvince
	default: // numbers
		ascii = &numberASCII
		other = func(r rune) bool { return r == '·' || r == '•' || r == '・' }
		need = func(w string) bool {
			n := 0
			for i := 0; i < len(w); i++ {
				if w[i] >= '0' && w[i] <= '9' {
					n++
				}
			}
			return n >= 7
		}
		seed = func(s string, from int) int {
			for i := from; i < len(s); i++ {
				if s[i] >= '0' && s[i] <= '9' {
					return i
				}
			}
			return -1
		}
	}
	in := func(r rune) bool {
		if r < utf8.RuneSelf {
			return ascii[r]
		}
		return other(r)
	}
	var out [][2]int
	for from := 0; from < len(s); {
		i := seed(s, from)
		if i < 0 {
			break
		}
		a, b := i, i
		for a > from {
			r, size := utf8.DecodeLastRuneInString(s[:a])
			if !in(r) {
				break
			}
			a -= size
		}
		for b < len(s) {
			r, size := utf8.DecodeRuneInString(s[b:])
			if !in(r) {
				break
			}
			b += size
		}
		if need(s[a:b]) {
			out = append(out, [2]int{a, b})
		}
		from = max(b, i+1)
	}
	return out
}

// nextProvince is the index of the first province character in s at or
// after from, or -1. Province characters are CJK ideographs, three bytes
// in UTF-8 with a lead byte from 0xE4 to 0xE9: only those are decoded.
func nextProvince(s string, from int) int {
	for i := from; i+2 < len(s); i++ {
		if c := s[i]; c >= 0xe4 && c <= 0xe9 {
			r := rune(c&0x0f)<<12 | rune(s[i+1]&0x3f)<<6 | rune(s[i+2]&0x3f)
			if isProvince(r) && s[i+1]&0xc0 == 0x80 && s[i+2]&0xc0 == 0x80 {
				return i
			}
		}
	}
	return -1
}

// plateOther are the other non-ASCII characters of a plate.
const plateOther = "挂学警港澳·•・"

// provinceSet has a bit for each province character (all CJK ideographs).
var provinceSet = func() (t [(0x9fff - 0x4e00 + 64) / 64]uint64) {
	for _, r := range provinces {
		t[(r-0x4e00)/64] |= 1 << ((r - 0x4e00) % 64)
	}
	return t
}()

// isProvince reports whether r starts a licence plate.
func isProvince(r rune) bool {
	return r >= 0x4e00 && r <= 0x9fff && provinceSet[(r-0x4e00)/64]&(1<<((r-0x4e00)%64)) != 0
}

// alone reports whether s[a:b] is not part of a longer token: for numbers
// no digit (or letter, for an ID's X) touches it, nor a dash or plus, nor
// a dot with a digit beyond it (a longer dotted number: "2024.13800138000.1");
// for the others no ASCII letter or digit.
func alone(s string, a, b int, digits bool) bool {
	if escapeBefore(s, a) {
		a = 0 // a JSON escape ("\n", "\u8bdd") ends just before: a boundary
	}
	before, n := utf8.DecodeLastRuneInString(s[:a])
	after, m := utf8.DecodeRuneInString(s[b:])
	edge := func(r rune) bool {
		if r >= '0' && r <= '9' {
			return true
		}
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return true
		}
		return digits && (r == '-' || r == '+')
	}
	isDigit := func(r rune) bool { return r >= '0' && r <= '9' }
	if digits && a > n && before == '.' {
		if r, _ := utf8.DecodeLastRuneInString(s[:a-n]); isDigit(r) {
			return false
		}
	}
	if digits && b+m < len(s) && after == '.' {
		if r, _ := utf8.DecodeRuneInString(s[b+m:]); isDigit(r) {
			return false
		}
	}
	return !(a > 0 && edge(before)) && !(b < len(s) && edge(after))
}

func alnum(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

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
	v = canonical(IDCard, v)
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
