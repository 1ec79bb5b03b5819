package skills

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"agent/pkg/clip"
)

// Installation is what Install wrote.
type Installation struct {
	Name     string
	SHA256   string    // hex sha256 of the exact bytes read from r
	Files    []FileSum // every file written, sorted by path
	Replaced bool      // an installed skill of that name was replaced
}

// FileSum is one installed file.
type FileSum struct {
	Path   string // relative to the skill folder, slash-separated
	Size   int64
	SHA256 string
}

// limits bound an archive (a field so tests can shrink them).
type limits struct {
	entries int   // tar entries
	file    int64 // bytes of one file, judged from its header
	total   int64 // bytes of all files
	stream  int64 // bytes read from r, and bytes decompressed
	depth   int   // path components
	pathLen int   // bytes of an entry name
}

func defaultLimits() limits {
	return limits{entries: 1000, file: 16 << 20, total: 64 << 20, stream: 80 << 20, depth: 16, pathLen: 255}
}

const (
	tmpPrefix = ".install-" // extraction folder inside cfg.Installed
	oldPrefix = ".old-"     // a replaced skill, until removed
)

var errTooBig = errors.New("stream over its limit")

// Install unpacks a skill archive (tar, optionally gzip-compressed) into
// cfg.Installed/NAME, replacing an installed skill of that name. The
// archive holds SKILL.md at its root or in its one top folder. A refused
// archive (error wrapping ErrInvalid) leaves nothing behind.
func (s *Set) Install(r io.Reader) (Installation, error) {
	if s.cfg.Installed == "" {
		return Installation{}, errors.New("skills: install: no installed directory configured")
	}
	s.installMu.Lock()
	defer s.installMu.Unlock()
	if err := os.MkdirAll(s.cfg.Installed, 0o755); err != nil {
		return Installation{}, fmt.Errorf("skills: install: %w", err)
	}
	root, err := os.OpenRoot(s.cfg.Installed)
	if err != nil {
		return Installation{}, fmt.Errorf("skills: install: %w", err)
	}
	defer root.Close()
	s.sweep(root)

	tmp := tmpPrefix + rand.Text()
	if err := root.Mkdir(tmp, 0o755); err != nil {
		return Installation{}, fmt.Errorf("skills: install: %w", err)
	}
	defer func() {
		if err := root.RemoveAll(tmp); err != nil {
			s.log.Warn("install leftovers not removed", "dir", filepath.Join(s.cfg.Installed, tmp), "err", err)
		}
	}()
	troot, err := root.OpenRoot(tmp)
	if err != nil {
		return Installation{}, fmt.Errorf("skills: install: %w", err)
	}
	defer troot.Close()

	x := &extractor{lim: s.lim, root: troot, kind: map[string]byte{}, listed: map[string]bool{}}
	sum, err := x.run(r)
	if err != nil {
		return Installation{}, err
	}

	// Layout: SKILL.md at the root, or exactly one top folder holding it.
	top, fallback := ".", ""
	if x.kind["SKILL.md"] != 'f' {
		tops := map[string]bool{}
		for p := range x.kind {
			first, _, _ := strings.Cut(p, "/")
			tops[first] = true
		}
		for t := range tops {
			top = t
		}
		if len(tops) != 1 || x.kind[top] != 'd' || x.kind[top+"/SKILL.md"] != 'f' {
			return Installation{}, invalid("no SKILL.md at the archive root or in its one top folder")
		}
		fallback = top
	}
	sroot, err := troot.OpenRoot(top)
	if err != nil {
		return Installation{}, fmt.Errorf("skills: install: %w", err)
	}
	data, _, err := readSkillFile(sroot, "SKILL.md")
	sroot.Close()
	if err != nil {
		return Installation{}, fmt.Errorf("skills: install: %w", err)
	}
	p := parse(data, fallback)
	switch {
	case p.Name == "" && strings.HasPrefix(p.Err, "invalid name"):
		return Installation{}, invalid("SKILL.md gives no name and the archive has no top folder")
	case p.Err != "":
		return Installation{}, invalid("SKILL.md: " + p.Err)
	}

	inst := Installation{Name: p.Name, SHA256: hex.EncodeToString(sum)}
	for _, f := range x.files {
		if top != "." {
			f.Path = strings.TrimPrefix(f.Path, top+"/")
		}
		inst.Files = append(inst.Files, f)
	}
	slices.SortFunc(inst.Files, func(a, b FileSum) int { return strings.Compare(a.Path, b.Path) })

	src := tmp
	if top != "." {
		src = tmp + "/" + top
	}
	if err := root.Chmod(src, 0o755); err != nil {
		return Installation{}, fmt.Errorf("skills: install: %w", err)
	}
	if inst.Replaced, err = swap(root, src, p.Name); err != nil {
		return Installation{}, fmt.Errorf("skills: install %s: %w", p.Name, err)
	}
	s.log.Info("skill installed", "skill", p.Name, "files", len(inst.Files), "sha256", inst.SHA256, "replaced", inst.Replaced)
	s.mu.Lock()
	s.refresh(true)
	s.mu.Unlock()
	return inst, nil
}

