// Package store owns the daemon's single SQLite database: opening it with the
// settings an always-on appliance needs (WAL, busy timeout, foreign keys),
// verifying the extensions everything else relies on (sqlite-vec and FTS5 with
// the trigram tokenizer), and applying schema migrations in order.
//
// A database that is not a database, or is damaged, is reported with the path
// and the fix; it is never deleted or re-created behind the operator's back.
package store

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	sqlitevec "github.com/asg017/sqlite-vec-go-bindings/cgo"
	sqlite3 "github.com/mattn/go-sqlite3"
)

// Sentinel errors. Callers decide with errors.Is.
var (
	// ErrCorrupt means the file exists but is not a usable SQLite database.
	ErrCorrupt = errors.New("database is corrupt")
	// ErrTooNew means the schema was written by a newer release.
	ErrTooNew = errors.New("database schema is newer than this binary")
	// ErrExtension means sqlite-vec or FTS5 (trigram) is not available.
	ErrExtension = errors.New("required SQLite extension missing")
)

// FileName is the database's name inside the state directory.
const FileName = "agent.db"

// busyTimeout bounds how long a writer waits for another connection's lock.
const busyTimeout = 5 * time.Second

// registerVec installs sqlite-vec as an auto-extension for every connection
// this process opens. SQLite keeps that list process-wide, so registration is
// necessarily once per process.
var registerVec = sync.OnceFunc(sqlitevec.Auto)

// mmapSize is how much of the database file each connection reads through
// a memory map rather than read(2) into its page cache: a search that
// touches scattered pages of a large memory (hundreds of fact rows) runs
// about twice as fast. The mapped pages are the kernel's page cache,
// counted as file-backed resident memory and reclaimable under pressure.
const mmapSize = 256 << 20

// maxIdleConns is how many open connections the pool keeps when idle.
const maxIdleConns = 8

// tuneConn sets what the DSN cannot on every new connection.
func tuneConn(c *sqlite3.SQLiteConn) error {
	_, err := c.Exec(fmt.Sprintf("PRAGMA mmap_size = %d", mmapSize), nil)
	return err
}

// connector opens connections with the driver's hook without registering
// a driver name (process-wide state).
type connector struct {
	dsn string
	drv *sqlite3.SQLiteDriver
}

func (c connector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c connector) Driver() driver.Driver                        { return c.drv }

// Store is the open database.
type Store struct {
	db     *sql.DB
	path   string
	logger *slog.Logger
}

// Options tune Open.
type Options struct {
	// ReadOnly opens without creating the file or applying migrations
	// (agentctl doctor on a state dir it does not own).
	ReadOnly bool
	// Migrations replaces the built-in list (tests).
	Migrations []Migration
}

// Open opens (creating if needed) the database at path, checks its header,
// verifies sqlite-vec and FTS5 trigram, and applies pending migrations.
func Open(ctx context.Context, path string, logger *slog.Logger, opts Options) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := checkHeader(path); err != nil {
		return nil, err
	}
	if opts.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("store: open %s: %w", path, err)
		}
	}
	if !opts.ReadOnly {
		if err := prepareFiles(path, logger); err != nil {
			return nil, err
		}
	}
	registerVec()
	mode := "rwc"
	if opts.ReadOnly {
		mode = "ro"
	}
	// secure_delete: what a user asks the agent to forget is overwritten in
	// the file, not left in free pages (the WAL keeps old page images only
	// until its next checkpoint).
	dsn := fmt.Sprintf("file:%s?mode=%s&_journal_mode=WAL&_busy_timeout=%d&_foreign_keys=on&_synchronous=NORMAL&_txlock=immediate&_secure_delete=on",
		escapePath(path), mode, busyTimeout.Milliseconds())
	db := sql.OpenDB(connector{dsn: dsn, drv: &sqlite3.SQLiteDriver{ConnectHook: tuneConn}})
	// Connections are kept rather than closed and opened again: each
	// opening reads the schema and grows a page cache in C memory, and
	// under bursts that churn fragments the C heap (resident memory that
	// never comes back).
	db.SetMaxIdleConns(maxIdleConns)
	s := &Store{db: db, path: path, logger: logger}
	if err := s.init(ctx, opts); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) init(ctx context.Context, opts Options) error {
	// A first query surfaces "file is not a database" and friends.
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil {
		return s.classify("read schema", err)
	}
	if err := s.verifyExtensions(ctx); err != nil {
		return err
	}
	if opts.ReadOnly {
		return nil
	}
	migs := opts.Migrations
	if migs == nil {
		migs = migrations
	}
	return s.migrate(ctx, migs)
}

// classify turns SQLite's corruption codes into ErrCorrupt with a fix.
func (s *Store) classify(op string, err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) && (se.Code == sqlite3.ErrCorrupt || se.Code == sqlite3.ErrNotADB) {
		return fmt.Errorf("store: %s %s: %w (%v); stop the daemon and move it aside (mv %s %s.corrupt) to start with an empty database, or restore a backup",
			op, s.path, ErrCorrupt, err, s.path, s.path)
	}
	return fmt.Errorf("store: %s %s: %w", op, s.path, err)
}

