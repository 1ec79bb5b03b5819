// Package admin is the operator API: HTTP over a unix socket that only the
// service user can open (0600). agentctl is its client.
package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"agent/pkg/connlimit"
)

// Status is what GET /v1/status returns.
type Status struct {
	Version    string            `json:"version"`
	PID        int               `json:"pid"`
	StartedAt  time.Time         `json:"started_at"`
	Uptime     string            `json:"uptime"`
	ConfigPath string            `json:"config_path"`
	StateDir   string            `json:"state_dir"`
	Listen     string            `json:"listen"`
	RSSBytes   int64             `json:"rss_bytes"`
	Healthy    bool              `json:"healthy"`
	Checks     []Check           `json:"checks"`
	Components map[string]string `json:"components"`
	// Held is the turns waiting for the model service (pkg/backlog).
	Held *Held `json:"held,omitempty"`
	// Memory counts the long-term memory's facts and those still waiting
	// for a vector (after a model change they are re-embedded in the
	// background).
	Memory *MemoryStatus `json:"memory,omitempty"`
}

// MemoryStatus is the memory part of Status.
type MemoryStatus struct {
	Facts      int  `json:"facts"`
	Unembedded int  `json:"unembedded"`
	Semantic   bool `json:"semantic"`
}

// Held counts the turns waiting for the model service.
type Held struct {
	Turns         int       `json:"turns"`
	Conversations int       `json:"conversations"`
	Oldest        time.Time `json:"oldest,omitzero"`
}

// Check mirrors one health result.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// SendRequest runs one message through the conversation pipeline, as the
// admin channel's user To.
type SendRequest struct {
	Channel string `json:"channel"`
	To      string `json:"to"`
	Text    string `json:"text"`
}

// SendResult holds every reply the turn produced, in order.
type SendResult struct {
	Replies []string `json:"replies"`
}

// Session is one row of `agentctl sessions`.
type Session struct {
	ID           int64     `json:"id"`
	Key          string    `json:"key"`
	Messages     int       `json:"messages"`
	CreatedAt    time.Time `json:"created_at"`
	LastActivity time.Time `json:"last_activity"`
	Open         bool      `json:"open"`
}

// Fact is one remembered fact, for `agentctl memory`.
type Fact struct {
	ID           int64     `json:"id"`
	Scope        string    `json:"scope"`
	Text         string    `json:"text"`
	Keywords     []string  `json:"keywords,omitempty"`
	Persons      []string  `json:"persons,omitempty"`
	Topic        string    `json:"topic,omitempty"`
	Time         string    `json:"time,omitempty"`
	Source       string    `json:"source,omitempty"`
	Created      time.Time `json:"created"`
	Updated      time.Time `json:"updated"`
	Seen         int       `json:"seen"`
	SupersededBy int64     `json:"superseded_by,omitempty"`
	Score        float64   `json:"score,omitempty"`
}

// MemoryQuery selects facts: Scope "" means every scope.
type MemoryQuery struct {
	Scope   string
	Query   string
	Limit   int
	History bool
}

// MemoryBackend is the long-term memory part of the admin API; a Backend
// that also implements it serves /v1/memory.
type MemoryBackend interface {
	MemoryList(ctx context.Context, q MemoryQuery) ([]Fact, error)
	MemorySearch(ctx context.Context, q MemoryQuery) ([]Fact, error)
	MemoryForget(ctx context.Context, id int64) (Fact, error)
}

// ErrNotFound is what a MemoryBackend returns (wrapped) for an unknown id;
// the API answers 404.
var ErrNotFound = errors.New("not found")

// Backend is what the daemon provides to the admin API.
type Backend interface {
	Status(ctx context.Context) Status
	Reload(ctx context.Context) error
	Send(ctx context.Context, req SendRequest) (SendResult, error)
	Sessions(ctx context.Context) ([]Session, error)
}

// Handler serves the admin API.
func Handler(b Backend) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, b.Status(r.Context()))
	})
	mux.HandleFunc("POST /v1/reload", func(w http.ResponseWriter, r *http.Request) {
		if err := b.Reload(r.Context()); err != nil {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "reloaded"})
	})
	mux.HandleFunc("POST /v1/send", func(w http.ResponseWriter, r *http.Request) {
		var req SendRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad request body: " + err.Error()})
			return
		}
		res, err := b.Send(r.Context(), req)
		if err != nil {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
	mux.HandleFunc("GET /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		ss, err := b.Sessions(r.Context())
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, ss)
	})
	registerMemory(mux, b)
	registerTools(mux, b)
	registerCustomTools(mux, b)
	registerSkills(mux, b)
	registerPairing(mux, b)
	registerJobs(mux, b)
	registerEgress(mux, b)
	registerCache(mux, b)
	registerConsole(mux, b)
	registerFleet(mux, b)
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// Listen creates the unix socket with mode 0600 from the first instant
// (umask, not a chmod after the fact), replacing a stale socket left by a
// crash but never a live one.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("admin: create socket dir: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("admin: %s exists and is not a socket; choose another server.admin_socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("admin: %s is in use by a running daemon (agentctl status)", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("admin: remove stale socket %s: %w", path, err)
		}
	}
	// Umask is process-wide; Listen is called during start-up before any
	// other goroutine creates files.
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("admin: listen %s: %w", path, err)
	}
	return ln, nil
}

// MaxConns bounds the admin socket's connections. Its peers all count as
// one client, so a full socket closes its stalest connection still waiting
// on its client for a newcomer (connlimit): agentctl keeps working while
// someone floods it. No write timeout: a send waits for a whole agent turn.
const MaxConns = 64