// swap moves src to name in root: an existing name is renamed aside first
// and removed once the new one is in place (put back if that fails).
func swap(root *os.Root, src, name string) (replaced bool, err error) {
	old := ""
	if _, err := root.Lstat(name); err == nil {
		old = oldPrefix + rand.Text()
		if err := root.Rename(name, old); err != nil {
			return false, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if err := root.Rename(src, name); err != nil {
		if old != "" {
			if rerr := root.Rename(old, name); rerr != nil {
				err = errors.Join(err, fmt.Errorf("putting the old copy back: %w", rerr))
			}
		}
		return false, err
	}
	if old != "" {
		if err := root.RemoveAll(old); err != nil {
			return true, fmt.Errorf("removing the old copy: %w", err)
		}
	}
	return old != "", nil
}

// sweep removes what an interrupted Install left in cfg.Installed.
// s.installMu is held.
func (s *Set) sweep(root *os.Root) {
	f, err := root.Open(".")
	if err != nil {
		return
	}
	entries, _ := f.ReadDir(maxDirEntries)
	f.Close()
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, tmpPrefix) || strings.HasPrefix(n, oldPrefix) {
			if err := root.RemoveAll(n); err != nil {
				s.log.Warn("install leftovers not removed", "dir", filepath.Join(s.cfg.Installed, n), "err", err)
			}
		}
	}
}

func invalid(what string) error {
	return fmt.Errorf("skills: install: %s: %w", what, ErrInvalid)
}

// extractor writes the entries of one archive under root.
type extractor struct {
	lim    limits
	root   *os.Root
	src    *srcReader
	n      int             // entries seen
	total  int64           // file bytes, from headers
	actual int64           // file bytes, as read
	kind   map[string]byte // 'f' file, 'd' directory (implicit ones too)
	listed map[string]bool // paths named by an entry
	files  []FileSum
}

// srcReader remembers the caller's reader's own failure (an I/O error is
// not a refusal).
type srcReader struct {
	r   io.Reader
	err error
}

func (s *srcReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

// capReader fails with errTooBig once more than max bytes went through.
type capReader struct {
	r      io.Reader
	n, max int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n > c.max {
		return 0, errTooBig
	}
	if rest := c.max - c.n + 1; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		return n, errTooBig
	}
	return n, err
}

// run reads the whole archive (and whatever follows it, for the hash) and
// writes its entries; it returns the sha256 of the bytes read from r.
func (x *extractor) run(r io.Reader) ([]byte, error) {
	x.src = &srcReader{r: r}
	h := sha256.New()
	raw := &capReader{r: io.TeeReader(x.src, h), max: x.lim.stream}
	br := bufio.NewReaderSize(raw, 64<<10)
	var body io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, x.readErr("not a gzip stream", err)
		}
		defer gz.Close()
		body = &capReader{r: gz, max: x.lim.stream}
	}
	tr := tar.NewReader(body)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, x.readErr("not a valid tar archive", err)
		}
		if err := x.entry(hdr, tr); err != nil {
			return nil, err
		}
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return nil, x.readErr("reading past the archive's end", err)
	}
	return h.Sum(nil), nil
}

// readErr sorts a read failure: the caller's reader, the size cap, or a
// malformed archive.
func (x *extractor) readErr(what string, err error) error {
	switch {
	case x.src.err != nil:
		return fmt.Errorf("skills: install: read archive: %w", x.src.err)
	case errors.Is(err, errTooBig):
		return invalid(fmt.Sprintf("archive larger than %d MiB (read or decompressed)", x.lim.stream>>20))
	}
	return invalid(what + ": " + err.Error())
}

