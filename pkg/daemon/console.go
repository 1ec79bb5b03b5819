package daemon

import (
	"net/http"

	"agent/pkg/console"
)

// consoleRoutes registers the web console at / with its sign-in link at
// /console; its microphone and replies go through the channel that talks
// to the console (channel.Console).
func (d *Daemon) consoleRoutes(mux *http.ServeMux) {
	mux.Handle("GET /{$}", console.Handler())
	mux.Handle("GET "+console.SignInPath, d.sessions.SignIn())
}
