package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"agent/pkg/config"
	"agent/pkg/invisible"
	"agent/pkg/tools"
)

// server is one configured MCP server and the goroutine that keeps it
// connected.
type server struct {
	m       *Manager
	name    string
	cfg     config.MCPServer
	log     *slog.Logger
	refresh chan struct{} // a tools/list_changed arrived; buffered 1
	cancel  context.CancelFunc

	mu          sync.Mutex
	state       State
	lastErr     string
	restarts    int
	session     *mcp.ClientSession
	tools       []*mcp.Tool
	pid         int // of the running stdio process, for tests
	listChanged int // notifications received, for tests
}

func newServer(m *Manager, name string, cfg config.MCPServer) *server {
	return &server{
		m:       m,
		name:    name,
		cfg:     cfg,
		log:     m.log.With("server", name),
		refresh: make(chan struct{}, 1),
		state:   StateConnecting,
	}
}

// start runs the connection loop in the background. Called with m.mu held.
func (s *server) start(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	s.cancel = cancel
	s.m.wg.Add(1)
	go func() {
		defer s.m.wg.Done()
		s.run(ctx)
	}()
}

// stop cancels the connection loop without waiting for it. Called with m.mu
// held; the server is no longer in m.servers afterwards, so its tools are
// unpublished by the caller's sync.
func (s *server) stop() {
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Lock()
	s.tools = nil
	s.session = nil
	s.mu.Unlock()
}

// run connects, serves and reconnects with backoff until ctx is done.
func (s *server) run(ctx context.Context) {
	failures := 0
	for {
		readyAt, err := s.serve(ctx)
		if ctx.Err() != nil {
			s.set(StateStopped, "")
			s.log.Info("mcp server stopped")
			return
		}
		if !readyAt.IsZero() && s.m.opts.Now().Sub(readyAt) >= s.m.opts.Backoff.Stable {
			failures = 0
		}
		failures++
		d := backoffDelay(s.m.opts.Backoff, failures)
		s.set(StateFailed, err.Error())
		s.log.Warn("mcp server unavailable; will reconnect", "err", err, "retry_in", d)
		select {
		case <-ctx.Done():
			s.set(StateStopped, "")
			return
		case <-s.m.opts.After(d):
		}
		s.mu.Lock()
		s.restarts++
		s.mu.Unlock()
	}
}

// backoffDelay is the wait after the n-th consecutive failure (n >= 1).
func backoffDelay(b Backoff, n int) time.Duration {
	d := b.Min
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

func (s *server) set(st State, lastErr string) {
	s.mu.Lock()
	s.state = st
	if lastErr != "" || st == StateReady {
		s.lastErr = lastErr
	}
	s.mu.Unlock()
}

// serve makes one connection and keeps it until it ends or ctx is done.
// readyAt is when the tools were first published (zero if never).
func (s *server) serve(ctx context.Context) (readyAt time.Time, err error) {
	s.set(StateConnecting, "")
	conn, err := s.connect(ctx)
	if err != nil {
		return time.Time{}, err
	}
	ended := make(chan error, 1)
	go func() { ended <- conn.cs.Wait() }()
	defer func() {
		s.mu.Lock()
		s.session, s.tools, s.pid = nil, nil, 0
		s.mu.Unlock()
		s.m.sync()
		conn.close()
		<-ended
	}()

	if err := s.listTools(ctx, conn.cs); err != nil {
		return time.Time{}, err
	}
	s.mu.Lock()
	s.session, s.pid = conn.cs, conn.pid
	s.mu.Unlock()
	s.m.sync() // publish before reporting ready
	s.mu.Lock()
	s.state, s.lastErr = StateReady, ""
	n := len(s.tools)
	s.mu.Unlock()
	readyAt = s.m.opts.Now()
	s.log.Info("mcp server ready", "tools", n)

	for {
		select {
		case <-ctx.Done():
			return readyAt, ctx.Err()
		case err := <-ended:
			ended <- err // for the deferred receive
			if err == nil {
				err = errors.New("server closed the connection")
			}
			return readyAt, fmt.Errorf("mcp: %s: connection lost: %w", s.name, err)
		case <-s.refresh:
			if err := s.listTools(ctx, conn.cs); err != nil {
				if errors.Is(err, mcp.ErrConnectionClosed) || ctx.Err() != nil {
					return readyAt, err
				}
				s.log.Warn("mcp tool list refresh failed; keeping the old list", "err", err)
				continue
			}
			s.m.sync()
			s.mu.Lock()
			n := len(s.tools)
			s.mu.Unlock()
			s.log.Info("mcp server tool list refreshed", "tools", n)
		}
	}
}

// listTools fetches every page of the server's tools into s.tools.
func (s *server) listTools(ctx context.Context, cs *mcp.ClientSession) error {
	ctx, cancel := context.WithTimeout(ctx, s.m.opts.ConnectTimeout)
	defer cancel()
	var list []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("mcp: %s: list tools: %w", s.name, err)
		}
		if len(list) == s.m.opts.MaxToolsPerServer {
			s.log.Warn("mcp server lists too many tools; ignoring the rest", "max", s.m.opts.MaxToolsPerServer)
			break
		}
		list = append(list, t)
	}
	slices.SortFunc(list, func(a, b *mcp.Tool) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	s.mu.Lock()
	s.tools = list
	s.mu.Unlock()
	return nil
}

// conn is one live session and what must be cleaned up after it.
type conn struct {
	cs    *mcp.ClientSession
	pid   int
	close func()
}

