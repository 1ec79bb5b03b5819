package admin

import (
	"context"
	"net/http"
	"time"
)

// ConsoleLink is a one-time sign-in link for the web console.
type ConsoleLink struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
	// Voice: the console's voice and chat work (voice.enabled); without
	// it the console shows status only.
	Voice bool `json:"voice"`
}

// ConsoleEnded says what ConsoleEnd stopped.
type ConsoleEnded struct {
	Sessions    int `json:"sessions"`    // console sessions ended
	Connections int `json:"connections"` // their open voice connections closed
}

// ConsoleBackend is the web console's sign-in part of the admin API; a
// Backend that also implements it serves /v1/console. The socket is the
// proof: whoever can open it (root, the service user) is the operator, and
// a link it hands out signs a browser in as the operator.
type ConsoleBackend interface {
	// ConsoleLink mints a link that works once, for a short while.
	ConsoleLink(ctx context.Context) (ConsoleLink, error)
	// ConsoleEnd ends every console session (a leaked link or cookie).
	ConsoleEnd(ctx context.Context) (ConsoleEnded, error)
}

func registerConsole(mux *http.ServeMux, b Backend) {
	with := optional[ConsoleBackend](b, "web console sign-in")
	mux.HandleFunc("POST /v1/console/link", with(func(w http.ResponseWriter, r *http.Request, c ConsoleBackend) {
		l, err := c.ConsoleLink(r.Context())
		answer(w, l, err)
	}))
	mux.HandleFunc("POST /v1/console/end", with(func(w http.ResponseWriter, r *http.Request, c ConsoleBackend) {
		e, err := c.ConsoleEnd(r.Context())
		answer(w, e, err)
	}))
}

// ConsoleLink asks the daemon for a one-time console sign-in link.
func (c *Client) ConsoleLink(ctx context.Context) (ConsoleLink, error) {
	return call[ConsoleLink](ctx, c, http.MethodPost, "/v1/console/link", nil)
}

// ConsoleEnd signs every console session out.
func (c *Client) ConsoleEnd(ctx context.Context) (ConsoleEnded, error) {
	return call[ConsoleEnded](ctx, c, http.MethodPost, "/v1/console/end", nil)
}
