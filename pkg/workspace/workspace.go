// Package workspace gives every user scope its own files: the file tools
// (read_file, write_file, edit_file, list_files), the send_* tools and
// uploads see a private folder per user ("wecom:zhangsan") or group chat
// ("group:wecom:CHAT"), beside an area everyone reads and only owners write.
//
// On disk, under agent.workspace:
//
//	SOUL.md AGENT.md USER.md   the assistant's prompt (owners write)
//	skills/                    skills, in the prompt's index (owners write)
//	shared/                    the office's shared files (owners write)
//	files/<scope>/             one private folder per user scope (0700)
//
// What a user sees: paths are relative to their own folder; "shared/...",
// "skills/..." and the three prompt files name the common areas. Nothing
// reaches another scope's folder: the private folder is an os.Root, so
// "..", absolute paths and symbolic links cannot leave it, and the common
// areas are roots of their own. Every change to a common area is logged
// with who made it. A per-user quota bounds the private folder.
package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"agent/pkg/clip"
	"agent/pkg/diskuse"
	"agent/pkg/sandbox"
	"agent/pkg/session"
	"agent/pkg/tools"
)

// Layout names under the workspace directory.
const (
	FilesDir  = "files"  // files/<scope>/: private folders
	SharedDir = "shared" // everyone reads, owners write
	SkillsDir = "skills" // skills/<name>/SKILL.md
	// UploadsDir is where a user's received media go inside their folder.
	UploadsDir = "uploads"
	layoutFile = ".layout"
	layoutV2   = "2"
)

// PromptFiles are the prompt files at the top of the workspace.
var PromptFiles = []string{"SOUL.md", "AGENT.md", "USER.md"}

// ErrReadOnly is wrapped when a caller who is not an owner writes to a
// common area.
var ErrReadOnly = errors.New("read-only for you")

// ErrQuota is wrapped when a write would take a user's folder over the quota.
var ErrQuota = errors.New("workspace quota exceeded")

// Config of the Spaces.
type Config struct {
	Dir string // agent.workspace; created when missing
	// Quota returns the bound of each private folder in bytes (it follows
	// reloads); nil or 0: no limit.
	Quota func() int64
	// Reserve returns the free disk, in bytes, no write or upload may
	// take (agent.disk_reserve_mb; it follows reloads); nil or 0: none.
	Reserve func() int64
	// MarkerDir holds the record that the layout was migrated (the state
	// dir: out of the users' reach; a marker in the workspace could have
	// been planted by a user before the upgrade). "": the workspace.
	MarkerDir string
	Limits    tools.Limits
	// IsOwner says whether the caller of a tool may change the common
	// areas (agent.owners, the operator on the admin channel). nil: nobody.
	IsOwner func(call tools.Call) bool
	// SkillAllowed says whether call may read skills/FOLDER (a skill
	// limited to some users); nil: everyone.
	SkillAllowed func(call tools.Call, folder string) bool
	Logger       *slog.Logger
}

// Spaces serves the file tools over the per-user layout. Safe for
// concurrent use.
type Spaces struct {
	cfg    Config
	dir    string // absolute
	logger *slog.Logger

	mu    sync.Mutex
	locks map[string]*sync.Mutex // per private folder: quota check + write
}

// Open prepares the layout under cfg.Dir (migrating a workspace of the
// earlier, shared layout on first start: see Migrate) and returns the
// Spaces.
func Open(cfg Config) (*Spaces, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.IsOwner == nil {
		cfg.IsOwner = func(tools.Call) bool { return false }
	}
	abs, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if cfg.Reserve == nil {
		cfg.Reserve = func() int64 { return 0 }
	}
	if cfg.Quota == nil {
		cfg.Quota = func() int64 { return 0 }
	}
	if err := Migrate(abs, cfg.MarkerDir, cfg.Logger); err != nil {
		return nil, err
	}
	return &Spaces{cfg: cfg, dir: abs, logger: cfg.Logger, locks: map[string]*sync.Mutex{}}, nil
}

// Dir is the workspace directory (absolute).
func (s *Spaces) Dir() string { return s.dir }

