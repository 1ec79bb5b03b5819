package tools

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
)

// Limits bound what the file tools read, write and list. Zero fields take
// the defaults of DefaultLimits.
type Limits struct {
	ReadBytes  int // most bytes read_file returns in one call
	ReadLines  int // most lines read_file returns in one call (default limit)
	WriteBytes int // largest file write_file and edit_file produce
	ListItems  int // most entries list_files returns
}

// DefaultLimits are the limits used for zero fields of Limits.
var DefaultLimits = Limits{ReadBytes: 64 << 10, ReadLines: 2000, WriteBytes: 1 << 20, ListItems: 500}

// Workspace gives the file tools access to one directory tree through an
// os.Root: nothing outside it can be read or written, whether by "../",
// absolute paths or symbolic links (os.Root refuses symlinks that are
// absolute or lead out of the tree).
//
// Paths are relative to the workspace. An absolute path is accepted only
// when it names a location inside the workspace directory (as the model may
// have seen it in a prompt); any other absolute path is refused.
type Workspace struct {
	root   *os.Root
	dirs   []string // absolute spellings of the workspace dir, for absolute paths
	limits Limits
}

// OpenWorkspace opens dir (which must exist) for the file tools.
func OpenWorkspace(dir string, limits Limits) (*Workspace, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("tools: open workspace %s: %w", dir, err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("tools: open workspace %s: %w", dir, err)
	}
	dirs := []string{abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		dirs = append(dirs, real)
	}
	d := DefaultLimits
	if limits.ReadBytes > 0 {
		d.ReadBytes = limits.ReadBytes
	}
	if limits.ReadLines > 0 {
		d.ReadLines = limits.ReadLines
	}
	if limits.WriteBytes > 0 {
		d.WriteBytes = limits.WriteBytes
	}
	if limits.ListItems > 0 {
		d.ListItems = limits.ListItems
	}
	return &Workspace{root: root, dirs: dirs, limits: d}, nil
}

// Close releases the workspace directory.
func (w *Workspace) Close() error { return w.root.Close() }

// FileTools opens dir as a Workspace and returns its tools. Close the
// Workspace when the tools are no longer registered.
func FileTools(dir string) ([]Tool, *Workspace, error) {
	w, err := OpenWorkspace(dir, Limits{})
	if err != nil {
		return nil, nil, err
	}
	return w.Tools(), w, nil
}

// Tools returns read_file, write_file, edit_file and list_files. Their
// Profiles are empty (all channels); set them before registering to
// restrict a tool.
func (w *Workspace) Tools() []Tool {
	return []Tool{
		{
			Name:        "read_file",
			Description: fmt.Sprintf("Read a text file in the workspace. Returns at most %d lines or %d KiB per call; use offset and limit to read further.", w.limits.ReadLines, w.limits.ReadBytes>>10),
			Schema:      SchemaFor[ReadFileArgs](),
			Handler:     w.readFile,
		},
		{
			Name:        "write_file",
			Description: fmt.Sprintf("Create or overwrite a text file in the workspace with content (at most %d KiB). Parent directories are created.", w.limits.WriteBytes>>10),
			Schema:      SchemaFor[WriteFileArgs](),
			Handler:     w.writeFile,
		},
		{
			Name:        "edit_file",
			Description: "Replace one exact occurrence of old_text with new_text in a workspace file. old_text must match exactly once, including whitespace; add surrounding lines to make it unique.",
			Schema:      SchemaFor[EditFileArgs](),
			Handler:     w.editFile,
		},
		{
			Name:        "list_files",
			Description: fmt.Sprintf("List files in a workspace directory (default: the workspace itself). Directories end with /. At most %d entries.", w.limits.ListItems),
			Schema:      SchemaFor[ListFilesArgs](),
			Handler:     w.listFiles,
		},
		{
			Name:        "delete_file",
			Description: "Delete a file, or a folder with everything in it, from the workspace.",
			Schema:      SchemaFor[DeleteFileArgs](),
			Handler:     w.deleteFile,
		},
	}
}

