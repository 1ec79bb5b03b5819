// Package daemon is the host of the long-running process: state directory,
// database, the HTTP and admin listeners, local models, the systemd
// protocol (READY/STATUS/WATCHDOG/STOPPING), SIGHUP reloads, the liveness
// probes and the admin backend. The conversation pipeline is
// pkg/assistant; the ways people reach it are channels (pkg/channel),
// built from the list in channels.go, whose routes the host mounts, whose
// background work it supervises and to which it routes outbound text by
// name. Nothing in this package knows a channel's protocol.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"agent/pkg/admin"
	"agent/pkg/assistant"
	"agent/pkg/buildinfo"
	"agent/pkg/channel"
	"agent/pkg/channelhost"
	"agent/pkg/clock"
	"agent/pkg/config"
	"agent/pkg/console"
	"agent/pkg/diskfree"
	"agent/pkg/egress"
	"agent/pkg/embed"
	"agent/pkg/fleet"
	"agent/pkg/health"
	"agent/pkg/localmodels"
	"agent/pkg/logging"
	"agent/pkg/metrics"
	"agent/pkg/statedir"
	"agent/pkg/store"
)

// Notifier speaks the sd_notify protocol. A no-op outside systemd.
type Notifier interface {
	Notify(state string) error
	// WatchdogInterval is how often systemd expects WATCHDOG=1 (0: disabled).
	WatchdogInterval() time.Duration
}

// Models loads the local inference models. Loading happens after READY,
// in the background; each model reports itself unavailable with a reason.
type Models interface {
	Load(ctx context.Context, cfg *config.Config, logger *slog.Logger) map[string]error
	Close() error
}

// Options are what Run needs.
type Options struct {
	Config          *config.Config
	Env             config.Env
	Logger          *slog.Logger
	Scrubber        *logging.Scrubber
	Notifier        Notifier
	Models          Models                  // nil: no local models
	Reload          <-chan struct{}         // SIGHUP
	Checks          map[string]health.Check // liveness checks from features: a failure withholds WATCHDOG=1
	ShutdownTimeout time.Duration           // default 10s; the unit's TimeoutStopSec must be larger
	// Clock is the daemon's time: schedules, backoff, debounce, health
	// caching. nil: the wall clock (tests pass a clock.Fake).
	Clock   clock.Clock
	SysRoot string // sysfs for the self-check's thermal zones; default /sys (tests: fixtures)
	// HTTPTimeouts: server.listen's read/write/idle timeouts; zero: defaults (limits.go).
	HTTPTimeouts HTTPTimeouts
	// Channels are the ways into the assistant, built in this order: the
	// one list, which cmd/agent hands over (pkg/channel/builtin). The
	// daemon knows none of them by name.
	Channels     []channelhost.Builder
	FleetChannel string // the channel whose conversations a fleet carries (cmd/agent names it); required with fleet.enabled
}

// Daemon is one running instance.
type Daemon struct {
	egress  *egress.Ledger // every outbound connection (egress.go)
	opts    Options
	logger  *slog.Logger
	clock   clock.Clock
	now     func() time.Time // clock.Now
	started time.Time

	mu  sync.RWMutex
	cfg *config.Config

	store   *store.Store
	checker *health.Checker
	metrics *metrics.Registry

	compMu     sync.RWMutex
	components map[string]string // name -> "ready" | "loading" | "unavailable: reason"

	asst     *assistant.Assistant // assistant.Failed(err) when the pipeline could not start
	channels *channel.Set         // the enabled channels (channels.go)
	fleet    *fleet.Fleet         // the link to the fleet's other boxes; nil on a single box (fleet.go)
	sessions *console.Sessions    // web console sign-ins (console.go)
	probes   *probes              // liveness probe state (probes.go)
	loopPing chan chan struct{}   // the event_loop liveness probe

	serveErr chan error
	httpAddr string
	probe    *http.Client // loopback client for the http liveness check
}

// ErrStartup wraps every failure before READY, so main can tell it from a
// runtime failure.
var ErrStartup = errors.New("startup failed")

// Run starts the daemon and blocks until ctx is cancelled (SIGTERM) or a
// listener fails. It returns nil after a clean stop.
func Run(ctx context.Context, opts Options) error {
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 10 * time.Second
	}
	opts.Clock = clock.Or(opts.Clock)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Daemon{
		opts:       opts,
		logger:     opts.Logger,
		clock:      opts.Clock,
		now:        opts.Clock.Now,
		cfg:        opts.Config,
		components: map[string]string{},
		serveErr:   make(chan error, 2),
		loopPing:   make(chan chan struct{}),
	}
	return d.run(ctx)
}

