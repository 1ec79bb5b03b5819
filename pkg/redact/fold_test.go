package redact

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// The ways of writing a value that the detectors read through: each is
// found (the placeholder replaces exactly its bytes, in Chinese and in
// English text) and put back byte for byte.
func TestFoldedFormsFoundAndPutBack(t *testing.T) {
	for _, c := range []struct {
		form string
		kind Kind
	}{
		{"138.0013.8000", Phone},
		{"(138) 0013 8000", Phone},
		{"（０１０）６２３４－５６７８", Phone},
		{"138\u200b0013\u200b8000", Phone},
		{"１３８００１３８０００", Phone},
		{"138\u00a00013\u00a08000", Phone},
		{"138/0013/8000", Phone},
		{"138–0013—8000", Phone},                       // en and em dash
		{"1\u200d3\u200c8\u20600013\ufeff8000", Phone}, // joiners, word joiner, BOM
		{"１３８\u30000013\u30008000", Phone},             // ideographic space
		{"+86 (138) 0013-8000", Phone},
		{"138ー0013ー8000", Phone},           // the long vowel mark as a dash
		{"138\u22150013\u22158000", Phone}, // division slash
		{"138\u22c50013\u22c58000", Phone}, // dot operator
		{"138\u16800013\u20038000", Phone}, // ogham space mark, em space
		{"＋８６ １３８ ００１３ ８０００", Phone},
		{"010.6234.5678", Phone},
		{"0755/2345/6789", Phone},
		{"110105 19491231 002X", IDCard},
		{"110105 1949 1231 002X", IDCard},
		{"１１０１０５１９４９１２３１００２Ｘ", IDCard},
		{"110105.19491231.002x", IDCard},
		{"6222.0212.3456.7890.128", BankCard},
		{"６２２２ ０２１２ ３４５６ ７８９０ １２８", BankCard},
		{"6222/0212/3456/7890/128", BankCard},
		{"ｚｈａｎｇ＠ｅｘａｍｐｌｅ．ｃｏｍ", Email},
		{"user@bücher.de", Email},
		{"müller@bücher.de", Email},
		{"ZHANG@EXAMPLE.COM", Email},
		{"zhang\u200b@example.com", Email},
		{"京Ａ１２３４５", Plate},
		{"粤B-D12345", Plate},
	} {
		for _, tmpl := range []string{"联系方式：%s，谢谢。", "call %s now", "%s"} {
			in := strings.Replace(tmpl, "%s", c.form, 1)
			want := strings.Replace(tmpl, "%s", "["+strings.ToUpper(string(c.kind))+"_1]", 1)
			m := NewMap(Kinds)
			got := m.Text(in)
			if got != want {
				t.Errorf("Text(%q)\n got %q\nwant %q", in, got, want)
				continue
			}
			if back := m.Restore(got); back != in {
				t.Errorf("Restore(%q) = %q, want %q", got, back, in)
			}
		}
	}
	// IDN addresses in Chinese text: the address, and no more than the
	// four characters a Chinese name may have before the '@'.
	m := NewMap(Kinds)
	in := "张三@例子.中国，zhang@example.com谢谢"
	if got, want := m.Text(in), "[EMAIL_1]，[EMAIL_2]谢谢"; got != want {
		t.Errorf("Text(%q) = %q, want %q", in, got, want)
	}
}

// What only looks like a number stays: dates, versions, prices, times,
// addresses, ranges.
func TestFoldedFormsLeaveOrdinaryNumbers(t *testing.T) {
	for _, s := range []string{
		"2024.01.15", "2024/01/15", "2024-01-15 13:45", "２０２４．０１．１５",
		"version 1.2.3", "v10.13.8", "1.2.3.4", "¥1,380.00", "138.00元", "13:00-14:30",
		"192.168.100.200", "2019/03/15-2020/04/16", "2019.03.15 - 2020.04.16",
		"3.13800138000", "13800138000.5", "Q3 2024 room 402", "第1380013期",
		"@张三 你好", "price 1380 0138 00", "(2024) 0315 1234",
	} {
		if got := NewMap(Kinds).Text(s); got != s {
			t.Errorf("Text(%q) = %q: an ordinary number taken for a value", s, got)
		}
	}
}

// The folded copy maps back into the original: every rune of the copy
// comes from whole runes of the original, in order, and redaction and
// restoration give the original back.
func FuzzFoldedSpans(f *testing.F) {
	for _, s := range []string{"１３８００１３８０００", "138\u200b0013\u200b8000", "（０１０）６２３４－５６７８",
		"ｚｈａｎｇ＠ｅｘａｍｐｌｅ．ｃｏｍ", "张三@例子.中国", "⑩⑪⑫", "1⃣3⃣8⃣", "\xff138\u00a00013", "e\u0301@x.cn", "㍿＠ｘ．ｃｎ", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := newView(s)
		bound := map[int]bool{len(s): true}
		for i := range s {
			bound[i] = true
		}
		last := 0
		for p := 0; p < len(v.n); {
			_, size := utf8.DecodeRuneInString(v.n[p:])
			a, b := v.span(p, p+size)
			if a < last || a >= b || b > len(s) || !bound[a] || !bound[b] {
				t.Fatalf("%q: folded %q [%d:%d] maps to [%d:%d] (after %d)", s, v.n, p, p+size, a, b, last)
			}
			last = a
			p += size
		}
		prev := 0
		for _, m := range find(s, Kinds) {
			if m.start < prev || m.start >= m.end || m.end > len(s) || !bound[m.start] || !bound[m.end] {
				t.Fatalf("%q: match [%d:%d] (after %d)", s, m.start, m.end, prev)
			}
			prev = m.end
		}
		if rePH.MatchString(s) {
			return
		}
		m := NewMap(Kinds)
		if red := m.Text(s); m.Restore(red) != s {
			t.Fatalf("round trip of %q: redacted %q, restored %q", s, red, m.Restore(red))
		}
	})
}

// A candidate that is not a value (glued to what is before it) does not
// hide a value that starts inside it.
func TestRejectedMatchHidesNoValue(t *testing.T) {
	for in, want := range map[string]string{
		"17000000000(17000000000": "[PHONE_1]([PHONE_1]",
		"0(13800138000)":          "0([PHONE_1])",
	} {
		m := NewMap(Kinds)
		if got := m.Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}
