package document

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxUnits bounds the pages a document may have for ParsePages and
// PDFPages.
const maxUnits = 1 << 16

// PDFPages splits pdftotext output (each page ended by a form feed, \f)
// into Parts "Page N", numbered from first (the page pdftotext started at,
// its -f; below 1 means 1). Lines lose trailing spaces, runs of empty
// lines become one, invalid UTF-8 becomes U+FFFD, and each page keeps at
// most MaxChars runes (the rest counted in Omitted).
func PDFPages(out string, first int) []Part {
	first = max(first, 1)
	out = strings.ToValidUTF8(out, "\uFFFD")
	pages := strings.Split(out, "\f")
	if n := len(pages); strings.TrimSpace(pages[n-1]) == "" {
		pages = pages[:n-1] // after the last page's form feed
	}
	pages = pages[:min(len(pages), maxUnits)]
	b := budget{left: defaultLimits.docRunes}
	parts := make([]Part, 0, len(pages))
	for i, pg := range pages {
		t := b.part(defaultLimits)
		for l := range strings.SplitSeq(strings.ReplaceAll(pg, "\r\n", "\n"), "\n") {
			t.line(l)
		}
		p := t.finish("Page "+strconv.Itoa(first+i), false)
		p.Number = first + i
		parts = append(parts, p)
		b.done(t)
	}
	return parts
}

// plural is the plural of a unit: "pages", "sheets", "slides".
func plural(unit string) string {
	if unit == "" {
		unit = UnitPage
	}
	return unit + "s"
}

// ParsePages parses a page selection against a document of total pages:
// "3", "1-3", "2-" (to the end), "-3" (from the start), lists like
// "1-3,7"; 1-based and inclusive; "" or "all" selects every page. It
// returns the pages in ascending order, each once. A selection outside
// the document is an error that says how many pages there are.
func ParsePages(spec string, total int) ([]int, error) {
	return parsePages(spec, total, UnitPage)
}