func (d *Daemon) run(ctx context.Context) error {
	d.started = d.now()
	cfg := d.cfg
	stateDir := cfg.Agent.StateDir

	if was, changed, err := statedir.Tighten(stateDir); changed {
		d.logger.Info("state dir was open to other users; tightened", "dir", stateDir, "was", was, "now", "0750")
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.logger.Warn("state dir permissions", "dir", stateDir, "err", err, "fix", "chmod 750 "+stateDir)
	}
	if err := statedir.Prepare(stateDir); err != nil {
		return fmt.Errorf("%w: %w", ErrStartup, err)
	}
	lock, err := statedir.Acquire(stateDir)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStartup, err)
	}
	defer lock.Release()

	st, err := store.Open(ctx, filepath.Join(stateDir, store.FileName), d.logger.With("component", "store"), store.Options{})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStartup, err)
	}
	d.store = st
	defer st.Close()

	d.metrics = metrics.NewRegistry()
	d.metrics.RegisterProcess(os.Getpagesize())
	d.metrics.Gauge("agent_build_info", "Build information.", metrics.Labels{"version": buildinfo.Version()}).Set(1)
	d.metrics.Gauge("agent_start_time_seconds", "Start time of the daemon since the epoch.", nil).Set(float64(d.started.Unix()))
	defer d.startErrorLog()() // warnings and errors go to error_log from here on
	egressCtx, stopEgress := context.WithCancel(context.Background())
	defer stopEgress() // after everything that dials has stopped: the last counts are flushed
	d.startEgress(egressCtx, cfg, nil)

	d.checker = health.New(2*time.Second, d.now)
	d.checker.RegisterLiveness("database", d.checkDatabaseWritable) // a real write (selfcheck.go)
	d.checker.RegisterLiveness("event_loop", d.checkEventLoop)
	d.checker.RegisterLiveness("runner", d.checkRunner)
	d.checker.RegisterLiveness("http", d.checkServing)
	d.checker.Register("state_dir", func(context.Context) error { return diskfree.Check(stateDir) })
	d.checker.Register("llm", d.checkLLMConfigured)
	for name, c := range d.opts.Checks {
		d.checker.RegisterLiveness(name, c)
	}

	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("%w: server.listen %s: %w (is another agent running? agentctl status)", ErrStartup, cfg.Server.Listen, err)
	}
	d.httpAddr = ln.Addr().String()
	d.probe = &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	adminLn, err := admin.Listen(cfg.Server.AdminSocket)
	if err != nil {
		ln.Close()
		return fmt.Errorf("%w: server.admin_socket: %w", ErrStartup, err)
	}

	// The conversation pipeline. A failure here (e.g. an unusable
	// workspace) disables conversations, not the daemon: health says why.
	d.startAssistant(cfg)
	// The sandbox's probe runs in the background: exec and the video tools
	// come once it passes. It starts before anything that brings turns (the
	// channels, the admin socket), and a turn waits for its decision.
	d.asst.StartSandbox()
	d.sessions = console.NewSessions(console.SessionConfig{Now: d.now, Logger: d.logger.With("component", "console")})
	chCtx, stopChannels := context.WithCancel(context.Background())
	defer stopChannels()
	d.startFleet(cfg)         // fleet.go: before the channels, which take it
	d.startChannels(chCtx)    // channels.go
	defer d.runFleet(chCtx)() // after the channels registered their handlers; stops with them
	// After the channels: a job due now finds them connected.
	if err := d.asst.Start(context.Background()); err != nil {
		if d.asst.Err() == nil {
			d.logger.Error("scheduled jobs are not running", "err", err)
		}
	} else {
		d.setComponent("scheduler", "ready")
	}

	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	httpSrv, limited := d.httpServer(ln, cfg) // timeouts and connection caps: limits.go
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := httpSrv.Serve(limited); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.serveErr <- fmt.Errorf("http: %w", err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := admin.Serve(runCtx, adminLn, d.adminBackend(), d.logger.With("component", "admin")); err != nil {
			d.serveErr <- fmt.Errorf("admin: %w", err)
		}
	}()

	d.notify("READY=1\nSTATUS=serving on " + d.httpAddr)
	d.logger.Info("agent ready", "version", buildinfo.Version(), "listen", d.httpAddr,
		"admin_socket", cfg.Server.AdminSocket, "state_dir", stateDir, "startup", d.now().Sub(d.started).Round(time.Millisecond))

	// A full page check can take seconds on a large database; it runs after
	// READY and reports through /healthz, never by refusing to start.
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.checkIntegrity(runCtx)
	}()
	if d.opts.Models != nil {
		d.setComponent("models", "loading")
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.loadModels(runCtx)
		}()
	}
	if iv := d.opts.Notifier.WatchdogInterval(); iv > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.watchdog(runCtx, iv/2)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.asst.SelfCheckDaily(runCtx)
	}()

	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			d.logger.Info("stopping", "reason", context.Cause(ctx))
			break loop
		case err := <-d.serveErr:
			runErr = err
			d.logger.Error("listener failed, stopping", "err", err)
			break loop
		case <-d.opts.Reload:
			if err := d.Reload(runCtx); err != nil {
				d.logger.Error("reload failed, keeping the running configuration", "err", err)
			}
		case ack := <-d.loopPing:
			close(ack)
		}
	}

	d.notify("STOPPING=1\nSTATUS=stopping")
	shutCtx, cancel := context.WithTimeout(context.Background(), d.opts.ShutdownTimeout)
	defer cancel()
	if err := httpSrv.Shutdown(shutCtx); err != nil {
		d.logger.Warn("http shutdown incomplete, closing connections", "err", err)
		httpSrv.Close()
	}
	// Hijacked connections (WebSockets) are not closed by Shutdown; their
	// turns in flight are cancelled with them.
	if err := d.channels.Close(shutCtx); err != nil {
		d.logger.Warn("channel connections did not close in time", "err", err)
	}
	// Before the runner: a stored message's turn in flight stays pending, to run
	// again after the restart; a send in flight is recorded.
	stopChannels()
	if err := d.channels.Wait(shutCtx); err != nil {
		d.logger.Warn("channels did not stop in time", "err", err)
	}
	if err := d.asst.Close(shutCtx); err != nil {
		d.logger.Warn("conversations did not stop cleanly", "err", err)
	}
	stop()
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-shutCtx.Done():
		d.logger.Warn("background work did not stop in time", "timeout", d.opts.ShutdownTimeout)
	}
	if d.opts.Models != nil {
		if err := d.opts.Models.Close(); err != nil {
			d.logger.Warn("closing models", "err", err)
		}
	}
	d.logger.Info("stopped", "uptime", d.now().Sub(d.started).Round(time.Second))
	return runErr
}

