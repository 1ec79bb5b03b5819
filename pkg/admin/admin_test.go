package admin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

type fakeBackend struct{ reloadErr error }

func (f fakeBackend) Status(context.Context) Status {
	return Status{Version: "test", PID: 42, Healthy: true}
}
func (f fakeBackend) Reload(context.Context) error { return f.reloadErr }
func (f fakeBackend) Send(_ context.Context, r SendRequest) (SendResult, error) {
	return SendResult{Replies: []string{r.To + ": " + r.Text}}, nil
}
func (f fakeBackend) Sessions(context.Context) ([]Session, error) {
	return []Session{{ID: 1, Key: "p2p:admin:alice", Messages: 2, Open: true}}, nil
}

func TestSocketModeAndRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := st.Mode().Perm(); mode != 0o600 {
		t.Fatalf("socket mode = %o; want 600", mode)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, fakeBackend{reloadErr: errors.New("bad config")}, testLogger()) }()

	c := NewClient(path)
	got, err := c.Status(context.Background())
	if err != nil || got.PID != 42 {
		t.Fatalf("Status = %+v, %v", got, err)
	}
	if err := c.Reload(context.Background()); err == nil || err.Error() != "admin: POST /v1/reload: bad config" {
		t.Fatalf("Reload err = %v", err)
	}
	if res, err := c.Send(context.Background(), SendRequest{Channel: "admin", To: "alice", Text: "hi"}); err != nil || len(res.Replies) != 1 || res.Replies[0] != "alice: hi" {
		t.Fatalf("Send = %+v, %v", res, err)
	}
	if ss, err := c.Sessions(context.Background()); err != nil || len(ss) != 1 || ss[0].Key != "p2p:admin:alice" {
		t.Fatalf("Sessions = %+v, %v", ss, err)
	}
	// A live socket is never replaced.
	if _, err := Listen(path); err == nil {
		t.Fatal("second Listen replaced a live socket")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestStaleSocketReplacedAndNotRunning(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	// Simulate a crash: the file stays, nobody listens.
	ln.(interface{ SetUnlinkOnClose(bool) }).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := NewClient(path).Status(context.Background()); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("err = %v; want ErrNotRunning", err)
	}
	ln2, err := Listen(path)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	ln2.Close()
}

func TestListenRefusesNonSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	os.WriteFile(path, []byte("precious"), 0o600)
	if _, err := Listen(path); err == nil {
		t.Fatal("Listen replaced a regular file")
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Fatal("regular file was touched")
	}
}
