package redact

import (
	"encoding/base64"
	"strings"
	"testing"
)

// A known value that a command re-encoded in one step (letters between
// its digits, long gaps, hex, base64 at any offset, Chinese numerals) goes
// back to the model as its placeholder, from a tool's result.
func TestResultFindsKnownValuesReencoded(t *testing.T) {
	m := NewMap(Kinds)
	m.Text("我的电话 13800138000, mail bob.smith@example.com, ID 11010519491231002X")
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, enc := range []string{
		"1a3a8a0a0a1a3a8a0a0a0",
		"1_3_8_0_0_1_3_8_0_0_0",
		"1    3    8    0    0    1    3    8    0    0    0",
		"1x3x8x0x0x1x3x8x0x0x0",
		b64("13800138000"),
		"echo " + b64("tel:13800138000") + " | base64 -d",
		b64("x13800138000y"),
		"31 33 38 30 30 31 33 38 30 30 30"[:0] + "3133383030313338303030",
		"3133383030313338303030"[:0] + strings.ToUpper("626f622e736d697468406578616d706c652e636f6d"),
		"一三八零零一三八零零零",
		"1 1 0 1 0 5 1 9 4 9 1 2 3 1 0 0 2 X",
		b64("bob.smith@example.com"),
	} {
		got := m.Result(enc)
		if strings.Contains(got, "13800138") || strings.Contains(got, "一三八零零一") || got == enc {
			t.Errorf("%q came back as %q", enc, got)
		}
		if !strings.Contains(got, "[") {
			t.Errorf("%q: no placeholder in %q", enc, got)
		}
	}
	// Ordinary text with digits here and there is left alone.
	for _, plain := range []string{"room 402, 3 chairs, 8 pens", "一二三四五", "version 1.3.8 build 0013", "SGVsbG8gd29ybGQ="} {
		if got := m.Result(plain); got != plain {
			t.Errorf("%q became %q", plain, got)
		}
	}
}
