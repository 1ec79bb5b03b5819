package assistant

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"agent/pkg/agent"
	"agent/pkg/clock"
	"agent/pkg/config"
	"agent/pkg/conversation"
	"agent/pkg/health"
	"agent/pkg/readdoc"
	"agent/pkg/sandbox"
	"agent/pkg/sandboxsetup"
	"agent/pkg/shell"
	"agent/pkg/tools"
	"agent/pkg/video"
)

// sandboxPart holds the sandbox and the tools that need it. They are
// registered only once the sandbox has proved it works (Probe): without a
// usable bwrap the model is never offered exec or the video tools, and
// nothing runs unsandboxed.
type sandboxPart struct {
	sb *sandbox.Sandbox // nil when the sandbox could not be built
	// folders are what its runs bind (the workspace), for the probe;
	// tempDir is where it keeps its runs' /tmp, moved when its account
	// cannot reach the state dir (sandboxsetup).
	folders sandbox.Folders
	tempDir string
	moved   bool
	// ready is closed when the first probe has decided (StartSandbox runs
	// probes in the background, after READY); done when the probing
	// goroutine has ended; cancel stops it (Close).
	ready     chan struct{}
	readyOnce sync.Once
	done      chan struct{}
	cancel    context.CancelFunc

	mu      sync.Mutex
	started bool
	closed  bool
	err     error // why the tools are not offered; nil once they are
}

// Backoff of the probes after one failed (a timeout on a busy box, a full
// disk): the tools come as soon as one passes.
const (
	probeRetryFirst = 30 * time.Second
	probeRetryMax   = 10 * time.Minute
)

// newSandboxPart builds the sandbox (not yet probed) as sandboxsetup
// derives it from cfg: doctor builds the same one.
func (a *Assistant) newSandboxPart(cfg *config.Config) *sandboxPart {
	p := &sandboxPart{err: errors.New("not checked yet"), ready: make(chan struct{}), done: make(chan struct{}), cancel: func() {}}
	log := a.logger.With("component", "sandbox")
	set, err := sandboxsetup.For(cfg, sandbox.Self(), sandbox.Config{Bwrap: a.d.Bwrap, Clock: a.clock, Logger: log})
	if err != nil {
		p.err = err
		return p
	}
	if set.Moved != nil {
		log.Warn("sandbox temp dir moved out of the state dir: its account cannot reach it", "temp_dir", set.Config.TempDir, "why", set.Moved)
	} else {
		log.Info("sandbox temp dir", "temp_dir", set.Config.TempDir)
	}
	p.folders, p.tempDir, p.moved = set.Folders, set.Config.TempDir, set.Moved != nil
	sb, err := sandbox.New(set.Config)
	if err != nil {
		p.err = err
		return p
	}
	p.sb = sb
	return p
}

// sandboxTools are the tools that run in the sandbox: exec and the video
// tools (trim_video, add_bgm, generate_video).
func (a *Assistant) sandboxTools(cfg *config.Config) []tools.Tool {
	sb := a.sandbox.sb
	ts := []tools.Tool{
		shell.Tool(shell.Config{
			Runner: sb, Spaces: a.spaces, Timeout: cfg.Sandbox.Timeout.Duration,
			Network: sb.NetworkAllowed(), Python: sb.Python(), Skill: a.skillMount,
			Logger: a.logger.With("component", "exec"),
		}),
	}
	return append(ts, video.Tools(video.Config{
		Runner: sb, Spaces: a.spaces, Clock: a.clock,
		Logger: a.logger.With("component", "video"),
	})...)
}

// documentTool is read_document: offered always (Office files, CSV, HTML
// and text are read in the daemon), reading PDFs only while the sandbox
// works.
func (a *Assistant) documentTool() tools.Tool {
	return readdoc.Tool(readdoc.Config{
		Spaces: a.spaces,
		Sandbox: func(ctx context.Context) (readdoc.Runner, error) {
			sb, err := a.readySandbox(ctx)
			if err != nil {
				return nil, err
			}
			return sb, nil
		},
		Logger: a.logger.With("component", "read_document"),
	})
}

// StartSandbox probes the sandbox in the background and, when it works,
// offers its tools. Its state is the "sandbox" health component: degraded,
// with the reason and the fix, while the tools are not offered. The host
// calls it once, before the channels start: a turn waits for the first
// probe's decision (firstProbeWait), so that one in the first moments is
// offered exec when the sandbox works.
func (a *Assistant) StartSandbox() {
	if a.sandbox == nil {
		return
	}
	p := a.sandbox
	ctx, cancel := context.WithCancel(context.Background())
	p.mu.Lock()
	if p.started || p.closed {
		p.mu.Unlock()
		cancel()
		return
	}
	p.cancel, p.started = cancel, true
	p.mu.Unlock()
	a.d.Health.Register("sandbox", func(context.Context) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.err != nil {
			return fmt.Errorf("%w: exec, documents (PDF), video and custom tools are not offered: %v", health.ErrDegraded, p.err)
		}
		return nil
	})
	go func() {
		defer close(p.done)
		defer p.decided()
		a.probeSandbox(ctx)
	}()
}

