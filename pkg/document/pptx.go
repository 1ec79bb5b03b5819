package document

import (
	"cmp"
	"context"
	"encoding/xml"
	"io"
	"slices"
	"strconv"
	"strings"
)

// extractPPTX reads the slides in the presentation's order, one Part per
// slide: each text paragraph a line, titles as "# " lines, tables as
// Markdown, then the speaker notes under "Notes:". Charts, SmartArt,
// images and slide numbers are not read.
func extractPPTX(ctx context.Context, data []byte, lim limits) (*Doc, error) {
	const what = "a PowerPoint presentation (.pptx)"
	a, pres, rels, err := openPackage(ctx, data, lim, what, "ppt/presentation.xml", "presentation")
	if err != nil {
		return nil, err
	}
	slides, err := pptxSlides(a, pres, rels)
	if err != nil {
		return nil, err
	}
	b := budget{left: lim.docRunes}
	d := &Doc{Kind: KindPPTX, Unit: UnitSlide}
	for i, target := range slides {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t := b.part(lim)
		unfinished := false
		if target == "" || !a.has(target) {
			t.line("(this slide is missing from the file)")
		} else {
			if unfinished, err = pptxText(a, target, t, false); err != nil {
				return nil, err
			}
			if !unfinished {
				if unfinished, err = pptxNotes(a, target, t); err != nil {
					return nil, err
				}
			}
		}
		d.Parts = append(d.Parts, t.finish("Slide "+strconv.Itoa(i+1), unfinished))
		b.done(t)
	}
	return d, nil
}

// pptxSlides returns the slide part names in the order of the
// presentation's slide list (p:sldIdLst), or, where it has none, of the
// slides' file names.
func pptxSlides(a *archive, pres string, rels []rel) ([]string, error) {
	x, err := a.xml(pres, a.lim.smallBytes)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	var out []string
	byID := relsByID(rels)
	inList := 0
	for {
		tok, err := x.next()
		if err == io.EOF || err == errTokens {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "sldIdLst":
				inList++
			case "sldId":
				if inList > 0 && len(out) < a.lim.entries {
					out = append(out, byID[relAttr(t, "id")].target)
				}
			}
		case xml.EndElement:
			if t.Name.Local == "sldIdLst" {
				inList = max(0, inList-1)
			}
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	for _, r := range rels {
		if strings.HasSuffix(r.typ, "/slide") {
			out = append(out, r.target)
		}
	}
	slices.SortFunc(out, func(p, q string) int {
		return cmp.Or(cmp.Compare(trailingNumber(p), trailingNumber(q)), strings.Compare(p, q))
	})
	return out, nil
}

// trailingNumber is the number at the end of a part name's base
// ("slide12.xml" -> 12), or 0.
func trailingNumber(name string) int {
	name = strings.TrimSuffix(name, ".xml")
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	n, _ := strconv.Atoi(name[i:])
	return n
}

// pptxNotes appends the speaker notes of the slide part slide, if it has
// any, under "Notes:".
func pptxNotes(a *archive, slide string, t *textBuf) (bool, error) {
	rels, err := a.relsOf(slide)
	if err != nil {
		return false, err
	}
	notes := relByType(rels, "/notesSlide")
	if notes == "" || !a.has(notes) {
		return false, nil
	}
	n := &textBuf{limit: t.limit}
	unfinished, err := pptxText(a, notes, n, true)
	if err != nil {
		return false, err
	}
	if s := n.text(); s != "" {
		t.line("")
		t.line("Notes:")
		t.line(s)
	}
	t.omitted += n.omitted
	return unfinished, nil
}

// pptxShape is a shape being read.
type pptxShape struct {
	title, skip bool
}

// pptxText writes the text of a slide (or notes) part to t: paragraphs as
// lines, the title placeholder's as "# " lines, tables as Markdown; slide
// number, date, footer and (in notes) slide image placeholders left out.
func pptxText(a *archive, name string, t *textBuf, notes bool) (unfinished bool, err error) {
	x, err := a.xml(name, a.lim.entryBytes)
	if err != nil {
		return false, err
	}
	defer x.Close()
	var (
		shapes    []pptxShape
		paras     []*textBuf
		tables    [][][]string // open tables' rows
		cell      []string     // paragraphs of the open cell
		cellBytes int
		inCell    bool
		inT       int
	)
	shape := func() pptxShape {
		if len(shapes) == 0 {
			return pptxShape{}
		}
		return shapes[len(shapes)-1]
	}
	for {
		tok, err := x.next()
		if err == io.EOF {
			break
		}
		if err == errTokens {
			unfinished = true
			break
		}
		if err != nil {
			return false, err
		}
		switch e := tok.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "Fallback":
				err = x.skip()
			case "sp":
				shapes = append(shapes, shape())
			case "ph":
				if len(shapes) > 0 {
					switch attr(e, "type") {
					case "title", "ctrTitle":
						shapes[len(shapes)-1].title = !notes
					case "sldNum", "dt", "ftr", "hdr", "sldImg":
						shapes[len(shapes)-1].skip = true
					}
				}
			case "p":
				paras = append(paras, &textBuf{limit: a.lim.partRunes})
			case "t":
				inT++
			case "br":
				if len(paras) > 0 {
					paras[len(paras)-1].write("\n")
				}
			case "tbl":
				if len(tables) == 0 {
					t.line("")
				}
				tables = append(tables, nil)
			case "tr":
				if n := len(tables); n > 0 {
					tables[n-1] = append(tables[n-1], nil)
				}
			case "tc":
				cell, inCell, cellBytes = nil, true, 0
			}
		case xml.EndElement:
			switch e.Name.Local {
			case "sp":
				if len(shapes) > 0 {
					shapes = shapes[:len(shapes)-1]
				}
			case "t":
				inT = max(0, inT-1)
			case "p":
				if len(paras) == 0 {
					break
				}
				p := paras[len(paras)-1]
				paras = paras[:len(paras)-1]
				s := strings.TrimSpace(p.text())
				switch {
				case shape().skip || s == "":
				case inCell:
					if cellBytes <= 4*a.lim.cellRunes { // cellText cuts the rest
						cell = append(cell, truncRunes(s, a.lim.cellRunes+1))
						cellBytes += len(s)
					}
				case shape().title:
					t.line("# " + strings.ReplaceAll(s, "\n", " "))
				default:
					t.line(s)
				}
				t.omitted += p.omitted
			case "tc":
				if n := len(tables); n > 0 && inCell {
					rows := tables[n-1]
					if r := len(rows) - 1; r >= 0 && len(rows[r]) < a.lim.cols {
						rows[r] = append(rows[r], cellText(strings.Join(cell, "\n"), a.lim.cellRunes))
					}
				}
				cell, inCell = nil, false
			case "tbl":
				if n := len(tables); n > 0 {
					writeTable(t, tables[n-1])
					tables = tables[:n-1]
				}
			}
		case xml.CharData:
			if inT > 0 && len(paras) > 0 {
				paras[len(paras)-1].write(string(e))
			}
		}
		if err == errTokens {
			unfinished = true
			break
		}
		if err != nil {
			return false, err
		}
	}
	return unfinished, nil
}
