package llm

import "sync"

// UserUsage is one user's running total.
type UserUsage struct {
	Usage
	Requests int
}

// Accounting keeps token usage per user. Callers feed it with Add after each
// call (the client does not know users); the zero value is ready to use and
// it is safe for concurrent use.
type Accounting struct {
	mu    sync.Mutex
	users map[string]UserUsage
}

// Add records one call's usage for user.
func (a *Accounting) Add(user string, u Usage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.users == nil {
		a.users = map[string]UserUsage{}
	}
	t := a.users[user]
	t.Usage = t.Usage.Add(u)
	t.Requests++
	a.users[user] = t
}

// Snapshot returns a copy of the totals, keyed by user.
func (a *Accounting) Snapshot() map[string]UserUsage {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]UserUsage, len(a.users))
	for k, v := range a.users {
		out[k] = v
	}
	return out
}
