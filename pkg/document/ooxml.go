package document

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// errTokens is returned by xmlStream.next when the document's XML token
// budget is spent; extractors keep what they have and mark it unfinished.
var errTokens = errors.New("too many XML tokens")

// archive is an Office package (a zip archive) read under limits. It never
// trusts the sizes the archive declares: what it unpacks is counted.
type archive struct {
	ctx    context.Context
	lim    limits
	files  map[string]*zip.File // by lower-case name (part names ignore case)
	read   int64                // unpacked bytes read so far
	tokens int                  // XML tokens read so far
}

// openPackage opens an Office package and finds its main part (named by
// the package relationships, else fallback, with the root element root)
// and the main part's relationships.
func openPackage(ctx context.Context, data []byte, lim limits, what, fallback, root string) (*archive, string, []rel, error) {
	a, err := openArchive(ctx, data, lim, what)
	if err != nil {
		return nil, "", nil, err
	}
	main, err := a.mainPart(fallback, root, what)
	if err != nil {
		return nil, "", nil, err
	}
	rels, err := a.relsOf(main)
	if err != nil {
		return nil, "", nil, err
	}
	return a, main, rels, nil
}

// openArchive opens data as an Office package; what names the expected
// file type for errors ("a Word document (.docx)").
func openArchive(ctx context.Context, data []byte, lim limits, what string) (*archive, error) {
	if !bytes.HasPrefix(data, []byte("PK")) {
		switch k := sniff(data[:min(len(data), 4096)]); {
		case bytes.HasPrefix(data, []byte("\xd0\xcf\x11\xe0")):
			return nil, fmt.Errorf("not %s: the file is an old Office 97-2003 file or a password-protected one; save it again without a password in the new format", what)
		case k == KindPDF || k == KindHTML:
			return nil, fmt.Errorf("not %s: the file is %s (named wrongly); rename it", what, map[string]string{KindPDF: "a PDF (.pdf)", KindHTML: "a web page (.html)"}[k])
		}
		return nil, fmt.Errorf("not %s: the file is not a zip archive, as such a file is (it may be damaged, or another type named wrongly)", what)
	}
	// Every central directory record starts with this signature, so its
	// count bounds the number of entries before zip.NewReader allocates
	// them; it cannot be lied about.
	if n := bytes.Count(data, []byte("PK\x01\x02")); n > lim.entries {
		return nil, fmt.Errorf("not %s: the archive has more than %s entries, %w for an Office file", what, thousands(lim.entries), ErrTooLarge)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("not %s: the zip archive is damaged (%v)", what, err)
	}
	if len(zr.File) > lim.entries {
		return nil, fmt.Errorf("not %s: the archive has more than %s entries, %w for an Office file", what, thousands(lim.entries), ErrTooLarge)
	}
	a := &archive{ctx: ctx, lim: lim, files: make(map[string]*zip.File, len(zr.File))}
	for _, f := range zr.File {
		k := strings.ToLower(strings.TrimPrefix(f.Name, "/"))
		if _, dup := a.files[k]; !dup {
			a.files[k] = f
		}
	}
	return a, nil
}

// has reports whether the archive holds the part name.
func (a *archive) has(name string) bool {
	_, ok := a.files[strings.ToLower(name)]
	return ok
}

// open opens the part name for reading at most limit unpacked bytes (and
// what is left of the archive's total). A part declared or found larger
// is an error wrapping ErrTooLarge.
func (a *archive) open(name string, limit int64) (io.ReadCloser, error) {
	f, ok := a.files[strings.ToLower(name)]
	if !ok {
		return nil, fmt.Errorf("the part %s is missing", name)
	}
	left := a.lim.totalBytes - a.read
	if f.UncompressedSize64 > uint64(limit) {
		return nil, fmt.Errorf("%s is %w when unpacked (%s; the limit is %s)", name, ErrTooLarge, sizeString(int64(min(f.UncompressedSize64, 1<<62))), sizeString(limit))
	}
	if f.UncompressedSize64 > uint64(max(left, 0)) {
		return nil, fmt.Errorf("the archive is %w when unpacked (more than %s in all)", ErrTooLarge, sizeString(a.lim.totalBytes))
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("%s cannot be unpacked: %v", name, err)
	}
	return &boundedReader{rc: rc, a: a, name: name, limit: limit}, nil
}

