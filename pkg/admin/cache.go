package admin

import (
	"context"
	"net/http"
	"strconv"

	"agent/pkg/cmdcache"
)

// CacheBackend is the command cache part of the admin API; a Backend that
// also implements it serves /v1/cache.
type CacheBackend interface {
	CacheList(ctx context.Context) ([]cmdcache.Entry, error)
	// CacheClear deletes entry id, or all when id is 0.
	CacheClear(ctx context.Context, id int64) (int, error)
}

// Cleared is what DELETE /v1/cache answers.
type Cleared struct {
	Cleared int `json:"cleared"`
}

// registerCache adds GET /v1/cache, DELETE /v1/cache (all) and DELETE
// /v1/cache/{id}; 501 when b is not a CacheBackend.
func registerCache(mux *http.ServeMux, b Backend) {
	with := optional[CacheBackend](b, "command cache")
	mux.HandleFunc("GET /v1/cache", with(func(w http.ResponseWriter, r *http.Request, c CacheBackend) {
		list, err := c.CacheList(r.Context())
		answer(w, list, err)
	}))
	mux.HandleFunc("DELETE /v1/cache", with(func(w http.ResponseWriter, r *http.Request, c CacheBackend) {
		n, err := c.CacheClear(r.Context(), 0)
		answer(w, Cleared{n}, err)
	}))
	mux.HandleFunc("DELETE /v1/cache/{id}", with(func(w http.ResponseWriter, r *http.Request, c CacheBackend) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil || id <= 0 {
			http.Error(w, "the entry id is a positive number", http.StatusBadRequest)
			return
		}
		n, err := c.CacheClear(r.Context(), id)
		answer(w, Cleared{n}, err)
	}))
}

// Cache lists the command cache.
func (c *Client) Cache(ctx context.Context) ([]cmdcache.Entry, error) {
	return call[[]cmdcache.Entry](ctx, c, http.MethodGet, "/v1/cache", nil)
}

// ClearCache deletes entry id, or every entry when id is 0.
func (c *Client) ClearCache(ctx context.Context, id int64) (int, error) {
	path := "/v1/cache"
	if id != 0 {
		path += "/" + strconv.FormatInt(id, 10)
	}
	r, err := call[Cleared](ctx, c, http.MethodDelete, path, nil)
	return r.Cleared, err
}
