// Package factcount counts the long-term memory's facts straight from the
// database: the one query behind memory.Store.Stats, in a leaf package so
// that agentctl doctor can read the counts without linking the memory
// store (and the LLM, session and tool packages it brings).
package factcount

import (
	"context"
	"database/sql"
	"fmt"
)

// Counts are the facts of a scope.
type Counts struct {
	Facts      int // current facts
	Superseded int // older versions kept as history
	Unembedded int // current facts without a vector
}

// Count counts the facts of scope ("" = all scopes) in db.
func Count(ctx context.Context, db *sql.DB, scope string) (Counts, error) {
	var c Counts
	err := db.QueryRowContext(ctx, `SELECT
		count(*) FILTER (WHERE superseded_by IS NULL),
		count(*) FILTER (WHERE superseded_by IS NOT NULL),
		count(*) FILTER (WHERE superseded_by IS NULL AND embedding IS NULL)
		FROM memory_facts WHERE ?1 = '' OR scope = ?1`, scope).Scan(&c.Facts, &c.Superseded, &c.Unembedded)
	if err != nil {
		return c, fmt.Errorf("memory: stats: %w", err)
	}
	return c, nil
}