// boundedReader counts what it unpacks against the part's and the
// archive's limits.
type boundedReader struct {
	rc    io.ReadCloser
	a     *archive
	name  string
	limit int64
	n     int64
}

func (r *boundedReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.n += int64(n)
	r.a.read += int64(n)
	switch {
	case r.n > r.limit:
		return 0, fmt.Errorf("%s is %w when unpacked (more than %s)", r.name, ErrTooLarge, sizeString(r.limit))
	case r.a.read > r.a.lim.totalBytes:
		return 0, fmt.Errorf("the archive is %w when unpacked (more than %s in all)", ErrTooLarge, sizeString(r.a.lim.totalBytes))
	}
	if err != nil && err != io.EOF {
		err = fmt.Errorf("cannot be unpacked, the archive is damaged (%v)", err)
	}
	return n, err
}

func (r *boundedReader) Close() error { return r.rc.Close() }

// xmlStream reads the tokens of one XML part, bounding nesting depth and
// the archive's token count, and checking ctx.
type xmlStream struct {
	d     *xml.Decoder
	rc    io.ReadCloser
	a     *archive
	name  string
	depth int
}

// xml opens the part name as an XML token stream of at most limit
// unpacked bytes. Close it.
func (a *archive) xml(name string, limit int64) (*xmlStream, error) {
	rc, err := a.open(name, limit)
	if err != nil {
		return nil, err
	}
	d := xml.NewDecoder(rc)
	d.CharsetReader = func(label string, _ io.Reader) (io.Reader, error) {
		return nil, fmt.Errorf("the encoding %q is not supported (Office writes UTF-8)", label)
	}
	return &xmlStream{d: d, rc: rc, a: a, name: name}, nil
}

// Close releases the part.
func (x *xmlStream) Close() error { return x.rc.Close() }