func (d *Daemon) notify(state string) {
	if err := d.opts.Notifier.Notify(state); err != nil {
		d.logger.Warn("sd_notify failed", "err", err)
	}
}

// loadModels loads local models after READY and publishes their state.
func (d *Daemon) loadModels(ctx context.Context) {
	d.notify("STATUS=loading local models")
	start := d.now()
	results := d.opts.Models.Load(ctx, d.config(), d.logger.With("component", "models"))
	d.compMu.Lock()
	delete(d.components, "models")
	d.compMu.Unlock()
	ready := 0
	for name, err := range results {
		gauge := d.metrics.Gauge("agent_component_ready", "1 when a local component is loaded.", metrics.Labels{"component": name})
		if err != nil {
			d.setComponent(name, "unavailable: "+err.Error())
			d.logger.Warn("component unavailable", "component", name, "err", err)
			gauge.Set(0)
			continue
		}
		ready++
		d.setComponent(name, "ready")
		gauge.Set(1)
		name := name
		d.checker.Register(name, func(context.Context) error { return nil })
	}
	for name, err := range results {
		if err != nil {
			err := err
			d.checker.Register(name, func(context.Context) error { return fmt.Errorf("%w: %v", health.ErrDegraded, err) })
		}
	}
	if src, ok := d.opts.Models.(embedderSource); ok {
		d.asst.SetEmbedder(ctx, src.Embedder(), localmodels.EmbeddingID(d.config()))
	}
	d.notify(fmt.Sprintf("STATUS=serving on %s; %d/%d local models ready", d.httpAddr, ready, len(results)))
	d.logger.Info("local models loaded", "ready", ready, "total", len(results), "took", d.now().Sub(start).Round(time.Millisecond))
}