// Handle runs the file tool name (read_file, write_file, edit_file,
// list_files) on this workspace, as its Tool's handler would, without
// building the tool list (pkg/workspace routes each call to a root).
func (w *Workspace) Handle(ctx context.Context, name string, call Call) (string, error) {
	switch name {
	case "read_file":
		return w.readFile(ctx, call)
	case "write_file":
		return w.writeFile(ctx, call)
	case "edit_file":
		return w.editFile(ctx, call)
	case "list_files":
		return w.listFiles(ctx, call)
	case "delete_file":
		return w.deleteFile(ctx, call)
	}
	return "", fmt.Errorf("%w %q", ErrUnknownTool, name)
}

// The file tools' arguments (pkg/workspace offers the same tools with its
// own path descriptions: SchemaWith).
type ReadFileArgs struct {
	Path   string `json:"path" desc:"file path relative to the workspace"`
	Offset int    `json:"offset,omitempty" desc:"first line to read, counting from 1 (default 1)"`
	Limit  int    `json:"limit,omitempty" desc:"number of lines to read (default and maximum: the tool's line limit)"`
}

type WriteFileArgs struct {
	Path    string `json:"path" desc:"file path relative to the workspace"`
	Content string `json:"content" desc:"the complete new content of the file"`
}

type EditFileArgs struct {
	Path    string `json:"path" desc:"file path relative to the workspace"`
	OldText string `json:"old_text" desc:"exact text to replace; must occur exactly once in the file"`
	NewText string `json:"new_text" desc:"replacement text"`
}

type DeleteFileArgs struct {
	Path string `json:"path" desc:"file or folder path relative to the workspace"`
}

type ListFilesArgs struct {
	Path      string `json:"path,omitempty" desc:"directory relative to the workspace (default: the workspace root)"`
	Recursive bool   `json:"recursive,omitempty" desc:"list subdirectories too"`
}

// resolve turns a path from the model into a clean, slash-separated path
// relative to the root, refusing what lexically leaves the workspace. os.Root
// enforces the rest (symlinks).
func (w *Workspace) resolve(p string, allowRoot bool) (string, error) {
	orig := p
	p = strings.TrimSpace(p)
	if p == "" {
		if allowRoot {
			return ".", nil
		}
		return "", errors.New("path is empty; give a file path relative to the workspace")
	}
	if strings.ContainsRune(p, 0) || !utf8.ValidString(p) {
		return "", fmt.Errorf("path %q contains invalid characters", orig)
	}
	if err := CheckName(p); err != nil {
		return "", err
	}
	if filepath.IsAbs(p) {
		p = filepath.Clean(p)
		inside := false
		for _, d := range w.dirs {
			if rel, err := filepath.Rel(d, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				p, inside = rel, true
				break
			}
		}
		if !inside {
			return "", fmt.Errorf("path %q is outside the workspace; absolute paths are only accepted inside the workspace, use a path relative to it", orig)
		}
	}
	p = path.Clean(filepath.ToSlash(p))
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("path %q is outside the workspace; \"..\" may not leave it", orig)
	}
	if p == "." && !allowRoot {
		return "", fmt.Errorf("path %q is the workspace directory, not a file", orig)
	}
	return p, nil
}

// CheckName refuses a path with control characters (newlines, escapes,
// C1 codes) or invisible direction and format marks (U+202E and the like):
// such names hide what a file is from the people who list it.
func CheckName(p string) error {
	for _, r := range p {
		if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) || invisible(r) {
			return fmt.Errorf("path %q contains a control or formatting character (%U); file names may not", p, r)
		}
	}
	return nil
}

// invisible reports letters that render as nothing (Hangul fillers, the
// combining grapheme joiner): a name made of them looks empty or like
// another.
func invisible(r rune) bool {
	switch r {
	case 0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0:
		return true
	}
	return false
}

// fsError maps an error from os.Root to a message for the model.
func fsError(op, p string, err error) error {
	var pe *fs.PathError
	inner := err
	if errors.As(err, &pe) {
		inner = pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		inner = le.Err
	}
	switch {
	case isEscape(err):
		return fmt.Errorf("%s %s: refused: the path leads outside the workspace (through \"..\" or a symbolic link)", op, p)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: no such file or directory in the workspace; use list_files to see what exists", op, p)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s %s: permission denied", op, p)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%s %s: a part of the path is a file, not a directory", op, p)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("%s %s: is a directory", op, p)
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%s %s: refused: too many symbolic links", op, p)
	}
	return fmt.Errorf("%s %s: %v", op, p, inner)
}

