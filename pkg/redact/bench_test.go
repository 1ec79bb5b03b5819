package redact

import (
	"strings"
	"testing"
)

// benchText is 1 KB of office chat with a phone number, an e-mail, a card
// number and a plate in it.
func benchText() string {
	s := "Please call Zhang San at 13800138000 about the invoice, or mail zhang.san@example.com. " +
		"The company card " + card + " pays the hotel; the car 京A12345 is parked at gate 3. "
	for len(s) < 1024 {
		s += "The meeting moved to Thursday 15:00 in room 402, bring the Q3 figures and the draft. "
	}
	return s[:1024]
}

// BenchmarkRedact1KB: finding and replacing every kind in 1 KB of text
// and putting the values back (a request's text and its answer's).
func BenchmarkRedact1KB(b *testing.B) {
	text := benchText()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		m := NewMap(Kinds)
		red := m.Text(text)
		if m.Restore(red) != text {
			b.Fatal("round trip")
		}
	}
}

// BenchmarkRedact1KBClean: 1 KB with nothing to redact (the common case).
func BenchmarkRedact1KBClean(b *testing.B) {
	text := strings.Repeat("The meeting moved to Thursday in room 402, bring the figures. ", 20)[:1024]
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		NewMap(Kinds).Text(text)
	}
}

// mixedForms are 20 values as people (and people hiding them) write them:
// plain, grouped by dots, slashes, parentheses, fullwidth, with NBSP or
// zero-width spaces, spaced ID numbers, fullwidth and IDN e-mail.
var mixedForms = []string{
	"13800138000", "138.0013.8000", "(138) 0013 8000", "（０１０）６２３４－５６７８",
	"110105 19491231 002X", "138\u200b0013\u200b8000", "１３８００１３８０００",
	"ｚｈａｎｇ＠ｅｘａｍｐｌｅ．ｃｏｍ", "张三@例子.中国", "user@bücher.de",
	"139/1234/5678", "139\u00a01234\u00a05678", "010-62345678", "+86 139 1234 5678",
	cardSpace, "6222.0212.3456.7890.128", "li@example.com", "京A12345", idNum, "(0755)23456789-12",
}

// chineseText is about 10 KB of Chinese office chat holding mixedForms,
// one value every half kilobyte or so.
func chineseText() string {
	filler := "会议改到周四下午三点，在四楼402会议室，请带上第三季度的报表和合同草稿。"
	var b strings.Builder
	for i := 0; b.Len() < 10<<10; i++ {
		b.WriteString(filler)
		if i%3 == 1 && i/3 < len(mixedForms) {
			b.WriteString("联系方式：" + mixedForms[i/3] + "，谢谢。")
		}
	}
	return b.String()
}

// BenchmarkRedactChinese10KB: 10 KB of Chinese text with 20 values in
// mixed forms, redacted and put back.
func BenchmarkRedactChinese10KB(b *testing.B) {
	text := chineseText()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		m := NewMap(Kinds)
		red := m.Text(text)
		if m.Restore(red) != text {
			b.Fatal("round trip")
		}
	}
}

// BenchmarkRedactResult10KB: the same text as a tool's result in a
// conversation that already has its 20 values (each found again, in any
// form, on top of detection).
func BenchmarkRedactResult10KB(b *testing.B) {
	text := chineseText()
	m := NewMap(Kinds)
	m.Text(text)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		m.Result(text)
	}
}