// Serve runs the admin server until ctx ends.
func Serve(ctx context.Context, ln net.Listener, b Backend, logger *slog.Logger) error {
	lim := connlimit.Wrap(ln, connlimit.Config{Max: MaxConns, Logger: logger})
	srv := &http.Server{
		Handler:           lim.Guard(Handler(b)), // a request sent whole (a send waiting for its turn) is never evicted
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
		ConnState:         lim.ConnState,
		ConnContext:       lim.ConnContext,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	err := srv.Serve(lim)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ErrNotRunning means no daemon answers on the socket.
var ErrNotRunning = errors.New("daemon is not running")

// ErrPermission means the socket exists but this user may not open it.
var ErrPermission = errors.New("admin socket not accessible")

// Client talks to a daemon's admin socket.
type Client struct {
	http *http.Client
}

// NewClient returns a client for the socket at path.
func NewClient(path string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}
	// No overall timeout: a send waits for a whole agent turn. Quick calls
	// bound themselves (quick).
	return &Client{http: &http.Client{Transport: tr}}
}

// Status fetches the daemon's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	ctx, cancel := quick(ctx)
	defer cancel()
	var st Status
	err := c.do(ctx, http.MethodGet, "/v1/status", nil, &st)
	return st, err
}

// Reload asks the daemon to reload its configuration and workspace.
func (c *Client) Reload(ctx context.Context) error {
	ctx, cancel := quick(ctx)
	defer cancel()
	return c.do(ctx, http.MethodPost, "/v1/reload", nil, nil)
}

// Send runs a message through the daemon's pipeline and returns its replies.
func (c *Client) Send(ctx context.Context, req SendRequest) (SendResult, error) {
	var res SendResult
	err := c.do(ctx, http.MethodPost, "/v1/send", req, &res)
	return res, err
}

// Sessions lists the daemon's conversations.
func (c *Client) Sessions(ctx context.Context) ([]Session, error) {
	ctx, cancel := quick(ctx)
	defer cancel()
	var ss []Session
	err := c.do(ctx, http.MethodGet, "/v1/sessions", nil, &ss)
	return ss, err
}

// MemoryList lists facts (newest first).
func (c *Client) MemoryList(ctx context.Context, q MemoryQuery) ([]Fact, error) {
	return call[[]Fact](ctx, c, http.MethodGet, "/v1/memory?"+q.values().Encode(), nil)
}

// MemorySearch runs a hybrid search.
func (c *Client) MemorySearch(ctx context.Context, q MemoryQuery) ([]Fact, error) {
	return call[[]Fact](ctx, c, http.MethodGet, "/v1/memory/search?"+q.values().Encode(), nil)
}

// MemoryForget deletes fact id with its history.
func (c *Client) MemoryForget(ctx context.Context, id int64) (Fact, error) {
	return call[Fact](ctx, c, http.MethodDelete, "/v1/memory/"+strconv.FormatInt(id, 10), nil)
}

func (q MemoryQuery) values() url.Values {
	v := url.Values{}
	if q.Scope != "" {
		v.Set("scope", q.Scope)
	}
	if q.Query != "" {
		v.Set("q", q.Query)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.History {
		v.Set("history", "1")
	}
	return v
}

// quick bounds calls that should answer at once.
func quick(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 10*time.Second)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://agent"+path, body)
	if err != nil {
		return err
	}
	if err := c.send(req, out); err != nil {
		return fmt.Errorf("admin: %s %s: %w", method, path, err)
	}
	return nil
}

// send makes req and decodes a 200 answer into out (nil: ignored); any
// other status is an error carrying the daemon's message.
func (c *Client) send(req *http.Request, out any) error {
	resp, err := c.http.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			if errors.Is(err, os.ErrPermission) {
				return fmt.Errorf("%w: %v (run as root or as the service user)", ErrPermission, err)
			}
			return fmt.Errorf("%w: %v", ErrNotRunning, err)
		}
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		json.Unmarshal(data, &e)
		if e.Error == "" {
			e.Error = resp.Status
		}
		return errors.New(e.Error)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decode the answer: %w", err)
		}
	}
	return nil
}

// registerMemory adds /v1/memory (list), /v1/memory/search and DELETE
// /v1/memory/{id}; all answer 501 when b is not a MemoryBackend.
func registerMemory(mux *http.ServeMux, b Backend) {
	memory := optional[MemoryBackend](b, "long-term memory")
	query := func(r *http.Request) MemoryQuery {
		q := r.URL.Query()
		limit, _ := strconv.Atoi(q.Get("limit"))
		return MemoryQuery{Scope: q.Get("scope"), Query: q.Get("q"), Limit: limit, History: q.Get("history") == "1"}
	}
	mux.HandleFunc("GET /v1/memory", memory(func(w http.ResponseWriter, r *http.Request, m MemoryBackend) {
		facts, err := m.MemoryList(r.Context(), query(r))
		answer(w, facts, err)
	}))
	mux.HandleFunc("GET /v1/memory/search", memory(func(w http.ResponseWriter, r *http.Request, m MemoryBackend) {
		q := query(r)
		if strings.TrimSpace(q.Query) == "" {
			writeError(w, http.StatusBadRequest, "q (the query) is required")
			return
		}
		facts, err := m.MemorySearch(r.Context(), q)
		answer(w, facts, err)
	}))
	mux.HandleFunc("DELETE /v1/memory/{id}", memory(func(w http.ResponseWriter, r *http.Request, m MemoryBackend) {
		if id, ok := pathID(w, r); ok {
			f, err := m.MemoryForget(r.Context(), id)
			answer(w, f, err)
		}
	}))
}