// isEscape reports whether err is os.Root's (unexported) error for a path
// that leaves the root.
func isEscape(err error) bool {
	for err != nil {
		if err.Error() == "path escapes from parent" {
			return true
		}
		switch e := err.(type) {
		case *fs.PathError:
			err = e.Err
		case *os.LinkError:
			err = e.Err
		default:
			err = errors.Unwrap(err)
		}
	}
	return false
}

// openRegular opens p for reading and checks it is a regular file.
func (w *Workspace) openRegular(op, p string) (*os.File, os.FileInfo, error) {
	f, err := w.root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fsError(op, p, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fsError(op, p, err)
	}
	if fi.IsDir() {
		f.Close()
		return nil, nil, fmt.Errorf("%s %s: is a directory; use list_files", op, p)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s %s: not a regular file (%s); refused", op, p, fi.Mode().Type())
	}
	return f, fi, nil
}

// Open opens the regular file p for reading, confined to the workspace as
// the file tools are (other tools use it: send_file). Errors are written
// for the model.
func (w *Workspace) Open(p string) (*os.File, os.FileInfo, error) {
	rel, err := w.resolve(p, false)
	if err != nil {
		return nil, nil, err
	}
	return w.openRegular("open", rel)
}

// looksBinary reports whether b (the start of a file) is not text.
func looksBinary(b []byte, truncated bool) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return true
	}
	if truncated {
		// Allow a rune cut at the end of the sample.
		for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.Valid(b); i++ {
			b = b[:len(b)-1]
		}
	}
	return !utf8.Valid(b)
}

func (w *Workspace) readFile(ctx context.Context, call Call) (string, error) {
	a, err := Decode[ReadFileArgs](call.Args)
	if err != nil {
		return "", err
	}
	p, err := w.resolve(a.Path, false)
	if err != nil {
		return "", err
	}
	if a.Offset < 0 || a.Limit < 0 {
		return "", errors.New("offset and limit must not be negative")
	}
	offset := max(a.Offset, 1)
	limit := a.Limit
	if limit == 0 || limit > w.limits.ReadLines {
		limit = w.limits.ReadLines
	}
	f, fi, err := w.openRegular("read_file", p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 32<<10)
	head, _ := br.Peek(8 << 10)
	if looksBinary(head, len(head) == 8<<10) {
		return "", fmt.Errorf("read_file %s: binary file (%d bytes); read_file only reads text", p, fi.Size())
	}
	if fi.Size() == 0 && len(head) == 0 {
		return "(empty file)", nil
	}
	// Skip to the offset without holding skipped lines.
	line := 1
	for line < offset {
		_, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("read_file %s: offset %d is past the end of the file (%d lines)", p, offset, line)
		}
		line++
		if line%4096 == 0 && ctx.Err() != nil {
			return "", ctx.Err()
		}
	}
	var out bytes.Buffer
	lines := 0
	cut := false // stopped by the byte limit inside a line
	eof := false
	for lines < limit {
		chunk, err := br.ReadSlice('\n')
		if room := w.limits.ReadBytes - out.Len(); len(chunk) > room {
			// Cut at a rune boundary.
			c := chunk[:room]
			for len(c) > 0 && !utf8.Valid(c) && len(chunk[:room])-len(c) < utf8.UTFMax {
				c = c[:len(c)-1]
			}
			out.Write(c)
			cut = true
			break
		}
		out.Write(chunk)
		if err == bufio.ErrBufferFull {
			continue
		}
		if len(chunk) > 0 {
			lines++
		}
		if err != nil {
			if err != io.EOF {
				return "", fsError("read_file", p, err)
			}
			eof = true
			break
		}
	}
	if !eof && !cut {
		if _, err := br.Peek(1); err == io.EOF {
			eof = true
		}
	}
	if out.Len() == 0 && eof {
		return "", fmt.Errorf("read_file %s: offset %d is past the end of the file (%d lines)", p, offset, offset-1)
	}
	if eof {
		return out.String(), nil
	}
	if !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
		out.WriteByte('\n')
	}
	last := offset + lines - 1
	switch {
	case cut && lines == 0:
		fmt.Fprintf(&out, "[truncated: line %d is longer than %s and only its start is shown. Call read_file with offset=%d to continue after it]", last+1, size(w.limits.ReadBytes), last+2)
	case cut:
		fmt.Fprintf(&out, "[truncated at %s inside line %d; the file continues. Call read_file with offset=%d to read more]", size(w.limits.ReadBytes), last+1, last+1)
	default:
		fmt.Fprintf(&out, "[truncated: showed lines %d-%d of a longer file (%d bytes). Call read_file with offset=%d to read more]", offset, last, fi.Size(), last+1)
	}
	return out.String(), nil
}

