// Package storetest opens migrated databases for tests: each in its test's
// temporary directory (or at a path the test names), closed when the test
// ends, so a package's tests need no database set-up of their own.
package storetest

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"agent/pkg/store"
)

// Open opens a database with every migration applied, in a new temporary
// directory of tb, and closes it when the test ends.
func Open(tb testing.TB) *store.Store {
	tb.Helper()
	return OpenAt(tb, filepath.Join(tb.TempDir(), store.FileName))
}

// OpenAt opens the database at path (creating it, or applying the
// migrations it lacks) and closes it when the test ends. A test may close
// it earlier, and open the same path again, to look at a file another
// process or a restarted component writes.
func OpenAt(tb testing.TB, path string) *store.Store {
	tb.Helper()
	st, err := store.Open(context.Background(), path, nil, store.Options{})
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// DB is Open's handle, for packages that take a *sql.DB.
func DB(tb testing.TB) *sql.DB {
	tb.Helper()
	return Open(tb).DB()
}
