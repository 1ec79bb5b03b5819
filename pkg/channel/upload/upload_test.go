package upload

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

var safe = regexp.MustCompile(`^[A-Za-z0-9_.@-]{1,64}$`)

// Whatever a channel's message id or a sender's file name holds, the
// saved name stays one plain file name in uploads/.
func FuzzFileName(f *testing.F) {
	for _, s := range []string{"", ".", "..", "../../etc/passwd", "msg/1", "a\x00b", "漢字", strings.Repeat("x", 300), ".hidden"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, msgID, fileName string) {
		id := SafeName(msgID)
		if !safe.MatchString(id) || strings.HasPrefix(id, ".") {
			t.Fatalf("SafeName(%q) = %q", msgID, id)
		}
		ext := Ext(File, fileName, "", nil)
		if !regexp.MustCompile(`^\.[a-z0-9]{1,8}$`).MatchString(ext) {
			t.Fatalf("Ext(%q) = %q", fileName, ext)
		}
		name := FileName(Media{Kind: File, MsgID: msgID, Received: time.Unix(0, 0)}, ext)
		if strings.ContainsAny(name, "/\\\x00") || name == "." || name == ".." {
			t.Fatalf("FileName = %q", name)
		}
		if c := Clean(fileName, 128); len(c) > 128+len("…") || strings.ContainsAny(c, "\n\r\x00") {
			t.Fatalf("Clean(%q) = %q", fileName, c)
		}
	})
}

func TestExtSniffsUnnamedFiles(t *testing.T) {
	for _, c := range []struct {
		name string
		data string
		want string
	}{
		{"report.PDF", "", ".pdf"},
		{"", "%PDF-1.7\n", ".pdf"},
		{"", "plain words\n", ".txt"},
		{"x.tar.gz", "", ".gz"},
		{"evil.ph p", "\x00\x01", ".bin"},
	} {
		if got := Ext(File, c.name, "", []byte(c.data)); got != c.want {
			t.Errorf("Ext(%q, %q) = %q, want %q", c.name, c.data, got, c.want)
		}
	}
}
