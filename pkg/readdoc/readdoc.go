// Package readdoc is the read_document tool: the text of a PDF, Word,
// Excel, PowerPoint, CSV, HTML, Markdown or text file in the caller's
// folder (or shared/), with page, sheet or slide markers and a notice when
// it is cut.
//
// Office formats, CSV, HTML and text are parsed in the daemon by
// pkg/document (pure Go, bounded against zip bombs and deep XML). PDFs are
// converted by poppler's pdftotext inside the caller's sandbox: a hostile
// PDF meets poppler there, not in the daemon.
package readdoc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"strconv"
	"strings"
	"time"

	"agent/pkg/document"
	"agent/pkg/sandbox"
	"agent/pkg/tools"
	"agent/pkg/workspace"
)

// Runner runs sandboxed commands (*sandbox.Sandbox).
type Runner interface {
	Run(ctx context.Context, spec sandbox.Spec) (*sandbox.Result, error)
}

// Config of the tool.
type Config struct {
	Spaces *workspace.Spaces
	// Sandbox returns the sandbox for PDFs, or why there is none (the
	// tool is offered without it: every other type still reads).
	Sandbox func(ctx context.Context) (Runner, error)
	Logger  *slog.Logger
}

// Args of read_document.
type Args struct {
	Path     string `json:"path" desc:"file path relative to your folder, or shared/..."`
	Pages    string `json:"pages,omitempty" desc:"pages, sheets or slides to read: \"3\", \"1-3\", \"2-\", \"1-3,7\" (default: from the start)"`
	MaxChars int    `json:"max_chars,omitempty" desc:"most characters to return (default 20000, at most 100000)"`
}

// pdfPagesAtOnce bounds the pages converted when pages is not given.
const pdfPagesAtOnce = 50

// pdfLimits bound a pdftotext run: output up to the text a 50 MB PDF may
// hold, and memory for poppler.
var pdfLimits = sandbox.Limits{Timeout: 60 * time.Second, CPUSeconds: 60, MemoryMB: 1024, OutputKB: 16 << 10}

// Tool returns read_document.
func Tool(cfg Config) tools.Tool {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return tools.Tool{
		Name: "read_document",
		Description: "Read the text of a document in your folder or shared/: " + document.Supported +
			". Pages, sheets and slides are marked (--- Page 3 of 12 ---); tables come as Markdown rows; long documents are cut with a notice saying how to read on (pages, max_chars). Files users send on WeCom are in uploads/.",
		Schema:  tools.SchemaFor[Args](),
		Handler: cfg.read,
	}
}

func (cfg Config) read(ctx context.Context, call tools.Call) (string, error) {
	a, err := tools.Decode[Args](call.Args)
	if err != nil {
		return "", err
	}
	if a.MaxChars < 0 {
		return "", fmt.Errorf("%w: max_chars must be positive", tools.ErrBadArgs)
	}
	if len(a.Pages) > 200 {
		return "", fmt.Errorf("%w: pages is too long", tools.ErrBadArgs)
	}
	f, fi, err := cfg.Spaces.Open(call, a.Path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if fi.Size() > document.MaxFileBytes {
		return "", fmt.Errorf("%s is %d MB; read_document reads files up to %d MB", a.Path, fi.Size()>>20, document.MaxFileBytes>>20)
	}
	head := make([]byte, 4096)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read %s: %w", a.Path, err)
	}
	head = head[:n]
	kind, err := document.Kind(path.Base(a.Path), head)
	if err != nil {
		return "", fmt.Errorf("%s: %w", a.Path, err)
	}
	var doc *document.Doc
	if kind == document.KindPDF {
		f.Close()
		if doc, err = cfg.pdf(ctx, call, a); err != nil {
			return "", err
		}
	} else {
		rest, err := io.ReadAll(io.LimitReader(f, document.MaxFileBytes))
		if err != nil {
			return "", fmt.Errorf("read %s: %w", a.Path, err)
		}
		if doc, err = document.Extract(ctx, kind, append(head, rest...)); err != nil {
			return "", fmt.Errorf("%s: %w", a.Path, err)
		}
	}
	out, err := document.Render(doc, a.Pages, a.MaxChars)
	if err != nil {
		return "", err
	}
	if doc.Kind == document.KindPDF && a.Pages == "" && doc.Total > len(doc.Parts) {
		out += fmt.Sprintf("\n[read pages 1-%d of %d; ask for more with pages, e.g. \"%d-%d\"]", len(doc.Parts), doc.Total, len(doc.Parts)+1, min(doc.Total, 2*len(doc.Parts)))
	}
	cfg.Logger.Info("read_document", "kind", doc.Kind, "bytes", fi.Size(), "parts", len(doc.Parts), "chars", len(out))
	return out, nil
}

