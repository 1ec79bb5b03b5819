package scheduler

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ErrInvalid marks a job the caller described wrongly (bad cron expression,
// a time in the past, an unknown zone, a limit reached). Its text is meant
// for the person or model that asked.
var ErrInvalid = errors.New("invalid schedule")

// ErrNotFound is returned (wrapped) for a job id that does not exist or is
// not the caller's.
var ErrNotFound = errors.New("no such job")

// Kinds of job.
const (
	KindCron = "cron" // recurring: Spec is a 5-field cron expression
	KindAt   = "at"   // one-shot: Spec is the RFC 3339 time
)

// Actions a job performs.
const (
	ActionMessage = "message"  // send Payload as text
	ActionLLMTask = "llm_task" // run Payload as a prompt as the owner; send the answer
)

// cronParser reads the standard 5 fields and the @hourly/@daily/... descriptors.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// horizon is how far ahead Next looks before calling a schedule one that
// never fires (robfig/cron gives up after five years).
const horizon = 5 * 366 * 24 * time.Hour

// ParseCron parses a 5-field cron expression and proves it fires at least
// once after now in loc.
func ParseCron(spec string, loc *time.Location, now time.Time) (cron.Schedule, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, fmt.Errorf("%w: the cron expression is empty", ErrInvalid)
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, fmt.Errorf("%w: cron expression %q: give the time zone in the tz field, not in the expression", ErrInvalid, spec)
	}
	if strings.HasPrefix(spec, "@every") {
		return nil, fmt.Errorf("%w: cron expression %q: @every is not supported; use 5 fields such as \"*/15 * * * *\"", ErrInvalid, spec)
	}
	sched, err := cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: cron expression %q: %v (want 5 fields: minute hour day-of-month month day-of-week, e.g. \"0 9 * * 1\" for Mondays at 09:00)", ErrInvalid, spec, err)
	}
	next := sched.Next(now.In(loc))
	if next.IsZero() || next.Sub(now) > horizon {
		return nil, fmt.Errorf("%w: cron expression %q never fires (no matching date in the next five years, e.g. 30 February)", ErrInvalid, spec)
	}
	return sched, nil
}

// nextCron is the first slot of spec strictly after t in loc (zero: none).
func nextCron(spec string, loc *time.Location, t time.Time) (time.Time, error) {
	sched, err := cronParser.Parse(spec)
	if err != nil {
		return time.Time{}, err
	}
	return sched.Next(t.In(loc)), nil
}

// LoadZone resolves an IANA zone name; "" gives def.
func LoadZone(name string, def *time.Location) (*time.Location, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		if def == nil {
			return time.UTC, nil
		}
		return def, nil
	}
	if strings.EqualFold(name, "local") {
		return nil, fmt.Errorf("%w: time zone %q: name an IANA zone such as Asia/Shanghai or Europe/Berlin", ErrInvalid, name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w: unknown time zone %q: use an IANA name such as Asia/Shanghai, Europe/Berlin or UTC", ErrInvalid, name)
	}
	return loc, nil
}

// atLayouts are the ISO 8601 forms ParseAt accepts without a zone offset.
var atLayouts = []string{
	"2006-01-02T15:04:05",
	"2006-01-02T15:04",
	"2006-01-02 15:04:05",
	"2006-01-02 15:04",
}

// ParseAt reads an ISO 8601 time: with an offset or Z it is absolute,
// without one it is read in loc. A time at or before now is refused.
func ParseAt(s string, loc *time.Location, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, fmt.Errorf("%w: the time is empty", ErrInvalid)
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		ok := false
		for _, l := range atLayouts {
			if t, err = time.ParseInLocation(l, s, loc); err == nil {
				ok = true
				break
			}
		}
		if !ok {
			return time.Time{}, fmt.Errorf("%w: time %q is not ISO 8601; write e.g. 2025-03-01T08:00 (in the job's time zone) or 2025-03-01T08:00:00+08:00", ErrInvalid, s)
		}
	}
	t = t.Truncate(time.Second)
	if !t.After(now) {
		return time.Time{}, fmt.Errorf("%w: time %s is in the past (it is now %s)", ErrInvalid,
			t.In(loc).Format("2006-01-02 15:04:05 MST"), now.In(loc).Format("2006-01-02 15:04:05 MST"))
	}
	if t.Sub(now) > horizon {
		return time.Time{}, fmt.Errorf("%w: time %s is more than five years away", ErrInvalid, t.In(loc).Format(time.RFC3339))
	}
	return t, nil
}