// watchdog sends WATCHDOG=1 only while the health report is healthy, so a
// wedged daemon gets restarted by systemd.
func (d *Daemon) watchdog(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rep := d.checker.Run(ctx)
			if rep.Alive {
				d.notify("WATCHDOG=1")
				continue
			}
			for _, c := range rep.Checks {
				if c.Status == health.Failing {
					d.logger.Error("health check failing; withholding watchdog ping", "check", c.Name, "detail", c.Detail)
				}
			}
		}
	}
}

// checkLLMConfigured reports the remote model as unavailable (degraded, not
// failing: local features keep working) while no API key is configured for
// a provider that needs one.
func (d *Daemon) checkLLMConfigured(context.Context) error {
	return assistant.CheckLLMConfigured(d.config().LLM)
}

// checkServing proves the HTTP server answers: a request to /livez over
// loopback, which runs no other check.
func (d *Daemon) checkServing(ctx context.Context) error {
	host, port, err := net.SplitHostPort(d.httpAddr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", d.httpAddr, err)
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/livez", nil)
	if err != nil {
		return err
	}
	resp, err := d.probe.Do(req)
	if err != nil {
		return fmt.Errorf("HTTP server does not answer: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP server answered /livez with %s", resp.Status)
	}
	return nil
}

// checkIntegrity runs SQLite's quick_check once after start-up and keeps
// a failure visible in health (readiness, not liveness: a restart cannot
// repair pages).
func (d *Daemon) checkIntegrity(ctx context.Context) {
	err := d.store.Check(ctx, false)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		path := d.store.Path()
		// Health first: whoever reads the log line finds it on /healthz.
		d.checker.Register("database_integrity", func(context.Context) error { return err })
		d.logger.Error("database integrity check failed", "err", err,
			"fix", "systemctl stop agent; mv "+path+" "+path+".corrupt (or restore a backup)")
		return
	}
	d.logger.Debug("database integrity ok")
}

func (d *Daemon) setComponent(name, state string) {
	d.compMu.Lock()
	d.components[name] = state
	d.compMu.Unlock()
}

func (d *Daemon) config() *config.Config {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.cfg
}

// Reload re-reads the configuration file. An invalid file changes nothing.
// Settings that need a restart (listen address, state dir, admin socket)
// are reported, not applied.
func (d *Daemon) Reload(ctx context.Context) error {
	old := d.config()
	if old.Path == "" {
		return errors.New("reload: configuration was not loaded from a file")
	}
	next, warns, err := config.Load(old.Path, d.opts.Env)
	if err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	for _, w := range warns {
		d.logger.Warn("config", "warning", w.String())
	}
	for _, k := range config.RestartKeys(old, next) {
		d.logger.Warn("setting changed; takes effect after a restart", "key", k)
	}
	if d.opts.Scrubber != nil {
		d.opts.Scrubber.Set(next.Secrets())
	}
	d.mu.Lock()
	d.cfg = next
	d.mu.Unlock()
	d.egress.SetRules(d.egressRules(next))
	d.asst.Reload(ctx, next) // prompt files, [mcp_servers], the recipients of stored jobs
	d.notify("STATUS=configuration reloaded")
	d.logger.Info("configuration reloaded", "file", next.Path)
	return nil
}

// embedderSource is what the local models offer memory (localmodels.Set).
type embedderSource interface {
	Embedder() *embed.Embedder
}

// startAssistant builds the conversation pipeline; a failure leaves an
// assistant that says why on every call, and health reports it.
func (d *Daemon) startAssistant(cfg *config.Config) {
	deps := assistant.Deps{
		Store:      d.store,
		Config:     d.config,
		Env:        d.opts.Env,
		Logger:     d.logger,
		Scrubber:   d.opts.Scrubber,
		Clock:      d.clock,
		Metrics:    d.metrics,
		Health:     d.checker,
		ErrLog:     d.probes.errlog,
		Send:       d.sendOut,
		Fast:       func(name string) bool { return d.channels != nil && d.channels.FastTurns(name) },
		Components: d.componentStates,
		Started:    d.started,
		SysRoot:    d.opts.SysRoot,
		Egress:     d.egress,
	}
	a, err := assistant.New(cfg, deps)
	if err != nil {
		d.logger.Error("conversation pipeline unavailable", "err", err)
		d.checker.Register("conversations", func(context.Context) error { return err })
		a = assistant.Failed(err, cfg, deps)
	}
	d.asst = a
}

func (d *Daemon) componentStates() map[string]string {
	d.compMu.RLock()
	defer d.compMu.RUnlock()
	out := make(map[string]string, len(d.components))
	for k, v := range d.components {
		out[k] = v
	}
	return out
}