func (s *server) connect(ctx context.Context) (*conn, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: s.m.opts.ClientVersion}, &mcp.ClientOptions{
		Logger: s.log,
		// No roots, sampling or elicitation: a server must not narrow its
		// own config (server-filesystem replaces its directories with the
		// client's roots) or call back into the model.
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			s.mu.Lock()
			s.listChanged++
			s.mu.Unlock()
			select {
			case s.refresh <- struct{}{}:
			default:
			}
		},
	})
	cctx, cancel := context.WithTimeout(ctx, s.m.opts.ConnectTimeout)
	defer cancel()
	switch transportOf(s.cfg) {
	case "http":
		return s.connectHTTP(cctx, client)
	default:
		return s.connectStdio(cctx, client)
	}
}

func (s *server) connectHTTP(ctx context.Context, client *mcp.Client) (*conn, error) {
	var base *http.Transport
	if s.m.opts.Transport != nil {
		base = s.m.opts.Transport(s.cfg.URL)
	} else {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	t := &mcp.StreamableClientTransport{
		Endpoint:   s.cfg.URL,
		HTTPClient: &http.Client{Transport: &headerTransport{base: base, headers: maps.Clone(s.cfg.Headers)}},
	}
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		base.CloseIdleConnections()
		return nil, fmt.Errorf("mcp: %s: connect %s: %w", s.name, s.cfg.URL, err)
	}
	return &conn{cs: cs, close: func() {
		_ = cs.Close()
		base.CloseIdleConnections()
	}}, nil
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range h.headers {
			req.Header.Set(k, v)
		}
	}
	return h.base.RoundTrip(req)
}

func (s *server) connectStdio(ctx context.Context, client *mcp.Client) (*conn, error) {
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
	cmd.Env = childEnv(s.cfg.Env, s.m.opts.LookupEnv)
	setProcAttrs(cmd)
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("mcp: %s: stderr pipe: %w", s.name, err)
	}
	cmd.Stderr = w
	// Read stderr from the start: a server that writes a lot before it
	// answers initialize would otherwise block on a full pipe.
	logDone := make(chan struct{})
	s.m.wg.Add(1)
	go func() {
		defer s.m.wg.Done()
		defer close(logDone)
		logStderr(r, s.log, s.m.opts.StderrMaxLine,
			newLineLimiter(s.m.opts.Now, s.m.opts.StderrBurst, s.m.opts.StderrPerSecond))
	}()
	t := &mcp.CommandTransport{Command: cmd, TerminateDuration: s.m.opts.TerminateDuration}
	cs, err := client.Connect(ctx, t, nil)
	w.Close() // the child has its copy
	if cmd.Process == nil {
		<-logDone // EOF: nobody else holds the write end
		r.Close()
		return nil, fmt.Errorf("mcp: %s: start %s: %w", s.name, s.cfg.Command, err)
	}
	pid := cmd.Process.Pid
	cleanup := func() {
		if cmd.ProcessState == nil { // the SDK never waited for it
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		killGroup(pid)
		// Let the reader drain what is left, but do not wait on a
		// grandchild that escaped the group and still holds stderr.
		select {
		case <-logDone:
		case <-time.After(time.Second):
		}
		r.Close()
		<-logDone
	}
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("mcp: %s: connect: %w", s.name, err)
	}
	return &conn{cs: cs, pid: pid, close: func() {
		_ = cs.Close()
		cleanup()
	}}, nil
}

// childEnv is the environment of a stdio server: its configured env plus
// PATH, HOME and LANG (from lookup, unless configured), nothing else.
func childEnv(env map[string]string, lookup func(string) (string, bool)) []string {
	out := make([]string, 0, len(env)+3)
	defaults := map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8"}
	for _, k := range []string{"PATH", "HOME", "LANG"} {
		if _, set := env[k]; set {
			continue
		}
		v, ok := lookup(k)
		if !ok || v == "" {
			v = defaults[k]
		}
		out = append(out, k+"="+v)
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// handler returns the registry handler calling tool on this server.
func (s *server) handler(tool string) func(context.Context, tools.Call) (string, error) {
	return func(ctx context.Context, call tools.Call) (string, error) {
		return s.call(ctx, tool, call.Args)
	}
}

func (s *server) call(ctx context.Context, tool string, args json.RawMessage) (string, error) {
	s.mu.Lock()
	cs, state, lastErr := s.session, s.state, s.lastErr
	s.mu.Unlock()
	if cs == nil {
		if lastErr != "" {
			return "", fmt.Errorf("MCP server %s is not connected (%s: %s); try again later", s.name, state, lastErr)
		}
		return "", fmt.Errorf("MCP server %s is not connected (%s); try again later", s.name, state)
	}
	params := &mcp.CallToolParams{Name: tool}
	if len(args) > 0 {
		params.Arguments = args
	}
	timeout := s.m.opts.CallTimeout
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := cs.CallTool(cctx, params)
	if err != nil {
		if ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
			return "", fmt.Errorf("tool %s on MCP server %s did not answer within %s", tool, s.name, timeout)
		}
		return "", fmt.Errorf("tool %s on MCP server %s: %w", tool, s.name, err)
	}
	text, n := invisible.Strip(formatResult(res, s.m.opts.MaxResultBytes))
	s.m.stripped(n)
	if res.IsError {
		return "", &ToolError{Server: s.name, Tool: tool, Text: text}
	}
	return text, nil
}
