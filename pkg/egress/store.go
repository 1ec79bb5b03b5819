package egress

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"time"
)

// The ledger keeps hourly counts in the database (egress_hours, and
// egress_redactions for the values [privacy] redact kept from the model):
// Run flushes them every FlushEvery and at the end; Report adds what is
// not flushed yet. Rows older than keepHours are deleted.

// FlushEvery is how often counts are written.
const FlushEvery = 30 * time.Second

const keepHours = 7 * 24

type ledgerStore struct {
	db         *sql.DB
	redactions map[redKey]int64 // not yet flushed
}

type redKey struct {
	hour int64
	kind string
}

// Open keeps the counts in db (the egress_hours table).
func (l *Ledger) Open(db *sql.DB) {
	l.mu.Lock()
	l.store = &ledgerStore{db: db, redactions: map[redKey]int64{}}
	l.mu.Unlock()
}

// Redacted counts values [privacy] redact kept from the model, by kind.
func (l *Ledger) Redacted(n map[string]int) {
	hour := l.c.Clock.Now().Unix() / 3600
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.store == nil {
		return
	}
	for k, v := range n {
		l.store.redactions[redKey{hour, k}] += int64(v)
	}
}

// Run flushes the counts until ctx ends (then once more).
func (l *Ledger) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			if err := l.Flush(context.WithoutCancel(ctx)); err != nil {
				l.c.Logger.Warn("egress ledger: last flush failed", "err", err)
			}
			return
		case <-l.c.Clock.After(FlushEvery):
			if err := l.Flush(ctx); err != nil && ctx.Err() == nil {
				l.c.Logger.Warn("egress ledger: flush failed", "err", err)
			}
		}
	}
}

// Flush writes the pending counts.
func (l *Ledger) Flush(ctx context.Context) error {
	l.mu.Lock()
	st := l.store
	if st == nil {
		l.mu.Unlock()
		return nil
	}
	pending, reds := l.pending, st.redactions
	l.pending, st.redactions = map[key]*Counts{}, map[redKey]int64{}
	l.mu.Unlock()
	err := st.write(ctx, pending, reds, l.c.Clock.Now().Unix()/3600-keepHours)
	if err != nil { // kept for the next flush
		l.mu.Lock()
		for k, c := range pending {
			p := l.pending[k]
			if p == nil {
				p = &Counts{}
				l.pending[k] = p
			}
			p.add(*c)
		}
		for k, v := range reds {
			st.redactions[k] += v
		}
		l.mu.Unlock()
	}
	return err
}

func (c *Counts) add(o Counts) {
	c.Conns += o.Conns
	c.Refused += o.Refused
	c.BytesIn += o.BytesIn
	c.BytesOut += o.BytesOut
}

func (s *ledgerStore) write(ctx context.Context, pending map[key]*Counts, reds map[redKey]int64, oldest int64) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for k, c := range pending {
		if _, err := tx.ExecContext(ctx, `INSERT INTO egress_hours(hour, purpose, host, conns, refused, bytes_out, bytes_in) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT(hour, purpose, host) DO UPDATE SET conns = conns + excluded.conns, refused = refused + excluded.refused,
			bytes_out = bytes_out + excluded.bytes_out, bytes_in = bytes_in + excluded.bytes_in`,
			k.hour, string(k.purpose), k.host, c.Conns, c.Refused, c.BytesOut, c.BytesIn); err != nil {
			return fmt.Errorf("egress ledger: %w", err)
		}
	}
	for k, n := range reds {
		if _, err := tx.ExecContext(ctx, `INSERT INTO egress_redactions(hour, kind, n) VALUES (?, ?, ?)
			ON CONFLICT(hour, kind) DO UPDATE SET n = n + excluded.n`, k.hour, k.kind, n); err != nil {
			return fmt.Errorf("egress ledger: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM egress_hours WHERE hour < ?`, oldest); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM egress_redactions WHERE hour < ?`, oldest); err != nil {
		return err
	}
	return tx.Commit()
}

// Entry is one destination's traffic over a report's period.
type Entry struct {
	Purpose Purpose `json:"purpose"`
	Host    string  `json:"host"`
	Counts
}

// Report is the traffic since a time, by destination, and the values
// kept from the model.
type Report struct {
	Since        time.Time        `json:"since"`
	Destinations []Entry          `json:"destinations"`
	Redactions   map[string]int64 `json:"redactions"`
	Rules        []string         `json:"egress_allow"` // in force; empty: not enforced
}

// Report sums the whole hours since since (flushed and pending).
func (l *Ledger) Report(ctx context.Context, since time.Time) (Report, error) {
	from := since.Unix() / 3600
	rep := Report{Since: time.Unix(from*3600, 0), Redactions: map[string]int64{}}
	for _, r := range l.Rules() {
		rep.Rules = append(rep.Rules, r.String())
	}
	sum := map[key]*Counts{}
	addTo := func(k key, c Counts) {
		k.hour = 0
		s := sum[k]
		if s == nil {
			s = &Counts{}
			sum[k] = s
		}
		s.add(c)
	}
	l.mu.Lock()
	st := l.store
	for k, c := range l.pending {
		if k.hour >= from {
			addTo(k, *c)
		}
	}
	if st != nil {
		for k, n := range st.redactions {
			if k.hour >= from {
				rep.Redactions[k.kind] += n
			}
		}
	}
	l.mu.Unlock()
	if st != nil {
		rows, err := st.db.QueryContext(ctx, `SELECT purpose, host, sum(conns), sum(refused), sum(bytes_out), sum(bytes_in) FROM egress_hours WHERE hour >= ? GROUP BY purpose, host`, from)
		if err != nil {
			return rep, err
		}
		for rows.Next() {
			var k key
			var p string
			var c Counts
			if err := rows.Scan(&p, &k.host, &c.Conns, &c.Refused, &c.BytesOut, &c.BytesIn); err != nil {
				rows.Close()
				return rep, err
			}
			k.purpose = Purpose(p)
			addTo(k, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return rep, err
		}
		rrows, err := st.db.QueryContext(ctx, `SELECT kind, sum(n) FROM egress_redactions WHERE hour >= ? GROUP BY kind`, from)
		if err != nil {
			return rep, err
		}
		defer rrows.Close()
		for rrows.Next() {
			var kind string
			var n int64
			if err := rrows.Scan(&kind, &n); err != nil {
				return rep, err
			}
			rep.Redactions[kind] += n
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(sum), func(a, b key) int {
		if a.purpose != b.purpose {
			return compare(string(a.purpose), string(b.purpose))
		}
		return compare(a.host, b.host)
	}) {
		rep.Destinations = append(rep.Destinations, Entry{Purpose: k.purpose, Host: k.host, Counts: *sum[k]})
	}
	return rep, nil
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