// ScopeDir maps a user scope to its folder name under files/: bytes other
// than [A-Za-z0-9_.@-] are %XX-escaped (so "wecom:zhangsan" is
// "wecom%3Azhangsan"), a leading dot is escaped, and very long scopes are
// shortened with a hash, so every scope has its own folder and none can
// name "..", a path separator or another scope's folder.
func ScopeDir(scope string) string {
	if scope == "" {
		return "%" // no scope escapes to a lone %
	}
	var b strings.Builder
	for i := 0; i < len(scope); i++ {
		c := scope[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '@':
			b.WriteByte(c)
		case c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	name := b.String()
	if len(name) > 200 {
		sum := sha256.Sum256([]byte(scope))
		head := name[:150]
		if i := strings.LastIndexByte(head, '%'); i >= len(head)-2 {
			head = head[:i] // keep a %XX escape whole
		}
		name = head + "~" + hex.EncodeToString(sum[:8])
	}
	return name
}

// Scope is the user scope of a tool call: the memory scope of its
// conversation (the user in a direct chat, the group in a group chat).
func Scope(call tools.Call) (string, error) {
	if call.Session != "" {
		if scope, err := session.Key(call.Session).MemoryScope(); err == nil {
			return scope, nil
		}
	}
	if call.Channel == "" || call.User == "" {
		return "", errors.New("the file tools need a known user; this call has none")
	}
	return call.Channel + ":" + call.User, nil
}

// UserDir returns the absolute private folder of scope, creating it (0700).
func (s *Spaces) UserDir(scope string) (string, error) {
	if scope == "" {
		return "", errors.New("workspace: empty scope")
	}
	dir := filepath.Join(s.dir, FilesDir, ScopeDir(scope))
	if err := os.MkdirAll(filepath.Join(s.dir, FilesDir), 0o750); err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("workspace: %w", err)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("workspace: %s is not a directory", dir)
	}
	return dir, nil
}

// Path bounds: deeper or longer paths are refused (they also defeat tools
// that walk a tree by full path).
const (
	MaxPath  = 1024
	MaxDepth = 32
)

// area is where a path of a call lands.
type area int

const (
	areaPrivate area = iota
	areaPrompt       // SOUL.md, AGENT.md, USER.md at the top
	areaSkills
	areaShared
)

func (a area) String() string {
	switch a {
	case areaPrompt:
		return "the assistant's prompt"
	case areaSkills:
		return "skills/"
	case areaShared:
		return "shared/"
	}
	return "your folder"
}

// routeFor is route for call: a skill's folder the operator limited to
// some users ([skills.entries.NAME] users) is not theirs to read.
func (s *Spaces) routeFor(call tools.Call, p string) (area, string, error) {
	a, rel, err := s.route(p)
	if err == nil && a == areaSkills && rel != "" && s.cfg.SkillAllowed != nil {
		folder, _, _ := strings.Cut(rel, "/")
		if !s.cfg.SkillAllowed(call, folder) {
			return 0, "", fmt.Errorf("skills/%s is not available to you (the operator limited that skill to some users)", folder)
		}
	}
	return a, rel, err
}

// route cleans p and splits it into the area and the path inside it.
// Absolute paths inside the workspace directory are taken relative to it.
func (s *Spaces) route(p string) (area, string, error) {
	orig := p
	p = strings.TrimSpace(p)
	if err := tools.CheckName(p); err != nil {
		return 0, "", err
	}
	if filepath.IsAbs(p) {
		rel, err := filepath.Rel(s.dir, filepath.Clean(p))
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return 0, "", fmt.Errorf("path %q is outside the workspace; use a path relative to your folder", orig)
		}
		p = rel
	}
	if p == "" {
		return areaPrivate, "", nil
	}
	p = path.Clean(filepath.ToSlash(p))
	if p == ".." || strings.HasPrefix(p, "../") {
		return 0, "", fmt.Errorf("path %q is outside the workspace; \"..\" may not leave it", orig)
	}
	if len(p) > MaxPath || strings.Count(p, "/") >= MaxDepth {
		return 0, "", fmt.Errorf("path %q is too long: at most %d bytes and %d levels of folders", clip.String(orig, 80), MaxPath, MaxDepth)
	}
	first, rest, _ := strings.Cut(p, "/")
	switch {
	case rest == "" && slices.Contains(PromptFiles, first):
		return areaPrompt, p, nil
	case first == SkillsDir:
		return areaSkills, rest, nil
	case first == SharedDir:
		return areaShared, rest, nil
	}
	return areaPrivate, p, nil
}

