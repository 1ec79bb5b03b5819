package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"agent/pkg/channel/builtin"
	"agent/pkg/config"
	"agent/pkg/health"
)

// fakeNotifier records sd_notify messages.
type fakeNotifier struct {
	mu       sync.Mutex
	msgs     []string
	interval time.Duration
	more     chan struct{}
}

func newFakeNotifier(interval time.Duration) *fakeNotifier {
	return &fakeNotifier{interval: interval, more: make(chan struct{}, 1)}
}

func (f *fakeNotifier) Notify(state string) error {
	f.mu.Lock()
	f.msgs = append(f.msgs, state)
	f.mu.Unlock()
	select {
	case f.more <- struct{}{}:
	default:
	}
	return nil
}

func (f *fakeNotifier) WatchdogInterval() time.Duration { return f.interval }

func (f *fakeNotifier) count(want string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.msgs {
		if strings.Contains(m, want) {
			n++
		}
	}
	return n
}

// waitFor blocks until want has been sent n times; the deadline guards
// against a hang only.
func (f *fakeNotifier) waitFor(t testing.TB, want string, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for f.count(want) < n {
		select {
		case <-f.more:
		case <-deadline:
			t.Fatalf("%q sent %d times; want %d", want, f.count(want), n)
		}
	}
}

func testConfig(t *testing.T) *config.Config {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	os.WriteFile(path, []byte("[server]\nlisten = \"127.0.0.1:0\"\n[agent]\nstate_dir = \"var\"\n"), 0o600)
	cfg, _, err := config.Load(path, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// fakeLLMConfig loads a config with a loopback listener, the model at
// baseURL (provider "custom", model "fake") and state in a temporary
// directory; agent continues the [agent] table and may add more tables.
func fakeLLMConfig(t *testing.T, baseURL, agent string) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.toml")
	body := fmt.Sprintf("[server]\nlisten = \"127.0.0.1:0\"\n[llm]\nprovider = \"custom\"\nmodel = \"fake\"\nbase_url = %q\n[agent]\nstate_dir = \"var\"\n%s", baseURL, agent)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(path, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestWatchdogOnlyWhileHealthy(t *testing.T) {
	var healthy atomic.Bool
	probed := make(chan struct{}, 100)
	n := newFakeNotifier(20 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{
			Config:   testConfig(t),
			Notifier: n,
			Checks: map[string]health.Check{"probe": func(context.Context) error {
				select {
				case probed <- struct{}{}:
				default:
				}
				if !healthy.Load() {
					return errors.New("wedged")
				}
				return nil
			}},
		})
	}()
	n.waitFor(t, "READY=1", 1)
	// Three watchdog rounds evaluate the failing check: no ping may be sent.
	for i := 0; i < 3; i++ {
		<-probed
	}
	if got := n.count("WATCHDOG=1"); got != 0 {
		t.Fatalf("sent %d WATCHDOG=1 while a check failed", got)
	}
	healthy.Store(true)
	n.waitFor(t, "WATCHDOG=1", 2)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n.count("STOPPING=1") != 1 {
		t.Fatal("no STOPPING=1")
	}
}

func TestHealthzReportsFailingCheck(t *testing.T) {
	n := newFakeNotifier(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: testConfig(t), Notifier: n, Channels: builtin.Channels(),
			Checks: map[string]health.Check{"llm_budget": func(context.Context) error { return errors.New("exhausted") }}})
	}()
	n.waitFor(t, "READY=1", 1)
	n.mu.Lock()
	ready := n.msgs[0]
	n.mu.Unlock()
	addr := ready[strings.Index(ready, "serving on ")+len("serving on "):]
	resp, err := http.Get("http://" + strings.TrimSpace(addr) + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d; want 503", resp.StatusCode)
	}
	cancel()
	<-done
}
