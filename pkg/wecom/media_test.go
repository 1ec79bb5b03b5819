package wecom

import "testing"

func TestDispositionFilename(t *testing.T) {
	tests := []struct{ cd, want string }{
		{``, ``},
		{`attachment; filename="a.jpg"`, `a.jpg`},
		{`attachment; filename="../../etc/passwd"`, `passwd`},
		{`attachment; filename="C:\\x\\y.txt"`, `y.txt`},
		{`attachment; filename*=utf-8''%E6%8A%A5%E5%91%8A.pdf`, `报告.pdf`},
		{`attachment; filename="报告 v2.pdf"`, `报告 v2.pdf`},
		{`attachment; filename=a b.txt; size=3`, `a b.txt`}, // not RFC-valid: fallback
		{`attachment; filename=".."`, ``},
		{`attachment; filename="a` + "\x01\n" + `b.txt"`, `ab.txt`},
		{`attachment`, ``},
	}
	for _, tt := range tests {
		if got := dispositionFilename(tt.cd); got != tt.want {
			t.Errorf("dispositionFilename(%q) = %q, want %q", tt.cd, got, tt.want)
		}
	}
}

func TestQuoteFilename(t *testing.T) {
	if got, want := quoteFilename("a\"b\\c\r\n.txt"), `a\"b\\c.txt`; got != want {
		t.Fatalf("quoteFilename = %q, want %q", got, want)
	}
}
