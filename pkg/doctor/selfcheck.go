package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"agent/pkg/errlog"
	"agent/pkg/selfcheck/report"
	"agent/pkg/store"
)

// staleSelfCheck is how old the last self-check may be: the daemon runs
// one daily at 09:00.
const staleSelfCheck = 26 * time.Hour

// checkSelfCheck reads the daemon's last self-check report from the
// database (it works while the daemon is down) and counts the errors
// logged since.
func (e Env) checkSelfCheck(ctx context.Context) Result {
	path := filepath.Join(e.Config.Agent.StateDir, store.FileName)
	if _, err := os.Stat(path); err != nil {
		return Result{Level: OK, Detail: "no database yet"}
	}
	s, err := store.Open(ctx, path, nil, store.Options{ReadOnly: true})
	if err != nil {
		return Result{Level: Warn, Detail: "not checked: " + err.Error()}
	}
	defer s.Close()
	rep, ok, err := report.Last(ctx, s.DB())
	if err != nil {
		return Result{Level: Warn, Detail: "not checked: " + err.Error()}
	}
	if !ok {
		return Result{Level: OK, Detail: "no self-check yet (the daemon runs one daily at 09:00; or ask the assistant to run self_check)"}
	}
	now := time.Now()
	detail := fmt.Sprintf("last %s (%s ago)", rep.At.Local().Format("2006-01-02 15:04"), now.Sub(rep.At).Round(time.Minute))
	lvl := OK
	if p := rep.Problems(); len(p) > 0 {
		lvl = Warn
		parts := make([]string, 0, len(p))
		for _, it := range p {
			parts = append(parts, it.Name+": "+it.Detail)
		}
		detail += fmt.Sprintf(": %d problem(s): %s", len(p), strings.Join(parts, "; "))
	} else {
		detail += ": all good"
	}
	if entries, err := errlog.Since(ctx, s.DB(), rep.At, 10000); err == nil {
		errs, panics := 0, 0
		for _, en := range entries {
			switch {
			case en.Panic():
				panics++
			case en.Error():
				errs++
			}
		}
		if errs+panics > 0 {
			lvl = Warn
			detail += fmt.Sprintf("; since then %d error(s), %d panic(s) logged", errs, panics)
		}
	}
	if now.Sub(rep.At) > staleSelfCheck {
		lvl = Warn
		return Result{Level: lvl, Detail: detail + "; the daily check has not run", Fix: "systemctl status agent"}
	}
	return Result{Level: lvl, Detail: detail, Fix: fixIf(lvl != OK, "journalctl -u agent -p warning --since yesterday")}
}

func fixIf(cond bool, fix string) string {
	if cond {
		return fix
	}
	return ""
}
