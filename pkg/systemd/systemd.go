// Package systemd speaks the service manager's notify protocol. Outside
// systemd (no NOTIFY_SOCKET) every call is a no-op.
package systemd

import (
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notifier sends sd_notify messages.
type Notifier struct{}

// Notify sends state (e.g. "READY=1"). It reports an error only when the
// socket exists and the send failed.
func (Notifier) Notify(state string) error {
	_, err := daemon.SdNotify(false, state)
	return err
}

// WatchdogInterval is WATCHDOG_USEC for this process, or 0.
func (Notifier) WatchdogInterval() time.Duration {
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		return 0
	}
	return d
}

// UnderJournald reports whether stderr is connected to the journal.
func UnderJournald(lookup func(string) (string, bool)) bool {
	_, ok := lookup("JOURNAL_STREAM")
	return ok
}
