package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
)

// Pairing is one row of `agentctl pair list`: an approved user, or a
// stranger waiting with a code.
type Pairing struct {
	User       string    `json:"user"`
	State      string    `json:"state"` // approved | pending
	Code       string    `json:"code,omitempty"`
	Since      time.Time `json:"since"`
	ApprovedBy string    `json:"approved_by,omitempty"`
}

// PairingBackend is the DM pairing part of the admin API; a Backend that
// also implements it serves /v1/pairing. Unknown codes and users are
// ErrNotFound (wrapped).
type PairingBackend interface {
	PairingList(ctx context.Context) ([]Pairing, error)
	PairingApprove(ctx context.Context, code string) (Pairing, error)
	PairingRevoke(ctx context.Context, user string) (Pairing, error)
}

// pairingRequest is the body of approve and revoke.
type pairingRequest struct {
	Code string `json:"code,omitempty"`
	User string `json:"user,omitempty"`
}

func registerPairing(mux *http.ServeMux, b Backend) {
	pb, _ := b.(PairingBackend)
	with := func(h func(w http.ResponseWriter, r *http.Request, p PairingBackend)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if pb == nil {
				writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "this daemon has no DM pairing"})
				return
			}
			h(w, r, pb)
		}
	}
	answer := func(w http.ResponseWriter, v any, err error) {
		switch {
		case errors.Is(err, ErrNotFound):
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		case err != nil:
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		default:
			writeJSON(w, http.StatusOK, v)
		}
	}
	body := func(w http.ResponseWriter, r *http.Request) (pairingRequest, bool) {
		var req pairingRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad request body: " + err.Error()})
			return req, false
		}
		return req, true
	}
	mux.HandleFunc("GET /v1/pairing", with(func(w http.ResponseWriter, r *http.Request, p PairingBackend) {
		list, err := p.PairingList(r.Context())
		if list == nil {
			list = []Pairing{}
		}
		answer(w, list, err)
	}))
	mux.HandleFunc("POST /v1/pairing/approve", with(func(w http.ResponseWriter, r *http.Request, p PairingBackend) {
		req, ok := body(w, r)
		if !ok {
			return
		}
		if strings.TrimSpace(req.Code) == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "code is required"})
			return
		}
		res, err := p.PairingApprove(r.Context(), req.Code)
		answer(w, res, err)
	}))
	mux.HandleFunc("POST /v1/pairing/revoke", with(func(w http.ResponseWriter, r *http.Request, p PairingBackend) {
		req, ok := body(w, r)
		if !ok {
			return
		}
		if strings.TrimSpace(req.User) == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "user is required"})
			return
		}
		res, err := p.PairingRevoke(r.Context(), req.User)
		answer(w, res, err)
	}))
}

// PairList lists approved users and pending codes.
func (c *Client) PairList(ctx context.Context) ([]Pairing, error) {
	ctx, cancel := quick(ctx)
	defer cancel()
	var list []Pairing
	err := c.do(ctx, http.MethodGet, "/v1/pairing", nil, &list)
	return list, err
}

// PairApprove admits the stranger holding code.
func (c *Client) PairApprove(ctx context.Context, code string) (Pairing, error) {
	ctx, cancel := quick(ctx)
	defer cancel()
	var p Pairing
	err := c.do(ctx, http.MethodPost, "/v1/pairing/approve", pairingRequest{Code: code}, &p)
	return p, err
}

// PairRevoke removes an approved user (or a pending code).
func (c *Client) PairRevoke(ctx context.Context, user string) (Pairing, error) {
	ctx, cancel := quick(ctx)
	defer cancel()
	var p Pairing
	err := c.do(ctx, http.MethodPost, "/v1/pairing/revoke", pairingRequest{User: user}, &p)
	return p, err
}
