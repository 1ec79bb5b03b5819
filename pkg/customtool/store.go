package customtool

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"agent/pkg/clock"
)

// State is where a tool stands.
type State string

// The states of a tool. An update waiting for approval leaves a live tool
// live (its approved version keeps serving): Meta.Pending says so.
const (
	StateLive     State = "live"
	StatePending  State = "pending"
	StateRejected State = "rejected"
)

// Version is one version of a tool as its author wrote it.
type Version struct {
	Version     int             `json:"version"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Code        string          `json:"code"`
	Language    string          `json:"language"` // python | sh
	Network     bool            `json:"network,omitempty"`
	Author      string          `json:"author"` // "wecom:alice"
	Created     time.Time       `json:"created"`
}

// Digest identifies a version's content (description, schema, code,
// language, network): 32 hex digits (128 bits) of its SHA-256. An owner
// approves what they read by naming it whole, so a version changed after
// they looked is not approved by mistake (and a creator cannot grind a
// look-alike).
func (v Version) Digest() string {
	h := sha256.New()
	for _, part := range []string{v.Description, string(v.Parameters), v.Code, v.Language, strconv.FormatBool(v.Network)} {
		fmt.Fprintf(h, "%d:%s\n", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Meta is a tool's record: who made it, which version is live, which one
// waits, and what went wrong last.
type Meta struct {
	Name    string    `json:"name"`
	Creator string    `json:"creator"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Live is the version offered to the model; 0: none.
	Live int `json:"live,omitempty"`
	// Pending is a version waiting for an owner's approval; 0: none.
	Pending int `json:"pending,omitempty"`
	// Rejected is the last version an owner rejected; 0: none.
	Rejected int `json:"rejected,omitempty"`
	// History are the versions that were live before Live, oldest first:
	// rollback restores the last one.
	History    []int  `json:"history,omitempty"`
	Latest     int    `json:"latest"`
	ApprovedBy string `json:"approved_by,omitempty"`
	// Escaped are the versions holding invisible characters (stored
	// before create_tool refused them: Version.Hidden) that an owner
	// approved after reading them escaped. Any other such version is not
	// offered.
	Escaped []int `json:"escaped,omitempty"`
	// LastError is the last failed call (or why the tool is not offered).
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// State is the tool's state: live while a version is, else pending or
// rejected.
func (m Meta) State() State {
	switch {
	case m.Live > 0:
		return StateLive
	case m.Pending > 0:
		return StatePending
	}
	return StateRejected
}

// Sentinel errors of the store (wrapped).
var (
	ErrNotFound = errors.New("no such custom tool")
	ErrConflict = errors.New("not possible in this state")
)

// Bounds of the store.
const (
	// maxHistory bounds the versions kept for rollback.
	maxHistory = 10
	metaFile   = "tool.json"
)

// Store keeps the tools under dir, one folder each: tool.json (Meta) and
// vN.json (each Version). Every write is atomic (temp file, fsync,
// rename). Safe for concurrent use.
type Store struct {
	dir    string
	clock  clock.Clock
	logger *slog.Logger

	mu      sync.Mutex
	metas   map[string]*Meta
	damaged map[string]string // folders that hold no valid tool: name -> why
}

// OpenStore loads the tools under dir (created when missing). A folder
// that does not hold a valid tool is logged and skipped.
func OpenStore(dir string, c clock.Clock, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("custom tools: %w", err)
	}
	s := &Store{dir: dir, clock: clock.Or(c), logger: logger, metas: map[string]*Meta{}, damaged: map[string]string{}}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("custom tools: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		m, err := s.load(e.Name())
		if err != nil {
			// Its name stays taken: nobody may write over what is there
			// until the operator looks (doctor names it).
			logger.Warn("custom tool skipped: its folder holds no valid tool", "dir", e.Name(), "err", err)
			s.damaged[e.Name()] = err.Error()
			continue
		}
		s.metas[m.Name] = m
	}
	return s, nil
}

func (s *Store) load(name string) (*Meta, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	var m Meta
	if err := readJSON(filepath.Join(s.dir, name, metaFile), &m); err != nil {
		return nil, err
	}
	if m.Name != name {
		return nil, fmt.Errorf("tool.json names %q", m.Name)
	}
	for _, v := range append([]int{m.Live, m.Pending}, m.History...) {
		if v == 0 {
			continue
		}
		if _, err := s.version(name, v); err != nil {
			return nil, err
		}
	}
	return &m, nil
}

// Damaged lists the folders found at open that hold no valid tool, with
// why; their names cannot be used until the operator removes or mends
// them.
func (s *Store) Damaged() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.damaged)
}