// entry checks and writes one tar entry.
func (x *extractor) entry(hdr *tar.Header, tr *tar.Reader) error {
	if x.n++; x.n > x.lim.entries {
		return invalid(fmt.Sprintf("more than %d entries", x.lim.entries))
	}
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		// PAX global attributes (git archive writes one, holding the
		// commit id): metadata, not a file; nothing to write.
		return nil
	}
	name := hdr.Name
	q := fmt.Sprintf("entry %q", clip.String(strings.ToValidUTF8(name, "?"), 100))
	switch {
	case !utf8.ValidString(name):
		return invalid(q + ": name is not UTF-8")
	case len(name) > x.lim.pathLen:
		return invalid(fmt.Sprintf("%s: path longer than %d bytes", q, x.lim.pathLen))
	case name == "":
		return invalid("entry with an empty name")
	case strings.IndexFunc(name, unicode.IsControl) >= 0 || strings.ContainsRune(name, '\\'):
		return invalid(q + ": control character or backslash in the name")
	case strings.HasPrefix(name, "/") || filepath.IsAbs(name) || filepath.VolumeName(name) != "":
		return invalid(q + ": absolute path")
	case slices.Contains(strings.Split(name, "/"), ".."):
		return invalid(q + `: ".." in the path`)
	}
	clean := path.Clean(name)
	if clean != "." && !filepath.IsLocal(clean) {
		return invalid(q + ": path escapes the skill folder")
	}
	if strings.Count(clean, "/")+1 > x.lim.depth {
		return invalid(fmt.Sprintf("%s: deeper than %d levels", q, x.lim.depth))
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if clean == "." {
			return nil
		}
		return x.dir(clean, q)
	case tar.TypeReg:
		if clean == "." {
			return invalid(q + ": a file without a name")
		}
		if hdr.Size < 0 || hdr.Size > x.lim.file {
			return invalid(fmt.Sprintf("%s: file of %d bytes, over the %d MiB limit", q, hdr.Size, x.lim.file>>20))
		}
		if x.total += hdr.Size; x.total > x.lim.total {
			return invalid(fmt.Sprintf("more than %d MiB of files", x.lim.total>>20))
		}
		return x.file(clean, q, hdr, tr)
	case tar.TypeSymlink:
		return invalid(q + ": symlinks are not allowed")
	case tar.TypeLink:
		return invalid(q + ": hard links are not allowed")
	case tar.TypeChar, tar.TypeBlock:
		return invalid(q + ": devices are not allowed")
	case tar.TypeFifo:
		return invalid(q + ": FIFOs are not allowed")
	}
	return invalid(fmt.Sprintf("%s: entry type %q is not a regular file or directory", q, hdr.Typeflag))
}

// dir makes folder p (and its parents) once.
func (x *extractor) dir(p, q string) error {
	if x.listed[p] {
		return invalid(q + ": duplicate path")
	}
	x.listed[p] = true
	if x.kind[p] == 'f' {
		return invalid(q + ": both a file and a folder")
	}
	return x.mkdirs(p, q)
}

func (x *extractor) mkdirs(p, q string) error {
	if p == "." || x.kind[p] == 'd' {
		return nil
	}
	if x.kind[p] == 'f' {
		return invalid(q + ": a parent folder is a file")
	}
	if err := x.mkdirs(path.Dir(p), q); err != nil {
		return err
	}
	if err := x.root.Mkdir(p, 0o755); err != nil {
		return fmt.Errorf("skills: install: %w", err)
	}
	if err := x.root.Chmod(p, 0o755); err != nil {
		return fmt.Errorf("skills: install: %w", err)
	}
	x.kind[p] = 'd'
	return nil
}

// file writes regular file p from tr, hashing it.
func (x *extractor) file(p, q string, hdr *tar.Header, tr *tar.Reader) error {
	if x.listed[p] {
		return invalid(q + ": duplicate path")
	}
	x.listed[p] = true
	if x.kind[p] == 'd' {
		return invalid(q + ": both a file and a folder")
	}
	if err := x.mkdirs(path.Dir(p), q); err != nil {
		return err
	}
	f, err := x.root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("skills: install: %w", err)
	}
	x.kind[p] = 'f'
	h := sha256.New()
	n, err := x.copy(f, h, tr, hdr.Size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("skills: install: %w", cerr)
	}
	if err != nil {
		return err
	}
	perm := os.FileMode(0o644)
	if hdr.Mode&0o111 != 0 {
		perm = 0o755
	}
	if err := x.root.Chmod(p, perm); err != nil {
		return fmt.Errorf("skills: install: %w", err)
	}
	x.files = append(x.files, FileSum{Path: p, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))})
	return nil
}

// copy moves exactly size bytes from tr to f and h, counting them against
// the total; a short entry is a refusal, a failed write is not.
func (x *extractor) copy(f *os.File, h hash.Hash, tr io.Reader, size int64) (int64, error) {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, rerr := tr.Read(buf)
		if k > 0 {
			n += int64(k)
			if x.actual += int64(k); n > size || x.actual > x.lim.total {
				return n, invalid("file bytes beyond their headers or the total limit")
			}
			h.Write(buf[:k])
			if _, err := f.Write(buf[:k]); err != nil {
				return n, fmt.Errorf("skills: install: %w", err)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return n, x.readErr("reading a file's bytes", rerr)
		}
	}
	if n != size {
		return n, invalid("archive ends inside a file")
	}
	return n, nil
}