// parsePages is ParsePages for a document of units (errors name them).
func parsePages(spec string, total int, unit string) ([]int, error) {
	units := plural(unit)
	if total < 0 || total > maxUnits {
		return nil, fmt.Errorf("pages: the document has %d %s; read_document reads at most %s", total, units, thousands(maxUnits))
	}
	spec = strings.TrimSpace(spec)
	if spec == "" || strings.EqualFold(spec, "all") {
		all := make([]int, total)
		for i := range all {
			all[i] = i + 1
		}
		return all, nil
	}
	if utf8.RuneCountInString(spec) > 200 {
		return nil, fmt.Errorf("pages: the selection is too long (%d characters); write ranges such as 1-3,7", utf8.RuneCountInString(spec))
	}
	norm := strings.NewReplacer("，", ",", "、", ",", ";", ",", "；", ",", "–", "-", "—", "-", "~", "-", "～", "-", "－", "-", "..", "-").Replace(spec)
	sel := make([]bool, total+1)
	for item := range strings.SplitSeq(norm, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		lo, hi, err := pageRange(item, total)
		if err != nil {
			return nil, err
		}
		if lo < 1 {
			return nil, fmt.Errorf("pages %s: %s are numbered from 1", item, units)
		}
		if hi < lo {
			return nil, fmt.Errorf("pages %s: the range runs backwards; write %d-%d", item, hi, lo)
		}
		if hi > total {
			switch {
			case total == 0:
				return nil, fmt.Errorf("pages %s: the document has no %s", item, units)
			case lo <= total:
				return nil, fmt.Errorf("pages %s: the document has %d %s (ask for %s)", item, total, units, rangeString(lo, total))
			}
			return nil, fmt.Errorf("pages %s: the document has %d %s", item, total, units)
		}
		for i := lo; i <= hi; i++ {
			sel[i] = true
		}
	}
	var out []int
	for i := 1; i <= total; i++ {
		if sel[i] {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("pages %q: no %s selected; write page numbers or ranges such as 3, 1-3, 2- or 1-3,7", spec, units)
	}
	return out, nil
}

// pageRange parses one item of a selection: "3", "1-3", "2-", "-3".
func pageRange(item string, total int) (lo, hi int, err error) {
	bad := fmt.Errorf("pages %q: write page numbers or ranges such as 3, 1-3, 2- or 1-3,7", item)
	num := func(s string) (int, error) {
		s = strings.TrimSpace(s)
		if s == "" || len(s) > 9 {
			return 0, bad
		}
		n, err := strconv.Atoi(s)
		if err != nil || s[0] == '+' || s[0] == '-' {
			return 0, bad
		}
		return n, nil
	}
	a, b, isRange := strings.Cut(item, "-")
	if !isRange {
		n, err := num(a)
		return n, n, err
	}
	switch {
	case strings.TrimSpace(a) == "" && strings.TrimSpace(b) == "":
		return 0, 0, bad
	case strings.TrimSpace(a) == "":
		lo = 1
	default:
		if lo, err = num(a); err != nil {
			return 0, 0, err
		}
	}
	if strings.TrimSpace(b) == "" {
		return lo, max(total, lo), nil
	}
	if hi, err = num(b); err != nil {
		return 0, 0, err
	}
	return lo, hi, nil
}

// rangeString writes lo..hi as "3" or "3-5".
func rangeString(lo, hi int) string {
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return strconv.Itoa(lo) + "-" + strconv.Itoa(hi)
}

// pagesString writes ascending page numbers as a selection: "4-12",
// "1-3,7".
func pagesString(nums []int) string {
	var parts []string
	for i := 0; i < len(nums); {
		j := i
		for j+1 < len(nums) && nums[j+1] == nums[j]+1 {
			j++
		}
		parts = append(parts, rangeString(nums[i], nums[j]))
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// thousands writes n with thousands separators: 41200 -> "41,200".
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Render returns the text of the parts of d that pages selects (see
// ParsePages; "" for all), each under a marker such as "--- Page 3 of 12
// ---", "--- Sheet: Budget (2 of 3) ---" or "--- Slide 2 of 5 ---" (a flat
// document has none), cut at maxChars runes (0 or less: DefaultMaxChars;
// at most MaxChars). When anything is left out, a notice at the end says
// how much and how to read on, e.g. "[truncated: 41,200 more characters;
// ask for pages 4-12 or a larger max_chars]".
func Render(d *Doc, pages string, maxChars int) (string, error) {
	if d == nil {
		return "", errors.New("render: no document")
	}
	if maxChars <= 0 {
		maxChars = DefaultMaxChars
	}
	maxChars = min(maxChars, MaxChars)
	flat := d.Unit == ""
	total := d.Total
	if total <= 0 {
		total = len(d.Parts)
	}
	var chosen []int // indexes into d.Parts
	if flat {
		if strings.TrimSpace(pages) != "" {
			if sel, err := parsePages(pages, 1, UnitPage); err != nil || len(sel) != 1 {
				return "", fmt.Errorf("pages %s: this %s document is one text without pages; leave pages empty (and raise max_chars to read more)", strings.TrimSpace(pages), kindName(d.Kind))
			}
		}
		for i := range d.Parts {
			chosen = append(chosen, i)
		}
	} else if strings.TrimSpace(pages) == "" {
		for i := range d.Parts { // all there is, though a PDF read by range holds only some
			chosen = append(chosen, i)
		}
	} else {
		sel, err := parsePages(pages, total, d.Unit)
		if err != nil {
			return "", err
		}
		byNum := make(map[int]int, len(d.Parts))
		for i, p := range d.Parts {
			byNum[partNumber(p, i)] = i
		}
		var missing []int
		for _, n := range sel {
			if i, ok := byNum[n]; ok {
				chosen = append(chosen, i)
			} else {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			return "", fmt.Errorf("pages %s: not extracted from the document (ask for them again)", pagesString(missing))
		}
	}
	if len(chosen) == 0 {
		return "(the document has no text)", nil
	}

	// Lay out the selection, remembering where each part starts (runes).
	var (
		sb         strings.Builder
		runes      int
		starts     = make([]int, len(chosen))
		ends       = make([]int, len(chosen))
		omitted    int
		unfinished bool
	)
	write := func(s string) {
		sb.WriteString(s)
		runes += utf8.RuneCountInString(s)
	}
	for k, i := range chosen {
		p := d.Parts[i]
		if k > 0 {
			write("\n\n")
		}
		starts[k] = runes
		if !flat {
			write(marker(d.Unit, p, partNumber(p, i), total))
			write("\n")
		}
		text := p.Text
		if strings.TrimSpace(text) == "" {
			text = emptyText(d, p, flat)
		}
		write(text)
		ends[k] = runes
		omitted += p.Omitted
		unfinished = unfinished || p.Unfinished
	}
	out := sb.String()
	if runes <= maxChars && omitted == 0 && !unfinished {
		return out, nil
	}

	// Cut at maxChars, at a line break in the last tenth where there is one.
	shownRunes := runes
	if runes > maxChars {
		end := byteIndex(out, maxChars)
		from := byteIndex(out, maxChars-maxChars/10)
		if j := strings.LastIndexByte(out[from:end], '\n'); j > 0 {
			end = from + j
		}
		out = strings.TrimRight(out[:end], " \t\n")
		shownRunes = utf8.RuneCountInString(out)
	}
	left := runes - shownRunes + omitted

	// What to ask for next: the parts from the first one not shown in
	// full; asking for the first part shown again shows no more of it.
	var options []string
	if runes > maxChars {
		k := len(chosen) - 1
		for k > 0 && starts[k] >= shownRunes {
			k--
		}
		from := k // chosen[k] is the part the cut fell in
		if k == 0 || ends[k] <= shownRunes {
			from = k + 1
		}
		if !flat && from < len(chosen) {
			nums := make([]int, 0, len(chosen)-from)
			for _, i := range chosen[from:] {
				nums = append(nums, partNumber(d.Parts[i], i))
			}
			options = append(options, "pages "+pagesString(nums))
		}
		if maxChars < MaxChars {
			options = append(options, "a larger max_chars (up to "+thousands(MaxChars)+")")
		}
	}
	more := thousands(left) + " more characters"
	if unfinished {
		more = "at least " + more
	}
	var notice string
	switch {
	case len(options) > 0:
		notice = fmt.Sprintf("[truncated: %s; ask for %s]", more, strings.Join(options, " or "))
	case runes > maxChars:
		notice = fmt.Sprintf("[truncated: %s; max_chars is at its limit of %s, so read_document cannot show more of this part]", more, thousands(MaxChars))
	case left == 0:
		notice = "[truncated: reading stopped at a size limit for one file; the rest of the document cannot be shown]"
	default:
		notice = fmt.Sprintf("[truncated: %s were left out when the document was read (over %s characters in one part, or a document too long to read in full)]", more, thousands(MaxChars))
	}
	return out + "\n\n" + notice, nil
}

// partNumber is p's 1-based number in its document (i its index in
// Parts).
func partNumber(p Part, i int) int {
	if p.Number > 0 {
		return p.Number
	}
	return i + 1
}

// marker is the line above a part: "--- Page 3 of 12 ---", "--- Sheet:
// Budget (2 of 3) ---".
func marker(unit string, p Part, n, total int) string {
	label := p.Label
	if label == "" {
		label = strings.ToUpper(unit[:1]) + unit[1:] + " " + strconv.Itoa(n)
	}
	if unit == UnitSheet {
		return fmt.Sprintf("--- %s (%d of %d) ---", label, n, total)
	}
	return fmt.Sprintf("--- %s of %d ---", label, total)
}

// emptyText stands for a part without text.
func emptyText(d *Doc, p Part, flat bool) string {
	switch {
	case p.Omitted > 0 || p.Unfinished:
		return "(not extracted: the document is too long to read in full)"
	case flat:
		return "(the document has no text)"
	case d.Kind == KindPDF:
		return "(no text on this page; it may be a scanned image)"
	}
	return "(no text on this " + d.Unit + ")"
}

// kindName names a kind for a reader: "Word (.docx)".
func kindName(kind string) string {
	switch kind {
	case KindDOCX:
		return "Word (.docx)"
	case KindCSV:
		return "CSV"
	case KindHTML:
		return "HTML"
	case KindMarkdown:
		return "Markdown"
	case KindText:
		return "text"
	}
	return kind
}

// byteIndex returns the byte offset of the rune n of s (len(s) past the
// end).
func byteIndex(s string, n int) int {
	if n <= 0 {
		return 0
	}
	k := 0
	for i := range s {
		if k == n {
			return i
		}
		k++
	}
	return len(s)
}