func (p *sandboxPart) decided() { p.readyOnce.Do(func() { close(p.ready) }) }

// probeSandbox probes until one probe passes (backing off between them),
// then registers the tools. Without bwrap at all it stops at once: a
// restart after installing it brings the tools.
func (a *Assistant) probeSandbox(ctx context.Context) {
	p := a.sandbox
	const off = "sandbox unavailable: exec, PDF reading and the video tools are not offered (agentctl doctor explains)"
	if p.sb == nil {
		a.logger.Warn(off, "err", p.err)
		return
	}
	for wait := probeRetryFirst; ; wait = min(2*wait, probeRetryMax) {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := p.sb.ProbeFolders(pctx, p.folders)
		cancel()
		if ctx.Err() != nil {
			return // closing: nothing to report
		}
		if err == nil {
			err = a.Register(a.sandboxTools(a.config())...)
		}
		if err == nil && a.custom != nil {
			err = a.custom.Activate() // create_tool and the live custom tools
		}
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		p.decided()
		if err == nil {
			lim := p.sb.Limits()
			a.logger.Info("sandbox ready", "network", p.sb.NetworkAllowed(), "timeout", lim.Timeout, "memory_mb", lim.MemoryMB, "max_processes", lim.MaxProcs)
			return
		}
		a.logger.Warn(off, "err", err, "retry_in", wait)
		if clock.Sleep(ctx, a.clock, wait) != nil {
			return
		}
	}
}

// stop cancels the probing and waits for it.
func (p *sandboxPart) stop(ctx context.Context) {
	p.mu.Lock()
	cancel, started := p.cancel, p.started
	p.closed = true
	p.mu.Unlock()
	cancel()
	if started {
		select {
		case <-p.done:
		case <-ctx.Done():
		}
	}
	if p.moved {
		_ = os.Remove(p.tempDir) // /var/tmp is not ours to litter; empty once no run is left
	}
}

// firstProbeWait bounds how long a turn waits for the first probe (a
// probe takes a tenth of a second on an idle box; itself bounded at 20 s):
// a turn on a box too loaded to probe in this time goes on without exec
// rather than keep its sender waiting, and gets it from the next turn on.
const firstProbeWait = 10 * time.Second

// afterFirstProbe holds each turn until the first sandbox probe started by
// StartSandbox has decided: the turn's tool list then has exec when the
// sandbox works. Once decided it holds nothing.
func (a *Assistant) afterFirstProbe(next conversation.Turner) conversation.Turner {
	return probeTurner{next: next, a: a}
}

type probeTurner struct {
	next conversation.Turner
	a    *Assistant
}

func (t probeTurner) Turn(ctx context.Context, in agent.Input, emit func(agent.Event)) (agent.Output, error) {
	t.a.awaitFirstProbe(ctx)
	return t.next.Turn(ctx, in, emit)
}

// awaitFirstProbe returns when the first probe has decided, ctx ends or
// firstProbeWait has passed; at once when no probe was started.
func (a *Assistant) awaitFirstProbe(ctx context.Context) {
	p := a.sandbox
	if p == nil {
		return
	}
	select {
	case <-p.ready:
		return
	default:
	}
	p.mu.Lock()
	started, closed := p.started, p.closed
	p.mu.Unlock()
	if !started || closed {
		return
	}
	timer := a.clock.NewTimer(firstProbeWait)
	defer timer.Stop()
	select {
	case <-p.ready:
	case <-ctx.Done():
	case <-timer.C():
		a.logger.Warn("a turn went on without waiting longer for the sandbox probe", "waited", firstProbeWait)
	}
}

// SandboxReady is closed once the first sandbox probe started by
// StartSandbox has decided whether the sandboxed tools are offered.
func (a *Assistant) SandboxReady() <-chan struct{} {
	if a.sandbox == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return a.sandbox.ready
}

// readySandbox is Sandbox once the first probe has decided: a turn right
// after start waits for it (the probe is bounded: 30 s).
func (a *Assistant) readySandbox(ctx context.Context) (*sandbox.Sandbox, error) {
	select {
	case <-a.SandboxReady():
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return a.Sandbox()
}

// Sandbox is the sandbox when it works, or nil and why not.
func (a *Assistant) Sandbox() (*sandbox.Sandbox, error) {
	if a.sandbox == nil {
		return nil, a.unavailable()
	}
	p := a.sandbox
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return nil, p.err
	}
	return p.sb, nil
}
