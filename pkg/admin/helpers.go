package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
)

// The optional parts of the API (memory, jobs, pairing, tools) share these.

// optional wraps the handlers of an optional backend interface B: when b
// does not implement it they answer 501 saying what is missing.
func optional[B any](b Backend, missing string) func(func(http.ResponseWriter, *http.Request, B)) http.HandlerFunc {
	impl, ok := b.(B)
	return func(h func(http.ResponseWriter, *http.Request, B)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if !ok {
				writeError(w, http.StatusNotImplemented, "this daemon has no "+missing)
				return
			}
			h(w, r, impl)
		}
	}
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

// answer writes v, or err as 404 (ErrNotFound), 422 (ErrInvalidJob) or 500.
func answer(w http.ResponseWriter, v any, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrInvalidJob):
		writeError(w, http.StatusUnprocessableEntity, err.Error())
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
	default:
		writeJSON(w, http.StatusOK, v)
	}
}

// pathID reads the {id} path value; on a bad one it answers 400 and
// returns false.
func pathID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, "the id must be a positive number")
		return 0, false
	}
	return id, true
}

// decodeBody reads a JSON request body of at most 1 MiB into v; on a bad
// one it answers 400 and returns false.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return false
	}
	return true
}

// call is one quick (bounded) request whose answer decodes into a T.
func call[T any](ctx context.Context, c *Client, method, path string, in any) (T, error) {
	ctx, cancel := quick(ctx)
	defer cancel()
	var out T
	err := c.do(ctx, method, path, in, &out)
	return out, err
}