// pdf converts the selected pages with pdfinfo and pdftotext in the
// caller's sandbox.
func (cfg Config) pdf(ctx context.Context, call tools.Call, a Args) (*document.Doc, error) {
	var run Runner
	var err error
	if cfg.Sandbox != nil {
		run, err = cfg.Sandbox(ctx)
	} else {
		err = errors.New("no sandbox configured")
	}
	if err != nil || run == nil {
		return nil, fmt.Errorf("reading PDFs needs the sandbox, which is not available on this box (%v); an operator can run agentctl doctor", err)
	}
	// A folder over its quota runs nothing in the sandbox, reading
	// included: the file tools free room first (delete_file).
	v, err := cfg.Spaces.View(call)
	if err != nil {
		return nil, err
	}
	inside, err := cfg.Spaces.Inside(call, a.Path, true)
	if err != nil {
		return nil, err
	}
	spec := v.Spec("pdfinfo", inside)
	spec.Limits = pdfLimits
	res, err := run.Run(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("the sandbox failed: %v", err)
	}
	if res.Limit != sandbox.LimitNone || res.Exit != 0 {
		return nil, fmt.Errorf("%s is not a readable PDF: %s", a.Path, problem(res))
	}
	total := pageCount(string(res.Stdout))
	if total <= 0 {
		return &document.Doc{Kind: document.KindPDF, Unit: document.UnitPage}, nil
	}
	first, last := 1, min(total, pdfPagesAtOnce)
	if strings.TrimSpace(a.Pages) != "" {
		sel, err := document.ParsePages(a.Pages, total)
		if err != nil {
			return nil, err
		}
		first, last = sel[0], sel[len(sel)-1]
	}
	spec = v.Spec("pdftotext", "-f", strconv.Itoa(first), "-l", strconv.Itoa(last), "-enc", "UTF-8", "-eol", "unix", inside, "-")
	spec.Limits = pdfLimits
	res, err = run.Run(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("the sandbox failed: %v", err)
	}
	if !textOK(res) {
		return nil, fmt.Errorf("%s: pdftotext failed: %s", a.Path, problem(res))
	}
	return pdfDoc(total, string(res.Stdout), first, res), nil
}

// textOK reports whether a pdftotext run gave text: it ended well, or
// at the output limit (the text so far counts, its last page unfinished).
func textOK(res *sandbox.Result) bool {
	return res.Limit == sandbox.LimitOutput || res.Limit == sandbox.LimitNone && res.Exit == 0
}

// pdfDoc is the Doc of pdftotext's output from page first on, of a PDF of
// total pages.
func pdfDoc(total int, text string, first int, res *sandbox.Result) *document.Doc {
	doc := &document.Doc{Kind: document.KindPDF, Unit: document.UnitPage, Total: total}
	if total > 0 {
		doc.Parts = document.PDFPages(text, first)
	}
	if res.Limit == sandbox.LimitOutput && len(doc.Parts) > 0 {
		doc.Parts[len(doc.Parts)-1].Unfinished = true
	}
	return doc
}

// pageCount reads "Pages: N" from pdfinfo's output (0 when absent). The
// last such line counts: a title or subject holding a line break could
// print a "Pages:" line of its own before the real one.
func pageCount(info string) int {
	n := 0
	for l := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(l, "Pages:"); ok {
			n, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return n
}

// PDFBytes converts the first pages of a PDF held in memory (a download:
// web_fetch) in a sandbox that sees nothing of any user's folder: the PDF
// goes in on stdin to the run's private /tmp, where pdfinfo and pdftotext
// read it, in one run.
func PDFBytes(ctx context.Context, run Runner, data []byte) (*document.Doc, error) {
	var nonce [12]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, err
	}
	sep := "--- pdfinfo ends " + hex.EncodeToString(nonce[:]) + " ---"
	script := `set -e; cat >/tmp/in.pdf; pdfinfo /tmp/in.pdf; printf '\n%s\n' "$1"; exec pdftotext -l ` +
		strconv.Itoa(pdfPagesAtOnce) + ` -enc UTF-8 -eol unix /tmp/in.pdf -`
	res, err := run.Run(ctx, sandbox.Spec{Argv: []string{"sh", "-c", script, "sh", sep}, Stdin: data, Limits: pdfLimits})
	if err != nil {
		return nil, fmt.Errorf("the sandbox failed: %v", err)
	}
	info, text, ok := strings.Cut(string(res.Stdout), "\n"+sep+"\n")
	if !ok || !textOK(res) {
		return nil, fmt.Errorf("not a readable PDF: %s", problem(res))
	}
	return pdfDoc(pageCount(info), text, 1, res), nil
}

// problem says briefly why a run failed.
func problem(res *sandbox.Result) string {
	if res.Limit != sandbox.LimitNone {
		return fmt.Sprintf("stopped at the %s limit (%s)", res.Limit, res.Detail)
	}
	msg := strings.TrimSpace(string(res.Stderr))
	if i := strings.IndexByte(msg, '\n'); i > 0 {
		msg = msg[:i]
	}
	if len(msg) > 200 {
		msg = msg[:200]
	}
	if msg == "" {
		msg = fmt.Sprintf("exit status %d", res.Exit)
	}
	return msg
}