// next returns the next token: a StartElement, EndElement or CharData
// (copied); comments, directives and processing instructions are skipped.
// At the end of the part it returns io.EOF; when the token budget is
// spent, errTokens.
func (x *xmlStream) next() (xml.Token, error) {
	for {
		if x.a.tokens >= x.a.lim.xmlTokens {
			return nil, errTokens
		}
		x.a.tokens++
		if x.a.tokens%4096 == 0 {
			if err := x.a.ctx.Err(); err != nil {
				return nil, err
			}
		}
		tok, err := x.d.Token()
		if err != nil {
			if err == io.EOF {
				if x.depth != 0 {
					return nil, fmt.Errorf("%s is not well-formed XML: it ends inside an element", x.name)
				}
				return nil, io.EOF
			}
			if errors.Is(err, ErrTooLarge) {
				return nil, err
			}
			var se *xml.SyntaxError
			if errors.As(err, &se) {
				return nil, fmt.Errorf("%s is not well-formed XML (line %d: %s)", x.name, se.Line, se.Msg)
			}
			return nil, fmt.Errorf("%s: %v", x.name, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			x.depth++
			if x.depth > x.a.lim.xmlDepth {
				return nil, fmt.Errorf("%s nests elements more than %d deep; refusing it", x.name, x.a.lim.xmlDepth)
			}
			return t, nil
		case xml.EndElement:
			x.depth--
			return t, nil
		case xml.CharData:
			return t.Copy(), nil
		}
	}
}

// skip reads past the end of the element whose start was just returned.
func (x *xmlStream) skip() error {
	for d := 1; d > 0; {
		tok, err := x.next()
		if err != nil {
			return err
		}
		switch tok.(type) {
		case xml.StartElement:
			d++
		case xml.EndElement:
			d--
		}
	}
	return nil
}

// attr returns the value of the attribute with the local name local ("",
// when missing), ignoring its namespace.
func attr(e xml.StartElement, local string) string {
	for _, a := range e.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// relAttr returns the value of the relationship id attribute r:id (or
// r:embed ...) named local: an attribute of that local name in a
// relationships namespace.
func relAttr(e xml.StartElement, local string) string {
	for _, a := range e.Attr {
		if a.Name.Local == local && strings.Contains(a.Name.Space, "relationships") {
			return a.Value
		}
	}
	return ""
}

// rel is one relationship of a part.
type rel struct {
	id, typ, target string // target resolved to a part name
}

// relsOf reads the relationships of the part name (name's folder
// /_rels/base.rels); a missing rels part is no relationships.
func (a *archive) relsOf(name string) ([]rel, error) {
	dir, base := path.Split(name)
	relsName := dir + "_rels/" + base + ".rels"
	if !a.has(relsName) {
		return nil, nil
	}
	x, err := a.xml(relsName, a.lim.smallBytes)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	var out []rel
	for {
		tok, err := x.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		e, ok := tok.(xml.StartElement)
		if !ok || e.Name.Local != "Relationship" || attr(e, "TargetMode") == "External" {
			continue
		}
		if t := resolve(dir, attr(e, "Target")); t != "" {
			out = append(out, rel{id: attr(e, "Id"), typ: attr(e, "Type"), target: t})
		}
	}
}

// resolve turns a relationship target into a part name: relative to dir,
// or absolute from the package root ("..", as in any path, stops at the
// root: the result names a part of this package or nothing).
func resolve(dir, target string) string {
	if target == "" {
		return ""
	}
	var p string
	if strings.HasPrefix(target, "/") {
		p = path.Clean(target)
	} else {
		p = path.Clean("/" + dir + target)
	}
	p = strings.TrimPrefix(p, "/")
	if p == "" || p == "." || strings.HasPrefix(p, "../") {
		return ""
	}
	return p
}

// relByType returns the target of the first relationship whose type ends
// with suffix ("/officeDocument"), or "".
func relByType(rels []rel, suffix string) string {
	for _, r := range rels {
		if strings.HasSuffix(r.typ, suffix) {
			return r.target
		}
	}
	return ""
}

// relsByID indexes relationships by id (the first of each), so that a
// long list of sheets or slides is not matched against a long rels part
// one by one.
func relsByID(rels []rel) map[string]rel {
	m := make(map[string]rel, len(rels))
	for _, r := range rels {
		if _, dup := m[r.id]; !dup {
			m[r.id] = r
		}
	}
	return m
}

// mainPart returns the package's main part: the officeDocument
// relationship of _rels/.rels, else fallback; its root element must be
// root ("document", "workbook", "presentation"), so that a Word file
// named .xlsx says so. what names the expected file type for errors.
func (a *archive) mainPart(fallback, root, what string) (string, error) {
	rels, err := a.relsOf("")
	if err != nil {
		return "", err
	}
	name := fallback
	if t := relByType(rels, "/officeDocument"); t != "" && a.has(t) {
		name = t
	}
	if !a.has(name) {
		return "", fmt.Errorf("not %s: the archive has no %s", what, fallback)
	}
	x, err := a.xml(name, a.lim.entryBytes)
	if err != nil {
		return "", err
	}
	defer x.Close()
	for {
		tok, err := x.next()
		if err != nil {
			if err == io.EOF {
				return "", fmt.Errorf("not %s: %s is empty", what, name)
			}
			return "", err
		}
		if e, ok := tok.(xml.StartElement); ok {
			if e.Name.Local == root {
				return name, nil
			}
			if k, ok := roots[e.Name.Local]; ok {
				return "", fmt.Errorf("not %s: the file is %s", what, k)
			}
			return "", fmt.Errorf("not %s: %s holds <%s>, not <%s>", what, name, e.Name.Local, root)
		}
	}
}

// roots names the file type of each Office main part's root element.
var roots = map[string]string{
	"document":     "a Word document (.docx)",
	"workbook":     "an Excel workbook (.xlsx)",
	"presentation": "a PowerPoint presentation (.pptx)",
}