// open opens the root of area for call.
func (s *Spaces) open(call tools.Call, a area) (*tools.Workspace, string, error) {
	var dir string
	switch a {
	case areaPrompt:
		dir = s.dir
	case areaSkills, areaShared:
		name := SkillsDir
		if a == areaShared {
			name = SharedDir
		}
		dir = filepath.Join(s.dir, name)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, "", fmt.Errorf("workspace: %w", err)
		}
	default:
		scope, err := Scope(call)
		if err != nil {
			return nil, "", err
		}
		if dir, err = s.UserDir(scope); err != nil {
			return nil, "", err
		}
	}
	w, err := tools.OpenWorkspace(dir, s.cfg.Limits)
	return w, dir, err
}

// Open opens the regular file p for reading as call sees it (send_file and
// the like): the caller's folder or a common area, never another scope's.
func (s *Spaces) Open(call tools.Call, p string) (*os.File, os.FileInfo, error) {
	a, rel, err := s.routeFor(call, p)
	if err != nil {
		return nil, nil, err
	}
	if a == areaPrompt {
		rel = path.Base(rel)
	}
	w, _, err := s.open(call, a)
	if err != nil {
		return nil, nil, err
	}
	defer w.Close() // an open file outlives its root
	return w.Open(rel)
}

// lock returns the mutex of a private folder.
func (s *Spaces) lock(dir string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.locks[dir]
	if !ok {
		m = &sync.Mutex{}
		s.locks[dir] = m
	}
	return m
}

// Usage is the bytes of regular files in scope's folder.
func (s *Spaces) Usage(scope string) (int64, error) {
	dir, err := s.UserDir(scope)
	if err != nil {
		return 0, err
	}
	return usage(dir)
}

// entryCost is the least a directory, or any file, counts against the
// quota (a block): folders and empty files cost disk and inodes too.
const entryCost = diskuse.MinEntry

// usage is what dir's tree counts against the quota: the disk each entry
// holds (allocated blocks, at least entryCost; pkg/diskuse), so that a
// sparse file costs what it holds and a preallocated one what it
// reserved. It walks through an os.Root (relative lookups), so a tree
// deeper than PATH_MAX is measured too, and any entry it cannot read is an
// error, never skipped.
func usage(dir string) (int64, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	var n int64
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n += diskuse.Of(fi)
		return nil
	})
	return n, err
}

// ErrDiskFull is wrapped when a write would take the last of the box's
// free disk (agent.disk_reserve_mb).
var ErrDiskFull = errors.New("the box's disk is nearly full")

// checkReserve refuses writing delta bytes into dir when that would leave
// less free disk than the reserve.
func (s *Spaces) checkReserve(dir string, delta int64) error {
	reserve := s.cfg.Reserve()
	if reserve <= 0 {
		return nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fmt.Errorf("workspace: measuring the free disk failed, nothing written: %w", err)
	}
	free := int64(st.Bavail) * st.Bsize
	if free-max(delta, 0) < reserve {
		return fmt.Errorf("%w: %s free, and %s are kept for the box itself (agent.disk_reserve_mb); nothing was written: delete files you no longer need, or ask an owner to free disk",
			ErrDiskFull, mib(max(free, 0)), mib(reserve))
	}
	return nil
}

// checkQuota refuses growing dir by delta bytes past the quota or into
// the disk's reserve.
func (s *Spaces) checkQuota(dir string, delta int64) error {
	if delta > 0 {
		if err := s.checkReserve(dir, delta); err != nil {
			return err
		}
	}
	quota := s.cfg.Quota()
	if quota <= 0 || delta <= 0 {
		return nil
	}
	used, err := usage(dir)
	if err != nil {
		return fmt.Errorf("workspace: measuring your folder failed, nothing written: %w", err)
	}
	if used+delta > quota {
		return fmt.Errorf("%w: your folder holds %s of its %s limit and this needs %s more; delete or shorten files first (write_file with empty content), or ask an owner to raise agent.workspace_quota_mb",
			ErrQuota, mib(used), mib(quota), mib(delta))
	}
	return nil
}

