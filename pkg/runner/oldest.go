package runner

import "time"

// Oldest reports how long, at now, the longest-running job has been
// running, and its key; 0 and "" when nothing runs. Start times are read
// from the runner's clock (Config.Clock). The daemon's watchdog reads it:
// a job running far longer than a turn may take means the runner is
// wedged.
func (r *Runner) Oldest(now time.Time) (time.Duration, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var oldest time.Time
	key := ""
	for _, w := range r.keys {
		if !w.started.IsZero() && (oldest.IsZero() || w.started.Before(oldest)) {
			oldest, key = w.started, w.key
		}
	}
	if oldest.IsZero() {
		return 0, ""
	}
	return now.Sub(oldest), key
}
