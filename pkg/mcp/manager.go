// Package mcp connects the daemon to Model Context Protocol servers and
// offers their tools to the model through the tool registry.
//
// A Manager owns one connection per configured server. Apply makes the set
// of running servers match the config (starting, stopping and restarting
// servers in the background, never waiting on a slow one); each server's
// tools are published as SERVER__TOOL. A server that crashes or disconnects
// is reconnected with capped exponential backoff, and a
// notifications/tools/list_changed from it refreshes its tools.
//
// Stdio servers run with only their configured environment plus PATH, HOME
// and LANG, in their own process group; their stderr is logged line by line,
// bounded and rate-limited. Streamable HTTP servers get their configured
// headers on every request.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"agent/pkg/config"
	"agent/pkg/invisible"
	"agent/pkg/tools"
)

// Publisher receives the tools of connected servers. *tools.Registry is one.
type Publisher interface {
	Register(tools.Tool) error
	Unregister(name string) bool
}

// State is where a server's connection stands.
type State string

// Server states reported by Status.
const (
	StateConnecting State = "connecting"
	StateReady      State = "ready"
	StateFailed     State = "failed"
	StateStopped    State = "stopped"
)

// ServerStatus describes one configured server, for `agentctl tools list`
// and the doctor.
type ServerStatus struct {
	Name      string
	Transport string
	State     State
	// Tools is the number of the server's tools published to the registry.
	Tools     int
	LastError string
	// Restarts counts reconnection attempts since the server was (re)started
	// by Apply.
	Restarts int
}

// Backoff sets the delays between reconnection attempts: Min after the first
// failure, doubling up to Max. A session that stayed up for Stable resets the
// delay to Min.
type Backoff struct {
	Min, Max, Stable time.Duration
}

// Options configures a Manager. Tools is required; every other zero value
// means the default given.
type Options struct {
	Logger *slog.Logger // default: discard
	Tools  Publisher
	// Profiles is copied to every published tool (empty: all channels).
	Profiles []string

	// Now and After are the clock (default time.Now and time.After).
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// Backoff defaults to 1s, 5m, 1m.
	Backoff Backoff

	CallTimeout    time.Duration // per tool call; default 60s
	ConnectTimeout time.Duration // connect, initialize and list tools; default 30s
	// TerminateDuration is how long a stopping stdio server gets after its
	// stdin is closed, and again after SIGTERM, before SIGKILL; default 5s.
	TerminateDuration time.Duration
	MaxResultBytes    int // cap on a tool result's text; default 16 KiB
	MaxToolsPerServer int // tools beyond this are ignored; default 128
	// Stripped counts the invisible characters (pkg/invisible) taken out
	// of the servers' tool descriptions and results before the model
	// reads them; nil: not counted.
	Stripped func(n int)

	// Stderr of stdio servers: lines are cut at StderrMaxLine bytes (default
	// 1024) and at most StderrBurst lines (default 100) then StderrPerSecond
	// lines a second (default 10) are logged; the rest are counted.
	StderrMaxLine   int
	StderrBurst     int
	StderrPerSecond float64

	// LookupEnv supplies PATH, HOME and LANG for stdio servers (default
	// os.LookupEnv). Nothing else of the daemon's environment is passed on.
	LookupEnv func(string) (string, bool)
	// Transport, when set, makes the HTTP transport of a server at url
	// (the egress ledger's); default: a clone of http.DefaultTransport.
	Transport func(url string) *http.Transport
	// ClientVersion is sent to servers in the initialize request.
	ClientVersion string
}

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.Backoff.Min <= 0 {
		o.Backoff.Min = time.Second
	}
	if o.Backoff.Max <= 0 {
		o.Backoff.Max = 5 * time.Minute
	}
	if o.Backoff.Max < o.Backoff.Min {
		o.Backoff.Max = o.Backoff.Min
	}
	if o.Backoff.Stable <= 0 {
		o.Backoff.Stable = time.Minute
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 60 * time.Second
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 30 * time.Second
	}
	if o.TerminateDuration <= 0 {
		o.TerminateDuration = 5 * time.Second
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = 16 << 10
	}
	if o.MaxToolsPerServer <= 0 {
		o.MaxToolsPerServer = 128
	}
	if o.StderrMaxLine <= 0 {
		o.StderrMaxLine = 1024
	}
	if o.StderrBurst <= 0 {
		o.StderrBurst = 100
	}
	if o.StderrPerSecond <= 0 {
		o.StderrPerSecond = 10
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.ClientVersion == "" {
		o.ClientVersion = "dev"
	}
}