func size(n int) string {
	if n >= 1<<10 && n%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// writeAtomic writes data to p through a temporary file in the same
// directory, synced and renamed over p.
func (w *Workspace) writeAtomic(op, p string, data []byte, perm os.FileMode) error {
	if dir := path.Dir(p); dir != "." {
		if err := w.root.MkdirAll(dir, 0o750); err != nil {
			return fsError(op, dir, err)
		}
	}
	if fi, err := w.root.Lstat(p); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("%s %s: is a directory", op, p)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			// Renaming over a link would replace the link, not its target.
			if _, err := w.root.Stat(p); err != nil {
				return fsError(op, p, err)
			}
			target, _ := w.root.Readlink(p)
			return fmt.Errorf("%s %s: is a symbolic link (to %s); write to the file it points to instead", op, p, target)
		}
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(path.Dir(p), "."+path.Base(p)+".tmp-"+hex.EncodeToString(rnd[:]))
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fsError(op, p, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = w.root.Rename(tmp, p)
	}
	if err != nil {
		_ = w.root.Remove(tmp)
		return fsError(op, p, err)
	}
	return nil
}

func (w *Workspace) writeFile(ctx context.Context, call Call) (string, error) {
	a, err := Decode[WriteFileArgs](call.Args)
	if err != nil {
		return "", err
	}
	p, err := w.resolve(a.Path, false)
	if err != nil {
		return "", err
	}
	if len(a.Content) > w.limits.WriteBytes {
		return "", fmt.Errorf("write_file %s: content is %d bytes, more than the %d byte limit; write a smaller file", p, len(a.Content), w.limits.WriteBytes)
	}
	perm := os.FileMode(0o640)
	if fi, err := w.root.Stat(p); err == nil && fi.Mode().IsRegular() {
		perm = fi.Mode().Perm() &^ 0o007 // never world-accessible, even a file from an older release
	}
	if err := w.writeAtomic("write_file", p, []byte(a.Content), perm); err != nil {
		return "", err
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(a.Content), p), nil
}

func (w *Workspace) editFile(ctx context.Context, call Call) (string, error) {
	a, err := Decode[EditFileArgs](call.Args)
	if err != nil {
		return "", err
	}
	p, err := w.resolve(a.Path, false)
	if err != nil {
		return "", err
	}
	if a.OldText == "" {
		return "", errors.New("edit_file: old_text is empty; give the exact text to replace (use write_file to create a file)")
	}
	f, fi, err := w.openRegular("edit_file", p)
	if err != nil {
		return "", err
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(w.limits.WriteBytes)+1))
	f.Close()
	if err != nil {
		return "", fsError("edit_file", p, err)
	}
	if len(data) > w.limits.WriteBytes {
		return "", fmt.Errorf("edit_file %s: file is larger than the %d byte limit for edits", p, w.limits.WriteBytes)
	}
	if looksBinary(data, false) {
		return "", fmt.Errorf("edit_file %s: binary file; edit_file only edits text", p)
	}
	text := string(data)
	switch n := strings.Count(text, a.OldText); n {
	case 0:
		hint := ""
		if strings.Contains(collapseSpace(text), collapseSpace(a.OldText)) {
			hint = " (it matches when whitespace is ignored: copy the exact indentation and line breaks)"
		}
		return "", fmt.Errorf("edit_file %s: old_text not found%s; read the file with read_file and copy the exact text", p, hint)
	case 1:
	default:
		return "", fmt.Errorf("edit_file %s: old_text matches %d times; include more surrounding lines so it matches exactly once", p, n)
	}
	i := strings.Index(text, a.OldText)
	line := strings.Count(text[:i], "\n") + 1
	out := text[:i] + a.NewText + text[i+len(a.OldText):]
	if len(out) > w.limits.WriteBytes {
		return "", fmt.Errorf("edit_file %s: the result would be %d bytes, more than the %d byte limit", p, len(out), w.limits.WriteBytes)
	}
	if err := w.writeAtomic("edit_file", p, []byte(out), fi.Mode().Perm()&^0o007); err != nil {
		return "", err
	}
	return fmt.Sprintf("edited %s: replaced 1 occurrence at line %d", p, line), nil
}

func collapseSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// deleteFile removes a file, a link (not what it points to) or a folder
// and everything in it. The workspace itself is never removed.
func (w *Workspace) deleteFile(ctx context.Context, call Call) (string, error) {
	a, err := Decode[DeleteFileArgs](call.Args)
	if err != nil {
		return "", err
	}
	p, err := w.resolve(a.Path, false)
	if err != nil {
		return "", err
	}
	fi, err := w.root.Lstat(p)
	if err != nil {
		return "", fmt.Errorf("delete_file %s: %w", p, err)
	}
	if fi.IsDir() {
		if err := w.root.RemoveAll(p); err != nil {
			return "", fmt.Errorf("delete_file %s: %w", p, err)
		}
		return fmt.Sprintf("deleted the folder %s and everything in it", p), nil
	}
	if err := w.root.Remove(p); err != nil {
		return "", fmt.Errorf("delete_file %s: %w", p, err)
	}
	return fmt.Sprintf("deleted %s (%d bytes)", p, fi.Size()), nil
}

func (w *Workspace) listFiles(ctx context.Context, call Call) (string, error) {
	a, err := Decode[ListFilesArgs](call.Args)
	if err != nil {
		return "", err
	}
	p, err := w.resolve(a.Path, true)
	if err != nil {
		return "", err
	}
	fi, err := w.root.Stat(p)
	if err != nil {
		return "", fsError("list_files", p, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("list_files %s: not a directory; use read_file", p)
	}
	max := w.limits.ListItems
	var items []string
	truncated := false
	name := func(rel string, d fs.DirEntry) string {
		if d.IsDir() {
			return rel + "/"
		}
		return rel
	}
	if !a.Recursive {
		f, err := w.root.Open(p)
		if err != nil {
			return "", fsError("list_files", p, err)
		}
		defer f.Close()
		// Read in batches so a huge directory costs bounded memory.
		for {
			ents, err := f.ReadDir(256)
			for _, d := range ents {
				items = append(items, name(d.Name(), d))
			}
			if len(items) > max {
				truncated = true
			}
			if err != nil || truncated {
				break
			}
		}
		slices.Sort(items)
		if len(items) > max {
			items = items[:max]
		}
	} else {
		fsys := w.root.FS()
		err := fs.WalkDir(fsys, p, func(fp string, d fs.DirEntry, err error) error {
			if err != nil {
				if fp == p {
					return err
				}
				return nil // skip unreadable parts
			}
			if fp == p {
				return nil
			}
			if len(items) >= max {
				truncated = true
				return fs.SkipAll
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			rel := fp
			if p != "." {
				rel = strings.TrimPrefix(fp, p+"/")
			}
			items = append(items, name(rel, d))
			return nil
		})
		if err != nil {
			return "", fsError("list_files", p, err)
		}
	}
	var b strings.Builder
	if p != "." {
		fmt.Fprintf(&b, "%s/ (paths below are relative to it):\n", p)
	}
	if len(items) == 0 {
		b.WriteString("(empty directory)")
		return b.String(), nil
	}
	for _, it := range items {
		b.WriteString(it)
		b.WriteByte('\n')
	}
	if truncated {
		fmt.Fprintf(&b, "[truncated at %d entries; list a subdirectory to see more]", max)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
