package plugin

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseLine: no line a plugin writes makes the parser panic; a line
// it accepts has a type, a message's fields are what it wrote (valid
// UTF-8), Check never panics; the line reader never returns more than its
// limit, whatever the stream.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		`{"type":"message","id":"m1","chat":"c","sender":"alice","display":"A","text":"hi","group":false,"mentioned":false,"thread":""}`,
		`{"type":"sent","id":"s1"}`,
		`{"type":"error","id":"s1","error":"boom"}`,
		`{"type":"typing"}`,
		`{"type":null}`, `{"type":1}`, `[]`, `null`, `"x"`, `{`, `{"type":"sent"}{"type":"sent"}`,
		`{"type":"message","group":"yes"}`, "{\"type\":\"message\",\"text\":\"\xff\xfe\"}",
		`{"type":"message","id":"` + strings.Repeat("i", 300) + `","sender":"a b"}`,
		"\r\n", "  {\"type\":\"sent\",\"id\":\"x\"}  ",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		fr, err := ParseLine(line)
		if err != nil {
			if !errors.Is(err, ErrGarbage) {
				t.Fatalf("error %v does not wrap ErrGarbage", err)
			}
		} else {
			if fr.Type == TypeMessage {
				m := fr.Message
				for _, s := range []string{m.ID, m.Chat, m.Sender, m.Display, m.Text, m.Thread} {
					if !utf8.ValidString(s) {
						t.Fatalf("invalid UTF-8 passed: %q", s)
					}
				}
				if why := m.Check(); why == "" && (m.ID == "" || m.Sender == "" || len(m.ID) > maxID || (m.Group && m.Chat == "")) {
					t.Fatalf("accepted an unusable message: %+v", m)
				}
			}
		}
		// The line reader, on the same bytes as a stream with a small
		// limit: every line within it, or ErrLineTooLong.
		const max = 64
		br := bufio.NewReaderSize(bytes.NewReader(line), 16)
		for {
			l, err := readLine(br, max)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, ErrLineTooLong) {
					t.Fatalf("readLine: %v", err)
				}
				break
			}
			if len(l) > max {
				t.Fatalf("a line of %d bytes over the limit %d", len(l), max)
			}
		}
	})
}

// readLine: lines at the limit pass, one byte over is refused, CRLF and a
// last line without a newline are lines.
func TestReadLineLimit(t *testing.T) {
	in := strings.Repeat("a", 10) + "\n" + strings.Repeat("b", 10) + "\r\n" + "tail"
	br := bufio.NewReaderSize(strings.NewReader(in), 16)
	for _, want := range []string{strings.Repeat("a", 10), strings.Repeat("b", 10), "tail"} {
		got, err := readLine(br, 10)
		if err != nil || string(got) != want {
			t.Fatalf("got %q %v, want %q", got, err, want)
		}
	}
	if _, err := readLine(br, 10); !errors.Is(err, io.EOF) {
		t.Fatalf("at the end: %v", err)
	}
	br = bufio.NewReaderSize(strings.NewReader(strings.Repeat("c", 11)+"\n"), 16)
	if _, err := readLine(br, 10); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("11 bytes: %v", err)
	}
}
