// Package document turns office documents into plain text for a model: the
// read_document tool reads Word (.docx), Excel (.xlsx), PowerPoint (.pptx),
// CSV/TSV, HTML, Markdown and plain text through Extract, PDF through
// pdftotext and PDFPages, and shows the result with Render: the pages,
// sheets or slides asked for, each under a marker, cut at a number of
// characters with a notice that says how to read on.
//
//	kind, err := document.Kind(name, data[:min(len(data), 4096)])
//	d, err := document.Extract(ctx, kind, data) // not for "pdf"
//	text, err := document.Render(d, "2-3", 0)
//
// Every file is treated as hostile (a colleague's upload): Extract is pure
// Go (archive/zip, encoding/xml, encoding/csv, golang.org/x/net/html), never
// trusts the sizes an archive declares, bounds what it unpacks, the XML
// nesting and token count, the text it keeps (MaxChars per part, about ten
// times that per document, the rest only counted), checks ctx in its loops,
// and returns an error rather than panicking.
package document

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// Size limits of the input and of Render's output.
const (
	// MaxFileBytes is the largest file callers should hand to Extract (or
	// to pdftotext); Extract refuses larger data.
	MaxFileBytes = 50 << 20
	// DefaultMaxChars is how many characters (runes) Render returns when
	// the caller does not say.
	DefaultMaxChars = 20000
	// MaxChars is the most characters Render returns at once, and the most
	// Extract keeps of any one part (page, sheet, slide or flat text).
	MaxChars = 100000
)

// Document kinds returned by Kind and set in Doc.Kind.
const (
	KindPDF      = "pdf"
	KindDOCX     = "docx"
	KindXLSX     = "xlsx"
	KindCSV      = "csv"
	KindPPTX     = "pptx"
	KindHTML     = "html"
	KindMarkdown = "markdown"
	KindText     = "text"
)

// Units of the parts of a Doc (Doc.Unit).
const (
	UnitPage  = "page"
	UnitSheet = "sheet"
	UnitSlide = "slide"
)

// Supported names the readable types, for error messages.
const Supported = "PDF, Word (.docx), Excel (.xlsx), PowerPoint (.pptx), CSV/TSV, HTML, Markdown and plain text"

// ErrUnsupported is wrapped by Kind when a file is of a type this package
// cannot read.
var ErrUnsupported = errors.New("unsupported file type")

// ErrTooLarge is wrapped by Extract when a file, or a part of an archive
// once unpacked, is over a size limit (a zip bomb, or just too big).
var ErrTooLarge = errors.New("too large")

// Part is one page, sheet or slide (or the whole text of a flat document).
type Part struct {
	// Label names the part: "Page 3", "Sheet: Budget", "Slide 2"; "" for
	// the single part of a flat document.
	Label string
	// Text is the part's text, at most MaxChars runes.
	Text string
	// Number is the part's 1-based position in the whole document; 0 means
	// its index in Doc.Parts plus one. PDFPages sets it from first.
	Number int
	// Omitted counts the runes of this part's text that extraction
	// counted but did not keep in Text (over MaxChars, or over the
	// document's budget).
	Omitted int
	// Unfinished says extraction stopped before the end of this part (a
	// limit on its size or complexity), so more text than Omitted may
	// follow.
	Unfinished bool
}

// Doc is an extracted document.
type Doc struct {
	// Kind is one of the Kind* constants.
	Kind string
	// Parts are the pages, sheets or slides in order, or one flat part.
	Parts []Part
	// Unit is what a part is: UnitPage, UnitSheet, UnitSlide, or "" for a
	// flat document (one part, no pages).
	Unit string
	// Total is the number of units in the whole document when Parts holds
	// only some of them (a PDF read by page range); 0 means len(Parts).
	Total int
}

// extensions maps a lower-case file name extension to its kind.
var extensions = map[string]string{
	".pdf":  KindPDF,
	".docx": KindDOCX, ".docm": KindDOCX, ".dotx": KindDOCX, ".dotm": KindDOCX,
	".xlsx": KindXLSX, ".xlsm": KindXLSX, ".xltx": KindXLSX, ".xltm": KindXLSX,
	".pptx": KindPPTX, ".pptm": KindPPTX, ".potx": KindPPTX, ".ppsx": KindPPTX,
	".csv": KindCSV, ".tsv": KindCSV, ".tab": KindCSV,
	".html": KindHTML, ".htm": KindHTML, ".xhtml": KindHTML, ".shtml": KindHTML,
	".md": KindMarkdown, ".markdown": KindMarkdown, ".mdown": KindMarkdown,
	".txt": KindText, ".text": KindText, ".log": KindText, ".json": KindText,
	".jsonl": KindText, ".ndjson": KindText, ".xml": KindText, ".yaml": KindText,
	".yml": KindText, ".toml": KindText, ".ini": KindText, ".cfg": KindText,
	".conf": KindText, ".rst": KindText, ".tex": KindText, ".srt": KindText,
	".vtt": KindText, ".sql": KindText, ".sh": KindText, ".py": KindText,
	".go": KindText, ".js": KindText, ".ts": KindText, ".java": KindText,
	".c": KindText, ".h": KindText, ".cpp": KindText, ".css": KindText,
	".properties": KindText, ".env": KindText,
}