// verifyExtensions proves sqlite-vec and FTS5 with the trigram tokenizer work.
func (s *Store) verifyExtensions(ctx context.Context) error {
	if _, err := s.VecVersion(ctx); err != nil {
		return fmt.Errorf("store: sqlite-vec: %w: %v", ErrExtension, err)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: verify extensions: %w", err)
	}
	defer conn.Close()
	// A temp table touches neither the file nor the WAL.
	const probe = "CREATE VIRTUAL TABLE temp.fts_probe USING fts5(x, tokenize='trigram')"
	if _, err := conn.ExecContext(ctx, probe); err != nil {
		return fmt.Errorf("store: FTS5 trigram tokenizer: %w: %v (build with -tags sqlite_fts5)", ErrExtension, err)
	}
	if _, err := conn.ExecContext(ctx, "DROP TABLE temp.fts_probe"); err != nil {
		return fmt.Errorf("store: FTS5 probe: %w", err)
	}
	return nil
}

// VecVersion reports the loaded sqlite-vec version.
func (s *Store) VecVersion(ctx context.Context) (string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, "SELECT vec_version()").Scan(&v)
	return v, err
}

// SQLiteVersion reports the linked SQLite library version.
func (s *Store) SQLiteVersion(ctx context.Context) (string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&v)
	return v, err
}

// Check runs PRAGMA quick_check (or the full integrity_check) and returns
// nil when SQLite answers "ok".
func (s *Store) Check(ctx context.Context, full bool) error {
	pragma := "PRAGMA quick_check"
	if full {
		pragma = "PRAGMA integrity_check"
	}
	rows, err := s.db.QueryContext(ctx, pragma)
	if err != nil {
		return s.classify("check", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return s.classify("check", err)
		}
		if line != "ok" && len(problems) < 5 {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return s.classify("check", err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("store: check %s: %w: %s", s.path, ErrCorrupt, strings.Join(problems, "; "))
	}
	return nil
}

// Ping is the cheap liveness probe the watchdog uses.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return s.classify("ping", err)
	}
	return nil
}

// DB exposes the handle to packages that own their own tables.
func (s *Store) DB() *sql.DB { return s.db }

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Close checkpoints the WAL and closes the database.
func (s *Store) Close() error {
	// Best effort: a truncated WAL keeps the flash footprint small.
	_, _ = s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	return s.db.Close()
}

// FileMode is the database's mode, and its WAL's and shared-memory file's:
// they hold every conversation and memory, so only the service user reads
// them (SQLite gives the -wal and -shm files the database file's mode).
const FileMode os.FileMode = 0o600

// Companions are the suffixes of the files SQLite keeps beside the
// database.
var Companions = []string{"-wal", "-shm", "-journal"}

// prepareFiles creates the database file 0600 before SQLite does (SQLite
// would create it 0644 less the umask, and its -wal and -shm after it), and
// takes group and other permissions off existing files. A file it cannot
// tighten (another owner) is a warning: the daemon still runs, and doctor
// names the fix.
func prepareFiles(path string, logger *slog.Logger) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, FileMode)
	switch {
	case err == nil:
		f.Close()
		// The umask may have taken bits off too; the owner needs both.
		if err := os.Chmod(path, FileMode); err != nil {
			return fmt.Errorf("store: create %s: %w", path, err)
		}
	case !errors.Is(err, os.ErrExist):
		return fmt.Errorf("store: create %s: %w", path, err)
	}
	for _, p := range append([]string{path}, companionPaths(path)...) {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm()&0o077 == 0 {
			continue
		}
		want := st.Mode().Perm() &^ 0o077
		if err := os.Chmod(p, want); err != nil {
			logger.Warn("database file readable by others and cannot be tightened", "path", p,
				"mode", fmt.Sprintf("%04o", st.Mode().Perm()), "err", err, "fix", fmt.Sprintf("chmod %o %s", want, p))
			continue
		}
		logger.Info("database file permissions tightened", "path", p,
			"was", fmt.Sprintf("%04o", st.Mode().Perm()), "now", fmt.Sprintf("%04o", want))
	}
	return nil
}

func companionPaths(path string) []string {
	out := make([]string, len(Companions))
	for i, c := range Companions {
		out[i] = path + c
	}
	return out
}

var sqliteMagic = []byte("SQLite format 3\x00")

// checkHeader rejects an existing non-empty file that is not SQLite, before
// SQLite gets a chance to treat it as anything.
func checkHeader(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		dir := filepath.Dir(path)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return fmt.Errorf("store: state directory %s does not exist or is not a directory", dir)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: open %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, len(sqliteMagic))
	n, err := io.ReadFull(f, head)
	if n == 0 && (err == io.EOF || err == nil) {
		return nil // empty file: SQLite initialises it
	}
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("store: read %s: %w", path, err)
	}
	if !bytes.Equal(head[:n], sqliteMagic) || n < len(sqliteMagic) {
		return fmt.Errorf("store: %s: %w: not a SQLite database (bad header); stop the daemon and move it aside (mv %s %s.corrupt) to start with an empty database, or restore a backup",
			path, ErrCorrupt, path, path)
	}
	return nil
}

// escapePath makes a filesystem path safe inside a file: URI.
func escapePath(p string) string {
	r := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	return r.Replace(p)
}
