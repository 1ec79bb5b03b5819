package admin

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"agent/pkg/egress"
)

// EgressBackend is the egress ledger part of the admin API; a Backend
// that also implements it serves /v1/egress.
type EgressBackend interface {
	// Egress is the outbound traffic since since (pkg/egress.Report).
	Egress(ctx context.Context, since time.Time) (egress.Report, error)
}

// registerEgress adds GET /v1/egress?hours=N (default 24, at most 168);
// 501 when b is not an EgressBackend.
func registerEgress(mux *http.ServeMux, b Backend) {
	with := optional[EgressBackend](b, "egress ledger")
	mux.HandleFunc("GET /v1/egress", with(func(w http.ResponseWriter, r *http.Request, e EgressBackend) {
		hours := 24
		if s := r.URL.Query().Get("hours"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > 168 {
				http.Error(w, "hours must be 1 to 168", http.StatusBadRequest)
				return
			}
			hours = n
		}
		rep, err := e.Egress(r.Context(), time.Now().Add(-time.Duration(hours-1)*time.Hour))
		answer(w, rep, err)
	}))
}

// Egress reads the outbound traffic of the last hours.
func (c *Client) Egress(ctx context.Context, hours int) (egress.Report, error) {
	return call[egress.Report](ctx, c, http.MethodGet, "/v1/egress?hours="+strconv.Itoa(hours), nil)
}