// refused maps extensions of formats this package cannot read to advice.
var refused = map[string]string{
	".doc":  "an old Word 97-2003 document (.doc); save it as .docx",
	".xls":  "an old Excel 97-2003 workbook (.xls); save it as .xlsx",
	".ppt":  "an old PowerPoint 97-2003 presentation (.ppt); save it as .pptx",
	".rtf":  "a Rich Text file (.rtf); save it as .docx",
	".odt":  "an OpenDocument text (.odt); save it as .docx",
	".ods":  "an OpenDocument spreadsheet (.ods); save it as .xlsx",
	".odp":  "an OpenDocument presentation (.odp); save it as .pptx",
	".wps":  "a WPS document (.wps); save it as .docx",
	".et":   "a WPS spreadsheet (.et); save it as .xlsx",
	".dps":  "a WPS presentation (.dps); save it as .pptx",
	".epub": "an e-book (.epub)",
	".zip":  "a zip archive", ".rar": "a RAR archive", ".7z": "a 7-Zip archive",
	".gz": "a gzip archive", ".tar": "a tar archive",
	".png": "an image", ".jpg": "an image", ".jpeg": "an image", ".gif": "an image",
	".webp": "an image", ".bmp": "an image", ".heic": "an image", ".tif": "an image",
	".tiff": "an image",
	".mp3":  "audio", ".wav": "audio", ".m4a": "audio", ".amr": "audio", ".silk": "audio",
	".mp4": "video", ".mov": "video",
	".exe": "a program", ".dll": "a program", ".so": "a program",
}

