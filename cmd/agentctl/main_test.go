package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func agentctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb, func(string) (string, bool) { return "", false })
	return code, out.String(), errb.String()
}

func TestDoctorOnBrokenConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(path, []byte("[memory]\ndedup_threshold = 3\n"), 0o600)
	code, out, _ := agentctl(t, "-config", path, "doctor")
	if code != 1 || !strings.HasPrefix(out, "fail  config") || !strings.Contains(out, "memory.dedup_threshold") || !strings.Contains(out, "fix: ") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	code, out, _ = agentctl(t, "-config", path, "--json", "doctor")
	var rep struct {
		OK     bool
		Checks []struct{ Level, Name string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.OK || code != 1 || rep.Checks[0].Level != "fail" {
		t.Fatalf("json exit %d %v: %s", code, err, out)
	}
}

func TestStatusWhenDaemonDown(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	os.WriteFile(path, []byte("[agent]\nstate_dir = \"var\"\n"), 0o600)
	code, _, stderr := agentctl(t, "-config", path, "status")
	if code != 3 || !strings.Contains(stderr, "not running") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

func TestModelsVerifyMissing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	os.WriteFile(path, []byte("[embedding]\nmodel_dir = \"nope\"\n"), 0o600)
	code, out, _ := agentctl(t, "-config", path, "models", "verify")
	if code != 1 || !strings.Contains(out, "missing") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestUnknownCommand(t *testing.T) {
	if code, _, stderr := agentctl(t, "frobnicate"); code != 2 || !strings.Contains(stderr, "unknown command") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}