// List returns every tool's record, sorted by name.
func (s *Store) List() []Meta {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Meta, 0, len(s.metas))
	for _, m := range s.metas {
		out = append(out, clone(m))
	}
	slices.SortFunc(out, func(a, b Meta) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Get returns the named tool's record.
func (s *Store) Get(name string) (Meta, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.metas[name]
	if !ok {
		return Meta{}, false
	}
	return clone(m), true
}

// Version reads version v of the named tool.
func (s *Store) Version(name string, v int) (Version, error) {
	if err := CheckName(name); err != nil {
		return Version{}, err
	}
	return s.version(name, v)
}

func (s *Store) version(name string, v int) (Version, error) {
	var ver Version
	if err := readJSON(filepath.Join(s.dir, name, "v"+strconv.Itoa(v)+".json"), &ver); err != nil {
		return Version{}, err
	}
	if ver.Version != v {
		return Version{}, fmt.Errorf("v%d.json holds version %d", v, ver.Version)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, ver.Parameters); err == nil {
		ver.Parameters = buf.Bytes() // written indented with the file
	}
	return ver, nil
}

// Save stores ver as the next version of the named tool (created by
// creator when new) and then lets decide change the record: live or
// pending. decide sees the record with Latest already the new version and
// may refuse (its error is returned, and nothing is kept).
func (s *Store) Save(name, creator string, ver Version, decide func(m *Meta) error) (Meta, Version, error) {
	if err := CheckName(name); err != nil {
		return Meta{}, Version{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if why, bad := s.damaged[name]; bad {
		return Meta{}, Version{}, fmt.Errorf("%w: the folder of %q holds a damaged tool (%s); the operator must remove or mend custom_tools/%s first", ErrConflict, name, why, name)
	}
	now := s.clock.Now().UTC()
	m, exists := s.metas[name]
	if !exists {
		if _, err := os.Lstat(filepath.Join(s.dir, name)); err == nil {
			return Meta{}, Version{}, fmt.Errorf("%w: custom_tools/%s exists but holds no tool the daemon loaded; the operator must look at it first", ErrConflict, name)
		}
	}
	var next Meta
	if exists {
		next = clone(m)
	} else {
		next = Meta{Name: name, Creator: creator, Created: now}
		if err := os.MkdirAll(filepath.Join(s.dir, name), 0o750); err != nil {
			return Meta{}, Version{}, fmt.Errorf("custom tools: %w", err)
		}
	}
	next.Latest++
	next.Updated = now
	ver.Version, ver.Created = next.Latest, now
	if err := decide(&next); err != nil {
		if !exists {
			_ = os.RemoveAll(filepath.Join(s.dir, name))
		}
		return Meta{}, Version{}, err
	}
	if err := writeJSON(filepath.Join(s.dir, name, "v"+strconv.Itoa(ver.Version)+".json"), ver); err != nil {
		return Meta{}, Version{}, err
	}
	if err := s.put(&next); err != nil {
		return Meta{}, Version{}, err
	}
	return clone(&next), ver, nil
}

// Change applies fn to the named tool's record and stores it.
func (s *Store) Change(name string, fn func(m *Meta) error) (Meta, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.metas[name]
	if !ok {
		return Meta{}, fmt.Errorf("%w %q", ErrNotFound, name)
	}
	next := clone(m)
	if err := fn(&next); err != nil {
		return Meta{}, err
	}
	next.Updated = s.clock.Now().UTC()
	if err := s.put(&next); err != nil {
		return Meta{}, err
	}
	return clone(&next), nil
}

// NoteError records the last failed call of the named tool (nothing when
// it is gone). Only a new message is written.
func (s *Store) NoteError(name, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.metas[name]
	if !ok || m.LastError == msg {
		return
	}
	next := clone(m)
	next.LastError, next.LastErrorAt = msg, s.clock.Now().UTC()
	if err := s.put(&next); err != nil {
		s.logger.Warn("custom tool: last error not recorded", "tool", name, "err", err)
	}
}

// Remove deletes the named tool and every version of it.
func (s *Store) Remove(name string) (Meta, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.metas[name]
	if !ok {
		return Meta{}, fmt.Errorf("%w %q", ErrNotFound, name)
	}
	// Renamed aside first: a crash halfway leaves no half tool behind.
	gone := filepath.Join(s.dir, "."+name+".removed")
	_ = os.RemoveAll(gone)
	if err := os.Rename(filepath.Join(s.dir, name), gone); err != nil {
		return Meta{}, fmt.Errorf("custom tools: remove %s: %w", name, err)
	}
	delete(s.metas, name)
	_ = os.RemoveAll(gone)
	return clone(m), nil
}

// Count returns how many tools there are and how many of them are pending
// (no live version) and created by creator.
func (s *Store) Count(creator string) (all, pendingBy int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.metas {
		if m.Creator == creator && m.Pending > 0 {
			pendingBy++
		}
	}
	return len(s.metas), pendingBy
}

// put writes m and drops the versions nothing refers to any more. s.mu is
// held.
func (s *Store) put(m *Meta) error {
	if len(m.History) > maxHistory {
		m.History = slices.Clone(m.History[len(m.History)-maxHistory:])
	}
	if err := writeJSON(filepath.Join(s.dir, m.Name, metaFile), m); err != nil {
		return err
	}
	s.metas[m.Name] = m
	keep := map[int]bool{m.Live: true, m.Pending: true, m.Rejected: true, m.Latest: true}
	for _, v := range m.History {
		keep[v] = true
	}
	ents, _ := os.ReadDir(filepath.Join(s.dir, m.Name))
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), "v")
		n, ok2 := strings.CutSuffix(n, ".json")
		if v, err := strconv.Atoi(n); ok && ok2 && err == nil && !keep[v] {
			_ = os.Remove(filepath.Join(s.dir, m.Name, e.Name()))
		}
	}
	return nil
}

func clone(m *Meta) Meta {
	c := *m
	c.History = slices.Clone(m.History)
	c.Escaped = slices.Clone(m.Escaped)
	return c
}

// maxFile bounds what the store reads of one file.
const maxFile = 1 << 20

func readJSON(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Size() > maxFile {
		return fmt.Errorf("%s: not a regular file of at most 1 MiB", path)
	}
	dec := json.NewDecoder(f)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// writeJSON writes v to path atomically: a temp file beside it, fsync,
// rename, fsync of the folder.
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("custom tools: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename: nothing there
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("custom tools: write %s: %w", path, err)
	}
	if err := f.Chmod(0o640); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("custom tools: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("custom tools: write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