// Manager runs the configured MCP servers and publishes their tools. It is
// safe for concurrent use.
type Manager struct {
	opts Options
	log  *slog.Logger
	ctx  context.Context // cancelled by Close; parent of every server's
	stop context.CancelFunc
	wg   sync.WaitGroup

	// mu guards the fields below. Lock order: Manager.mu, then server.mu.
	mu        sync.Mutex
	closed    bool
	servers   map[string]*server
	published map[string]published // registry name -> tool
}

// published is a tool this Manager registered.
type published struct {
	srv         *server
	tool        string // the server's own name for it
	fingerprint string // description and schema, to notice changes
}

// New returns a Manager with no servers; call Apply to start some.
func New(opts Options) (*Manager, error) {
	if opts.Tools == nil {
		return nil, errors.New("mcp: new manager: no tool publisher")
	}
	opts.setDefaults()
	ctx, stop := context.WithCancel(context.Background())
	return &Manager{
		opts:      opts,
		log:       opts.Logger.With("component", "mcp"),
		ctx:       ctx,
		stop:      stop,
		servers:   make(map[string]*server),
		published: make(map[string]published),
	}, nil
}

// stripped counts n invisible characters taken out.
func (m *Manager) stripped(n int) {
	if n > 0 && m.opts.Stripped != nil {
		m.opts.Stripped(n)
	}
}

// Apply makes the running servers match servers: new ones are started,
// missing ones stopped and changed ones restarted; unchanged ones are left
// alone. It returns at once (connections are made in the background) with
// an error naming every server whose config is unusable; those servers are
// reported as failed by Status and the rest are applied anyway.
func (m *Manager) Apply(ctx context.Context, servers map[string]config.MCPServer) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mcp: apply: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("mcp: apply: manager is closed")
	}
	var errs []error
	for name, old := range m.servers {
		cfg, keep := servers[name]
		if keep && sameConfig(old.cfg, cfg) {
			continue
		}
		if keep {
			m.log.Info("mcp server config changed; restarting", "server", name)
		} else {
			m.log.Info("mcp server removed; stopping", "server", name)
		}
		old.stop()
		delete(m.servers, name)
	}
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		if _, running := m.servers[name]; running {
			continue
		}
		cfg := servers[name]
		s := newServer(m, name, cfg)
		m.servers[name] = s
		if err := checkConfig(cfg); err != nil {
			err = fmt.Errorf("mcp: server %q: %w", name, err)
			s.state, s.lastErr = StateFailed, err.Error()
			errs = append(errs, err)
			continue
		}
		m.log.Info("mcp server starting", "server", name, "transport", transportOf(cfg))
		s.start(m.ctx)
	}
	m.syncLocked()
	return errors.Join(errs...)
}

// Status reports every configured server, sorted by name.
func (m *Manager) Status() []ServerStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	counts := make(map[*server]int)
	for _, p := range m.published {
		counts[p.srv]++
	}
	out := make([]ServerStatus, 0, len(m.servers))
	for _, name := range slices.Sorted(maps.Keys(m.servers)) {
		s := m.servers[name]
		s.mu.Lock()
		st := ServerStatus{
			Name:      name,
			Transport: transportOf(s.cfg),
			State:     s.state,
			Tools:     counts[s],
			LastError: s.lastErr,
			Restarts:  s.restarts,
		}
		s.mu.Unlock()
		out = append(out, st)
	}
	return out
}

// Close stops every server, removes their tools and waits for every
// goroutine the Manager started. It is idempotent.
func (m *Manager) Close() error {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		for _, s := range m.servers {
			s.stop()
		}
		m.stop()
		m.syncLocked()
	}
	m.mu.Unlock()
	m.wg.Wait()
	m.mu.Lock()
	for _, s := range m.servers {
		s.mu.Lock()
		s.state = StateStopped
		s.mu.Unlock()
	}
	m.mu.Unlock()
	return nil
}

