package admin

import (
	"context"
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
	with := optional[PairingBackend](b, "DM pairing")
	mux.HandleFunc("GET /v1/pairing", with(func(w http.ResponseWriter, r *http.Request, p PairingBackend) {
		list, err := p.PairingList(r.Context())
		if list == nil {
			list = []Pairing{}
		}
		answer(w, list, err)
	}))
	mux.HandleFunc("POST /v1/pairing/approve", with(func(w http.ResponseWriter, r *http.Request, p PairingBackend) {
		var req pairingRequest
		if !decodeBody(w, r, &req) {
			return
		}
		if strings.TrimSpace(req.Code) == "" {
			writeError(w, http.StatusBadRequest, "code is required")
			return
		}
		res, err := p.PairingApprove(r.Context(), req.Code)
		answer(w, res, err)
	}))
	mux.HandleFunc("POST /v1/pairing/revoke", with(func(w http.ResponseWriter, r *http.Request, p PairingBackend) {
		var req pairingRequest
		if !decodeBody(w, r, &req) {
			return
		}
		if strings.TrimSpace(req.User) == "" {
			writeError(w, http.StatusBadRequest, "user is required")
			return
		}
		res, err := p.PairingRevoke(r.Context(), req.User)
		answer(w, res, err)
	}))
}

// PairList lists approved users and pending codes.
func (c *Client) PairList(ctx context.Context) ([]Pairing, error) {
	return call[[]Pairing](ctx, c, http.MethodGet, "/v1/pairing", nil)
}

// PairApprove admits the stranger holding code.
func (c *Client) PairApprove(ctx context.Context, code string) (Pairing, error) {
	return call[Pairing](ctx, c, http.MethodPost, "/v1/pairing/approve", pairingRequest{Code: code})
}

// PairRevoke removes an approved user (or a pending code).
func (c *Client) PairRevoke(ctx context.Context, user string) (Pairing, error) {
	return call[Pairing](ctx, c, http.MethodPost, "/v1/pairing/revoke", pairingRequest{User: user})
}
