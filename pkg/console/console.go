// Package console is the local web console served at /: push-to-talk
// voice and text chat over the agent.voice.v1 WebSocket (/voice), and a
// status panel fed by /healthz. It is one static page, embedded in the
// binary; the browser does the audio capture and resampling to 16 kHz.
//
// Access (sessions.go): a one-time link from `agentctl console` signs a
// browser in as the operator (a session cookie the voice channel checks on
// upgrade); otherwise the page asks for the voice token, which makes it a
// device like any other, subject to the DM policy.
package console

import (
	_ "embed"
	"net/http"
)

//go:embed static/index.html
var page []byte

// Handler serves the console page.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self' 'unsafe-inline' blob:; style-src 'unsafe-inline'; connect-src 'self'; worker-src blob:")
		w.Write(page)
	})
}
