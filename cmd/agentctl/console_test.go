package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"agent/pkg/admin"
)

type consoleBackend struct{ memBackend }

func (consoleBackend) ConsoleLink(context.Context) (admin.ConsoleLink, error) {
	return admin.ConsoleLink{URL: "http://127.0.0.1:8080/console?code=c0de", ExpiresAt: time.Now().Add(2 * time.Minute), Voice: true}, nil
}

func (consoleBackend) ConsoleEnd(context.Context) (admin.ConsoleEnded, error) {
	return admin.ConsoleEnded{Sessions: 1, Connections: 2}, nil
}

func TestConsoleCommand(t *testing.T) {
	path := serveAdmin(t, &consoleBackend{})
	code, out, errs := agentctl(t, "-config", path, "console")
	if code != 0 || out != "http://127.0.0.1:8080/console?code=c0de\n" || !strings.Contains(errs, "works once") {
		t.Fatalf("console: %d %q %q", code, out, errs)
	}
	if code, out, _ := agentctl(t, "-config", path, "--json", "console"); code != 0 || !strings.Contains(out, `"url": "http://127.0.0.1:8080/console?code=c0de"`) {
		t.Fatalf("console --json: %d %q", code, out)
	}
	if code, out, _ := agentctl(t, "-config", path, "console", "end"); code != 0 || out != "ended 1 console session(s), closed 2 voice connection(s)\n" {
		t.Fatalf("console end: %d %q", code, out)
	}
	if code, _, _ := agentctl(t, "-config", path, "console", "now"); code != 2 {
		t.Errorf("console now: exit %d, want 2", code)
	}
}
