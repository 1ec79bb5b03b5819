package document

import (
	"errors"
	"strings"
)

// MaxTagAttrs is the most attributes one tag may have. An HTML tokenizer
// keeps a tag's attributes together (about 32 bytes each, grown by
// doubling): a page that is one tag of millions of attributes would cost
// hundreds of MB to read, and no real page comes near this.
const MaxTagAttrs = 4096

// ErrHostileHTML is a page built to exhaust an HTML reader's memory.
var ErrHostileHTML = errors.New("the HTML has a tag with more than 4096 attributes; it is not read")

// Shape bounds what an HTML parser would build from a page.
type Shape struct {
	Depth       int // open tags less closed ones, at the deepest
	Elements    int // tags, end tags included
	Attrs       int // attributes in all tags
	MaxTagAttrs int // attributes of the tag with the most
}

// HTMLShape scans text's bytes (no tokenizer: inside <svg><style> a
// tokenizer skips what a tree builder makes of it): every '<' that opens
// a tag may be an element (an end tag too: a stray </p> becomes a <p>),
// every run of characters in a tag after a space or a quoted value may be
// an attribute, and depth is the open tags less the closed ones (void
// elements and <x/> aside). Every count errs high.
func HTMLShape(text string) Shape {
	var sh Shape
	d := 0
	for i := 0; i < len(text); i++ {
		if text[i] != '<' || i+1 >= len(text) {
			continue
		}
		c := text[i+1]
		closing := c == '/'
		if closing {
			i++
			if i+1 >= len(text) {
				break
			}
			c = text[i+1]
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			continue
		}
		sh.Elements++
		j := i + 1
		for j < len(text) && text[j] != '>' && text[j] != '/' && !isSpaceByte(text[j]) {
			j++
		}
		void := htmlVoid[strings.ToLower(text[i+1:j])]
		selfClosing, space, attrs := false, false, 0
		for ; j < len(text) && text[j] != '>'; j++ {
			switch ch := text[j]; {
			case ch == '"' || ch == '\'':
				if k := strings.IndexByte(text[j+1:], ch); k >= 0 {
					j += k + 1
				} else {
					j = len(text)
				}
				space = true
			case isSpaceByte(ch):
				space = true
			default:
				if space {
					attrs++
					space = false
				}
				selfClosing = ch == '/' && j+1 < len(text) && text[j+1] == '>'
			}
		}
		i = j
		sh.Attrs += attrs
		sh.MaxTagAttrs = max(sh.MaxTagAttrs, attrs)
		switch {
		case closing:
			d = max(0, d-1)
		case !void && !selfClosing:
			d++
			sh.Depth = max(sh.Depth, d)
		}
	}
	return sh
}

func isSpaceByte(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