func mib(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// SaveUpload stores data a user sent (a picture, a voice message, a file)
// as uploads/<name> in scope's folder, within the quota, and returns the
// path the user's tools know it by.
func (s *Spaces) SaveUpload(scope, name string, data []byte) (string, error) {
	if name == "" || len(name) > 255 || strings.ContainsAny(name, `/\`) || name == "." || name == ".." || tools.CheckName(name) != nil {
		return "", fmt.Errorf("workspace: bad upload name %q", name)
	}
	dir, err := s.UserDir(scope)
	if err != nil {
		return "", err
	}
	l := s.lock(dir)
	l.Lock()
	defer l.Unlock()
	if err := s.checkQuota(dir, int64(len(data))+entryCost); err != nil {
		return "", err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	defer root.Close()
	if err := root.MkdirAll(UploadsDir, 0o700); err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	rel := UploadsDir + "/" + name
	if err := root.WriteFile(rel, data, 0o600); err != nil {
		return "", fmt.Errorf("workspace: save %s: %w", rel, err)
	}
	return rel, nil
}

// Tools returns read_file, write_file, edit_file and list_files over the
// per-user layout.
func (s *Spaces) Tools() []tools.Tool {
	lim := tools.DefaultLimits
	if s.cfg.Limits.ReadBytes > 0 {
		lim.ReadBytes = s.cfg.Limits.ReadBytes
	}
	if s.cfg.Limits.WriteBytes > 0 {
		lim.WriteBytes = s.cfg.Limits.WriteBytes
	}
	// The arguments are pkg/tools' own, with paths described per user.
	readDesc := map[string]string{"path": "file path relative to your folder, or shared/..., skills/..., SOUL.md"}
	writeDesc := map[string]string{"path": "file path relative to your folder, or shared/..., skills/... (owners only)"}
	listDesc := map[string]string{"path": "directory relative to your folder (default: your folder), or shared, skills"}
	layout := " Paths are relative to your own folder; shared/ holds the office's shared files, skills/ the skills, and SOUL.md, AGENT.md, USER.md the assistant's instructions (only the assistant's owners change those)."
	return []tools.Tool{
		{
			Name:        "read_file",
			Description: fmt.Sprintf("Read a text file. Returns at most %d KiB per call; use offset and limit to read further.", lim.ReadBytes>>10) + layout,
			Schema:      tools.SchemaWith[tools.ReadFileArgs](readDesc),
			Handler:     s.handler("read_file", false),
			ReadOnly:    true,
		},
		{
			Name:        "write_file",
			Description: fmt.Sprintf("Create or overwrite a text file with content (at most %d KiB). Parent directories are created.", lim.WriteBytes>>10) + layout,
			Schema:      tools.SchemaWith[tools.WriteFileArgs](writeDesc),
			Handler:     s.handler("write_file", true),
		},
		{
			Name:        "edit_file",
			Description: "Replace one exact occurrence of old_text with new_text in a file. old_text must match exactly once, including whitespace; add surrounding lines to make it unique." + layout,
			Schema:      tools.SchemaWith[tools.EditFileArgs](writeDesc),
			Handler:     s.handler("edit_file", true),
		},
		{
			Name:        "list_files",
			Description: "List files in a directory (default: your folder). Directories end with /." + layout,
			Schema:      tools.SchemaWith[tools.ListFilesArgs](listDesc),
			Handler:     s.list,
			ReadOnly:    true,
		},
		{
			Name:        "delete_file",
			Description: "Delete a file, or a folder with everything in it; frees room in your folder when it is full." + layout,
			Schema:      tools.SchemaWith[tools.DeleteFileArgs](map[string]string{"path": "file or folder path relative to your folder, or shared/..., skills/... (owners only)"}),
			Handler:     s.handler("delete_file", true),
		},
	}
}

// handler routes a read or write tool to the area its path names.
func (s *Spaces) handler(name string, write bool) func(context.Context, tools.Call) (string, error) {
	return func(ctx context.Context, call tools.Call) (string, error) {
		var args map[string]json.RawMessage
		if err := json.Unmarshal(call.Args, &args); err != nil {
			return "", fmt.Errorf("%w: %v", tools.ErrBadArgs, err)
		}
		var p string
		if raw, ok := args["path"]; ok {
			if err := json.Unmarshal(raw, &p); err != nil {
				return "", fmt.Errorf("%w: path must be a string", tools.ErrBadArgs)
			}
		}
		a, rel, err := s.routeFor(call, p)
		if err != nil {
			return "", err
		}
		if rel == "" {
			return "", fmt.Errorf("%s: give a file path, not a folder", name)
		}
		owner := s.cfg.IsOwner(call)
		if write && a != areaPrivate && !owner {
			instead := "a path that does not start with " + a.String()
			if a == areaPrompt {
				instead = "another file name; " + rel + " is the assistant's own instructions"
			}
			return "", fmt.Errorf("%s %s: %w: %s is the office's common area; only the assistant's owners (agent.owners) may change it. Write in your own folder instead (%s)",
				name, p, ErrReadOnly, a, instead)
		}
		w, dir, err := s.open(call, a)
		if err != nil {
			return "", err
		}
		defer w.Close()
		if write && a == areaPrivate {
			l := s.lock(dir)
			l.Lock()
			defer l.Unlock()
			if err := s.checkQuota(dir, growth(w, name, rel, args)); err != nil {
				return "", err
			}
		}
		inner, err := setPath(args, rel)
		if err != nil {
			return "", err
		}
		c := call
		c.Args = inner
		out, err := w.Handle(ctx, name, c)
		if err == nil && write && a != areaPrivate {
			who := call.Channel + ":" + call.User
			s.logger.Warn("workspace: common file changed", "by", who, "area", a.String(), "path", p, "tool", name,
				"bytes", len(args["content"])+len(args["new_text"]))
		}
		if err != nil && a != areaPrivate && a != areaPrompt {
			// Name the path as the caller wrote it.
			return "", fmt.Errorf("%s: %w", strings.TrimSpace(p), err)
		}
		return out, err
	}
}

// growth estimates how many bytes a write adds to the folder.
func growth(w *tools.Workspace, name, rel string, args map[string]json.RawMessage) int64 {
	var oldCost, oldSize int64
	if f, fi, err := w.Open(rel); err == nil {
		oldCost, oldSize = diskuse.Of(fi), fi.Size()
		f.Close()
	} else {
		oldCost = -int64(strings.Count(rel, "/")) * entryCost // and its new folders
	}
	switch name {
	case "write_file":
		var content string
		_ = json.Unmarshal(args["content"], &content)
		return blocksFor(int64(len(content))) - oldCost
	case "edit_file":
		var o, n string
		_ = json.Unmarshal(args["old_text"], &o)
		_ = json.Unmarshal(args["new_text"], &n)
		return blocksFor(oldSize+int64(len(n)-len(o))) - oldCost
	}
	return 0
}

// blocksFor is what a file of size bytes written whole holds of the disk:
// whole blocks, at least one entry.
func blocksFor(size int64) int64 {
	return max((size+entryCost-1)/entryCost*entryCost, entryCost)
}

// setPath returns args with path replaced by rel.
func setPath(args map[string]json.RawMessage, rel string) (json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(args))
	for k, v := range args {
		out[k] = v
	}
	p, _ := json.Marshal(rel)
	out["path"] = p
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", tools.ErrBadArgs, err)
	}
	return b, nil
}

// list is list_files: the caller's folder (with a note on the common
// areas at its top), or a common area.
func (s *Spaces) list(ctx context.Context, call tools.Call) (string, error) {
	a0, err := tools.Decode[tools.ListFilesArgs](call.Args)
	if err != nil {
		return "", err
	}
	a, rel, err := s.routeFor(call, a0.Path)
	if err != nil {
		return "", err
	}
	if a == areaPrompt {
		return "", fmt.Errorf("list_files %s: not a directory; use read_file", a0.Path)
	}
	w, _, err := s.open(call, a)
	if err != nil {
		return "", err
	}
	defer w.Close()
	args, _ := json.Marshal(tools.ListFilesArgs{Path: rel, Recursive: a0.Recursive})
	c := call
	c.Args = args
	out, err := w.Handle(ctx, "list_files", c)
	if err != nil {
		return "", err
	}
	switch {
	case a == areaShared:
		out = "shared/ (the office's shared files" + s.rw(call) + "):\n" + out
	case a == areaSkills:
		out = "skills/ (" + s.rw(call)[2:] + "):\n" + out
	case a == areaPrivate && (rel == "" || rel == "."):
		out = "Your folder:\n" + out + "\n\nAlso: shared/ (the office's shared files" + s.rw(call) + "), skills/, SOUL.md, AGENT.md, USER.md (the assistant's instructions)."
	}
	return out, nil
}

// rw says whether call may change the common areas.
func (s *Spaces) rw(call tools.Call) string {
	if s.cfg.IsOwner(call) {
		return "; you may change them as an owner"
	}
	return "; read-only for you"
}

// Where a sandboxed run of a call (exec, documents, video) sees the
// workspace: the caller's own folder read-write at WorkMount, the shared
// area read-only at SharedMount, nothing else (not other users' folders,
// not the prompt files or skills).
const (
	WorkMount   = "/work"
	SharedMount = "/shared"
)

// View is what a sandboxed run of a call may see of the workspace.
type View struct {
	Scope  string
	Work   string // the caller's folder (host path), read-write at WorkMount
	Shared string // the shared area (host path), read-only at SharedMount
	// Left is how many bytes the folder may still grow under the quota;
	// 0 when there is no quota.
	Left int64
}

// View returns what a sandboxed run of call may see. A folder already at
// its quota is an error wrapping ErrQuota, and a disk down to its reserve
// one wrapping ErrDiskFull: such a run does not start.
func (s *Spaces) View(call tools.Call) (View, error) {
	scope, err := Scope(call)
	if err != nil {
		return View{}, err
	}
	dir, err := s.UserDir(scope)
	if err != nil {
		return View{}, err
	}
	shared := filepath.Join(s.dir, SharedDir)
	if err := os.MkdirAll(shared, 0o750); err != nil {
		return View{}, fmt.Errorf("workspace: %w", err)
	}
	v := View{Scope: scope, Work: dir, Shared: shared}
	if err := s.checkReserve(dir, 0); err != nil {
		return View{}, err
	}
	if q := s.cfg.Quota(); q > 0 {
		used, err := usage(dir)
		if err != nil {
			return View{}, fmt.Errorf("workspace: %w", err)
		}
		if used >= q {
			return View{}, fmt.Errorf("%w: your folder uses %s of its %s; nothing ran: delete files you no longer need with the file tools (write_file with empty content shortens one), then try again", ErrQuota, mib(used), mib(q))
		}
		v.Left = q - used
	}
	return v, nil
}

// Inside maps p, a path as call's file tools know it, to the path a
// sandboxed run sees it at (WorkMount/... or SharedMount/...). With
// file set p must name an existing regular file, opened the way the file
// tools open one (no link out of its area, no FIFO); otherwise it names a
// place to write in the caller's own folder.
func (s *Spaces) Inside(call tools.Call, p string, file bool) (string, error) {
	a, rel, err := s.routeFor(call, p)
	if err != nil {
		return "", err
	}
	switch {
	case a == areaPrompt || a == areaSkills:
		return "", fmt.Errorf("%s is not visible to this tool: it sees your folder and shared/ only", p)
	case a == areaShared && !file:
		return "", fmt.Errorf("%s: this tool writes in your own folder only; shared/ is read-only to it", p)
	case rel == "":
		return "", fmt.Errorf("%q names a folder; give a file path", p)
	}
	if file {
		w, _, err := s.open(call, a)
		if err != nil {
			return "", err
		}
		f, _, err := w.Open(rel)
		w.Close()
		if err != nil {
			return "", err
		}
		f.Close()
	}
	if a == areaShared {
		return SharedMount + "/" + rel, nil
	}
	return WorkMount + "/" + rel, nil
}

// Spec is a sandbox run of argv over v: the folder read-write at
// WorkMount (the working directory), the shared area read-only at
// SharedMount, writes bounded by the quota left.
func (v View) Spec(argv ...string) sandbox.Spec {
	return sandbox.Spec{
		Argv:     argv,
		Work:     v.Work,
		Binds:    []sandbox.Bind{{Src: v.Shared, Dst: SharedMount}},
		MaxWrite: v.Left,
	}
}
