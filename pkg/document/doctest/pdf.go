package doctest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// PDF returns a PDF 1.4 document with one A4 page per string (at least
// one page), each line ("\n" separated) drawn below the last (a page with
// many lines grows taller). The text uses a Type0 font with the
// Identity-H encoding over a CIDFontType2 descendant that names SimSun
// without embedding it; each character's CID is its Unicode code point,
// and a ToUnicode CMap maps them back, so pdftotext -enc UTF-8 extracts
// the text as written, CJK included. Characters outside the Basic
// Multilingual Plane and control characters are drawn as "?", tabs as a
// space.
func PDF(pages []string) []byte {
	if len(pages) == 0 {
		pages = []string{""}
	}
	const (
		catalog = 1
		pagesID = 2
		font    = 3
		cidFont = 4
		desc    = 5
		toUni   = 6
		first   = 7 // then a page and its content stream for each page
		lead    = 18
		size    = 12
		margin  = 72
	)
	var (
		buf     bytes.Buffer
		offsets []int // of objects 1..n
		used    = map[rune]bool{}
	)
	obj := func(id int, body string) {
		for len(offsets) < id {
			offsets = append(offsets, 0)
		}
		offsets[id-1] = buf.Len()
		fmt.Fprintf(&buf, "%d 0 obj\n%s\nendobj\n", id, body)
	}
	stream := func(id int, data string) {
		obj(id, fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(data), data))
	}
	buf.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")

	kids := make([]string, len(pages))
	contents := make([]string, len(pages))
	heights := make([]int, len(pages))
	for i, p := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", first+2*i)
		lines := strings.Split(strings.ReplaceAll(p, "\r\n", "\n"), "\n")
		heights[i] = max(842, 2*margin+lead*len(lines))
		var c strings.Builder
		fmt.Fprintf(&c, "BT\n/F1 %d Tf\n%d %d Td\n", size, margin, heights[i]-margin-size)
		for j, line := range lines {
			if j > 0 {
				fmt.Fprintf(&c, "0 %d Td\n", -lead)
			}
			if line == "" {
				continue
			}
			c.WriteByte('<')
			for _, r := range line {
				switch {
				case r == '\t':
					r = ' '
				case r < 0x20 || r > 0xffff || r >= 0xd800 && r <= 0xdfff || r == 0x7f:
					r = '?'
				}
				used[r] = true
				fmt.Fprintf(&c, "%04X", r)
			}
			c.WriteString("> Tj\n")
		}
		c.WriteString("ET")
		contents[i] = c.String()
	}

	obj(catalog, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", pagesID))
	obj(pagesID, fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)))
	obj(font, fmt.Sprintf("<< /Type /Font /Subtype /Type0 /BaseFont /SimSun /Encoding /Identity-H /DescendantFonts [%d 0 R] /ToUnicode %d 0 R >>", cidFont, toUni))
	obj(cidFont, fmt.Sprintf("<< /Type /Font /Subtype /CIDFontType2 /BaseFont /SimSun /CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> /FontDescriptor %d 0 R /DW 1000 /W [32 126 500] /CIDToGIDMap /Identity >>", desc))
	obj(desc, "<< /Type /FontDescriptor /FontName /SimSun /Flags 6 /FontBBox [-8 -145 1000 859] /ItalicAngle 0 /Ascent 859 /Descent -141 /CapHeight 683 /StemV 80 >>")
	stream(toUni, toUnicode(used))
	for i := range pages {
		page, content := first+2*i, first+2*i+1
		obj(page, fmt.Sprintf("<< /Type /Page /Parent %d 0 R /MediaBox [0 0 595 %d] /Resources << /Font << /F1 %d 0 R >> /ProcSet [/PDF /Text] >> /Contents %d 0 R >>", pagesID, heights[i], font, content))
		stream(content, contents[i])
	}

	xref := buf.Len()
	fmt.Fprintf(&buf, "xref\n0 %d\n0000000000 65535 f \n", len(offsets)+1)
	for _, o := range offsets {
		fmt.Fprintf(&buf, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&buf, "trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(offsets)+1, catalog, xref)
	return buf.Bytes()
}

// toUnicode writes the ToUnicode CMap mapping each used CID (a code
// point) to itself, at most 100 entries a block as the format asks.
func toUnicode(used map[rune]bool) string {
	cids := make([]rune, 0, len(used))
	for r := range used {
		cids = append(cids, r)
	}
	slices.Sort(cids)
	var b strings.Builder
	b.WriteString("/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n")
	b.WriteString("/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n")
	b.WriteString("/CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n")
	b.WriteString("1 begincodespacerange\n<0000> <FFFF>\nendcodespacerange\n")
	for len(cids) > 0 {
		n := min(len(cids), 100)
		fmt.Fprintf(&b, "%d beginbfchar\n", n)
		for _, r := range cids[:n] {
			fmt.Fprintf(&b, "<%04X> <%04X>\n", r, r)
		}
		b.WriteString("endbfchar\n")
		cids = cids[n:]
	}
	b.WriteString("endcmap\nCMapName currentdict /CMap defineresource pop\nend\nend")
	return b.String()
}
