package admin

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type consoleBackend struct {
	fakeBackend
	links int
}

func (b *consoleBackend) ConsoleLink(context.Context) (ConsoleLink, error) {
	b.links++
	return ConsoleLink{URL: "http://127.0.0.1:8080/console?code=abc", ExpiresAt: time.Unix(1700000120, 0).UTC(), Voice: true}, nil
}

func (b *consoleBackend) ConsoleEnd(context.Context) (ConsoleEnded, error) {
	return ConsoleEnded{Sessions: 2, Connections: 1}, nil
}

func TestConsoleAPI(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := &consoleBackend{}
	go Serve(ctx, ln, b, testLogger())
	c := NewClient(path)
	l, err := c.ConsoleLink(context.Background())
	if err != nil || l.URL != "http://127.0.0.1:8080/console?code=abc" || !l.ExpiresAt.Equal(time.Unix(1700000120, 0)) || !l.Voice || b.links != 1 {
		t.Fatalf("ConsoleLink = %+v, %v", l, err)
	}
	if e, err := c.ConsoleEnd(context.Background()); err != nil || e.Sessions != 2 || e.Connections != 1 {
		t.Fatalf("ConsoleEnd = %+v, %v", e, err)
	}

	// A daemon without the console answers 501, saying so.
	path2 := filepath.Join(t.TempDir(), "agent.sock")
	ln2, err := Listen(path2)
	if err != nil {
		t.Fatal(err)
	}
	go Serve(ctx, ln2, fakeBackend{}, testLogger())
	if _, err := NewClient(path2).ConsoleLink(context.Background()); err == nil || !strings.Contains(err.Error(), "web console sign-in") {
		t.Fatalf("without a console: %v", err)
	}
	if _, err := NewClient(filepath.Join(t.TempDir(), "none.sock")).ConsoleLink(context.Background()); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("no daemon: %v", err)
	}
}
