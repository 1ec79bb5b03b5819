package admin

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// FleetBox is one box of `agentctl fleet status` (its last heartbeat).
type FleetBox struct {
	Box        string    `json:"box"`
	Version    string    `json:"version"`
	Healthy    bool      `json:"healthy"`
	Ingress    bool      `json:"ingress"`
	RSSBytes   int64     `json:"rss_bytes"`
	QueueDepth int       `json:"queue_depth"`
	Lag        uint64    `json:"lag"`
	At         time.Time `json:"at"`
}

// FleetHome is one conversation's home.
type FleetHome struct {
	Channel string `json:"channel"`
	User    string `json:"user"`
	Box     string `json:"box"`
	Since   uint64 `json:"since,omitempty"`
	From    string `json:"from,omitempty"`
	Moving  bool   `json:"moving,omitempty"`
}

// FleetView is what GET /v1/fleet answers.
type FleetView struct {
	Box       string      `json:"box"`
	Connected bool        `json:"connected"`
	Boxes     []FleetBox  `json:"boxes"`
	Homes     []FleetHome `json:"homes"`
	More      bool        `json:"more,omitempty"`
}

// FleetRequest homes or moves a user.
type FleetRequest struct {
	User string `json:"user"`
	Box  string `json:"box"`
}

// FleetMoved is what a move did.
type FleetMoved struct {
	From      string  `json:"from"`
	To        string  `json:"to"`
	Since     uint64  `json:"since"`
	Bytes     int     `json:"bytes"`      // the memory and sessions snapshot
	FileBytes uint64  `json:"file_bytes"` // the files' stream
	Seconds   float64 `json:"seconds"`
	PurgeErr  string  `json:"purge_error,omitempty"`
}

// FleetBackend is the fleet part of the admin API (fleet.enabled).
type FleetBackend interface {
	FleetStatus(ctx context.Context) (FleetView, error)
	FleetHome(ctx context.Context, req FleetRequest) (FleetHome, error)
	FleetMove(ctx context.Context, req FleetRequest) (FleetMoved, error)
}

func registerFleet(mux *http.ServeMux, b Backend) {
	with := optional[FleetBackend](b, "fleet")
	mux.HandleFunc("GET /v1/fleet", with(func(w http.ResponseWriter, r *http.Request, f FleetBackend) {
		v, err := f.FleetStatus(r.Context())
		answer(w, v, err)
	}))
	mux.HandleFunc("POST /v1/fleet/home", with(func(w http.ResponseWriter, r *http.Request, f FleetBackend) {
		req, ok := decode[FleetRequest](w, r)
		if !ok {
			return
		}
		h, err := f.FleetHome(r.Context(), req)
		answer(w, h, err)
	}))
	mux.HandleFunc("POST /v1/fleet/move", with(func(w http.ResponseWriter, r *http.Request, f FleetBackend) {
		req, ok := decode[FleetRequest](w, r)
		if !ok {
			return
		}
		m, err := f.FleetMove(r.Context(), req)
		answer(w, m, err)
	}))
}

// FleetStatus lists the fleet's boxes and homes.
func (c *Client) FleetStatus(ctx context.Context) (FleetView, error) {
	return call[FleetView](ctx, c, http.MethodGet, "/v1/fleet", nil)
}

// FleetHome homes a user on a box (nothing moves).
func (c *Client) FleetHome(ctx context.Context, req FleetRequest) (FleetHome, error) {
	return call[FleetHome](ctx, c, http.MethodPost, "/v1/fleet/home", req)
}

// FleetMove moves a user, memory and sessions, to a box (minutes at most).
func (c *Client) FleetMove(ctx context.Context, req FleetRequest) (FleetMoved, error) {
	var out FleetMoved
	err := c.do(ctx, http.MethodPost, "/v1/fleet/move", req, &out)
	return out, err
}

// decode reads a JSON request body of at most 64 KiB; on a bad one it
// answers 400 and returns false.
func decode[T any](w http.ResponseWriter, r *http.Request) (T, bool) {
	var v T
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&v); err != nil {
		writeError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return v, false
	}
	return v, true
}