// Kind returns the document kind of a file by its name's extension and,
// where the extension is missing or unknown, by sniffing head, the file's
// first bytes (pass at least 4 KiB where there are that many): "%PDF-", a
// zip with word/, xl/ or ppt/ entries, "<html", or text. A type it cannot
// read is an error (wrapping ErrUnsupported) that names the supported
// types.
func Kind(name string, head []byte) (string, error) {
	ext := strings.ToLower(path.Ext(strings.ReplaceAll(name, `\`, "/")))
	if k, ok := extensions[ext]; ok {
		return k, nil
	}
	if why, ok := refused[ext]; ok {
		return "", fmt.Errorf("%w: %q is %s; read_document reads %s", ErrUnsupported, path.Base(name), why, Supported)
	}
	if k := sniff(head); k != "" {
		return k, nil
	}
	what := "its content is not recognized"
	if ext != "" {
		what = fmt.Sprintf("the extension %q is unknown and its content is not recognized", ext)
	}
	if bytes.HasPrefix(head, []byte("PK\x03\x04")) {
		what = "it is a zip archive without Word, Excel or PowerPoint parts"
	}
	return "", fmt.Errorf("%w: %q: %s; read_document reads %s", ErrUnsupported, path.Base(name), what, Supported)
}

// sniff guesses a kind from a file's first bytes; "" when unsure.
func sniff(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte("%PDF-")):
		return KindPDF
	case bytes.HasPrefix(head, []byte("PK\x03\x04")):
		best, at := "", -1
		for _, c := range []struct{ kind, dir string }{{KindDOCX, "word/"}, {KindXLSX, "xl/"}, {KindPPTX, "ppt/"}} {
			if i := bytes.Index(head, []byte(c.dir)); i >= 0 && (at < 0 || i < at) {
				best, at = c.kind, i
			}
		}
		return best
	case bytes.HasPrefix(head, []byte("\xff\xfe")), bytes.HasPrefix(head, []byte("\xfe\xff")):
		return KindText // UTF-16 with a byte order mark
	}
	h := bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	h = bytes.TrimLeft(h, " \t\r\n")
	low := bytes.ToLower(h[:min(len(h), 64)])
	for _, p := range []string{"<!doctype html", "<html", "<head", "<body", "<meta", "<title"} {
		if bytes.HasPrefix(low, []byte(p)) {
			return KindHTML
		}
	}
	if len(head) > 0 && looksText(head) {
		return KindText
	}
	return ""
}

// looksText reports whether b is text: UTF-8 (its last rune may be cut)
// or a legacy encoding, without control bytes other than whitespace and
// escape.
func looksText(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != 0x1b) || c == 0x7f {
			return false
		}
	}
	return true
}

// Extract extracts a document of the given kind (see Kind) from data, the
// whole file (callers cap it at MaxFileBytes). Every kind but "pdf" is
// read here; for a PDF it returns an error telling the caller to run
// pdftotext and use PDFPages.
func Extract(ctx context.Context, kind string, data []byte) (*Doc, error) {
	return extract(ctx, kind, data, defaultLimits)
}

// extract is Extract under lim (tests shrink the limits).
func extract(ctx context.Context, kind string, data []byte, lim limits) (*Doc, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s: the file is %s, %w: the limit is %s", kind, sizeString(int64(len(data))), ErrTooLarge, sizeString(MaxFileBytes))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var (
		d   *Doc
		err error
	)
	switch kind {
	case KindPDF:
		return nil, errors.New("pdf: Extract does not read PDF; run pdftotext -enc UTF-8 and split its output with PDFPages")
	case KindDOCX:
		d, err = extractDOCX(ctx, data, lim)
	case KindXLSX:
		d, err = extractXLSX(ctx, data, lim)
	case KindPPTX:
		d, err = extractPPTX(ctx, data, lim)
	case KindCSV:
		d, err = extractCSV(ctx, data, lim)
	case KindHTML:
		d, err = extractHTML(ctx, data, lim)
	case KindMarkdown, KindText:
		d, err = extractText(kind, data, lim)
	default:
		return nil, fmt.Errorf("%w: kind %q; read_document reads %s", ErrUnsupported, kind, Supported)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	return d, nil
}

// limits bounds the work and memory of one extraction.
type limits struct {
	entries    int   // zip entries
	entryBytes int64 // unpacked bytes of one zip entry
	totalBytes int64 // unpacked bytes of all entries read
	smallBytes int64 // unpacked bytes of a side part (rels, styles, workbook)
	xmlDepth   int   // element nesting
	xmlTokens  int   // XML tokens of one document, all parts together
	partRunes  int   // runes kept of one part
	docRunes   int   // runes kept of all parts together
	rows, cols int   // table rows and columns shown (xlsx, csv)
	cellRunes  int   // runes kept of one table cell
}

// defaultLimits are Extract's limits.
var defaultLimits = limits{
	entries:    10000,
	entryBytes: 64 << 20,
	totalBytes: 200 << 20,
	smallBytes: 16 << 20,
	xmlDepth:   256,
	xmlTokens:  8 << 20,
	partRunes:  MaxChars,
	docRunes:   10 * MaxChars,
	rows:       1000,
	cols:       50,
	cellRunes:  2000,
}

// sizeString writes n bytes for a reader: "812 bytes", "3.2 MiB".
func sizeString(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// budget shares the document's rune budget among its parts.
type budget struct{ left int }

// part returns a text buffer for the next part, holding at most the
// part limit and what is left of the document's budget.
func (b *budget) part(lim limits) *textBuf {
	return &textBuf{limit: max(0, min(lim.partRunes, b.left))}
}

// done charges a finished part's text to the budget.
func (b *budget) done(t *textBuf) { b.left -= t.n }

// textBuf collects text up to limit runes and counts the rest.
type textBuf struct {
	sb      strings.Builder
	n       int // runes in sb
	limit   int
	omitted int
	// blank says the text ends with an empty line (or is empty), so
	// another empty line is not written.
	blank bool
	// started says a line has been written.
	started bool
}

// write appends s, or counts what does not fit.
func (t *textBuf) write(s string) {
	if s == "" {
		return
	}
	room := t.limit - t.n
	if room <= 0 {
		t.omitted += utf8.RuneCountInString(s)
		return
	}
	if len(s) <= room { // bytes >= runes
		t.sb.WriteString(s)
		t.n += utf8.RuneCountInString(s)
		return
	}
	i, k := 0, 0
	for i < len(s) && k < room {
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
		k++
	}
	t.sb.WriteString(s[:i])
	t.n += k
	t.omitted += utf8.RuneCountInString(s[i:])
}

// line writes s as a line. Trailing spaces are dropped, and an empty line
// is written only between two lines with text (never two in a row).
func (t *textBuf) line(s string) {
	s = strings.TrimRight(s, " \t\r\n")
	if s == "" {
		if t.blank || !t.started {
			return
		}
		t.blank = true
		t.write("\n")
		return
	}
	t.blank, t.started = false, true
	t.write(s)
	t.write("\n")
}

// text returns the collected text without trailing whitespace.
func (t *textBuf) text() string { return strings.TrimRight(t.sb.String(), " \t\r\n") }

// finish turns t into a Part labelled label.
func (t *textBuf) finish(label string, unfinished bool) Part {
	return Part{Label: label, Text: t.text(), Omitted: t.omitted, Unfinished: unfinished}
}