// sync republishes tools after a server's tool list changed.
func (m *Manager) sync() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncLocked()
}

// syncLocked recomputes the published tool set from the servers' current
// tool lists and applies the difference to the publisher.
//
// Names are assigned in (server, tool) order: the first claimant of a name
// gets ToolName, a later one the hashed altToolName and a warning. The
// outcome depends only on which servers are up and what they list, not on
// the order they connected in.
func (m *Manager) syncLocked() {
	type want struct {
		published
		desc                 string
		schema               []byte
		readOnly, idempotent bool
	}
	desired := make(map[string]want)
	if !m.closed {
		for _, name := range slices.Sorted(maps.Keys(m.servers)) {
			s := m.servers[name]
			s.mu.Lock()
			list := s.tools
			s.mu.Unlock()
			for _, t := range list {
				tn := ToolName(name, t.Name)
				if _, taken := desired[tn]; taken {
					alt := altToolName(name, t.Name)
					if _, taken := desired[alt]; taken {
						m.log.Warn("mcp tool name collision; tool skipped", "server", name, "tool", t.Name, "name", tn)
						continue
					}
					if p, ok := m.published[alt]; !ok || p.srv != s {
						m.log.Warn("mcp tool name collision; tool renamed", "server", name, "tool", t.Name, "name", alt, "taken_by", desired[tn].srv.name+"/"+desired[tn].tool)
					}
					tn = alt
				}
				schema := objectSchema(t.InputSchema)
				// The server's hints, for the command cache: read-only,
				// or idempotent (meaningful only when not read-only).
				var ro, idem bool
				if a := t.Annotations; a != nil {
					ro, idem = a.ReadOnlyHint, !a.ReadOnlyHint && a.IdempotentHint
				}
				desired[tn] = want{
					published: published{srv: s, tool: t.Name, fingerprint: fmt.Sprintf("%s\x00%s\x00%v%v", t.Description, schema, ro, idem)},
					desc:      t.Description,
					schema:    schema,
					readOnly:  ro, idempotent: idem,
				}
			}
		}
	}
	for name, p := range m.published {
		if w, ok := desired[name]; ok && w.srv == p.srv && w.tool == p.tool && w.fingerprint == p.fingerprint {
			continue
		}
		m.opts.Tools.Unregister(name)
		delete(m.published, name)
	}
	for _, name := range slices.Sorted(maps.Keys(desired)) {
		if _, ok := m.published[name]; ok {
			continue
		}
		w := desired[name]
		desc, n := invisible.Strip(w.desc)
		m.stripped(n)
		if desc == "" {
			desc = fmt.Sprintf("Tool %s of MCP server %s.", w.tool, w.srv.name)
		}
		t := tools.Tool{
			Name:        name,
			Description: capText(desc, 2048),
			Schema:      w.schema,
			Profiles:    m.opts.Profiles,
			Handler:     w.srv.handler(w.tool),
			ReadOnly:    w.readOnly,
			Idempotent:  w.idempotent,
		}
		if err := m.opts.Tools.Register(t); err != nil {
			m.log.Warn("mcp tool not published", "server", w.srv.name, "tool", w.tool, "err", err)
			continue
		}
		m.published[name] = w.published
	}
}

func transportOf(c config.MCPServer) string {
	if c.Transport == "" {
		if c.URL != "" {
			return "http"
		}
		return "stdio"
	}
	return c.Transport
}

func checkConfig(c config.MCPServer) error {
	switch transportOf(c) {
	case "stdio":
		if strings.TrimSpace(c.Command) == "" {
			return errors.New("stdio transport needs a command")
		}
	case "http":
		if !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://") {
			return fmt.Errorf("http transport needs an http:// or https:// url, got %q", c.URL)
		}
	default:
		return fmt.Errorf("unknown transport %q (want stdio or http)", c.Transport)
	}
	return nil
}

func sameConfig(a, b config.MCPServer) bool {
	return transportOf(a) == transportOf(b) && a.Command == b.Command && slices.Equal(a.Args, b.Args) &&
		maps.Equal(a.Env, b.Env) && a.URL == b.URL && maps.Equal(a.Headers, b.Headers)
}
