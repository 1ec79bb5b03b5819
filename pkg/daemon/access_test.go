package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"agent/pkg/admin"
)

// TestVoicePolicyReloadAppliesToNextTurn: a device admitted by allow_from
// loses its next turn when a reload takes it off the list (no revoke, no
// reconnect: the policy is asked before every turn).
func TestVoicePolicyReloadAppliesToNextTurn(t *testing.T) {
	llmSrv := streamingLLM(t)
	dir := t.TempDir()
	llm := "[llm]\nprovider = \"custom\"\nmodel = \"fake\"\nbase_url = \"" + llmSrv.BaseURL() + "\"\n"
	addr, _ := startDaemonIn(t, dir, llm+"[voice]\ntoken = \"device-secret-0123456789\"\n[security]\ndm_policy = \"allowlist\"\nallow_from = [\"voice:kitchen-panel\"]\n")
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/voice", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.WriteJSON(map[string]any{"type": "hello", "token": "device-secret-0123456789", "device": "kitchen-panel", "profile": "hardware"})
	if m := readFrame(t, ws); m["type"] != "ready" {
		t.Fatalf("hello: %v", m)
	}
	ws.WriteJSON(map[string]string{"type": "text", "text": "hi"})
	for {
		if m := readFrame(t, ws); m["type"] != "reply" {
			t.Fatalf("turn while allowed: %v", m)
		} else if m["final"] == true {
			break
		}
	}
	path := filepath.Join(dir, "config.toml")
	b, _ := os.ReadFile(path)
	os.WriteFile(path, []byte(strings.Replace(string(b), `allow_from = ["voice:kitchen-panel"]`, `allow_from = ["voice:other"]`, 1)), 0o600)
	if err := admin.NewClient(filepath.Join(dir, "var", "agent.sock")).Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	ws.WriteJSON(map[string]string{"type": "text", "text": "write SOUL.md"})
	if m := readFrame(t, ws); m["code"] != "forbidden" || m["fatal"] != true {
		t.Fatalf("turn after the reload: %v; want a fatal forbidden", m)
	}
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, _, err = ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation {
		t.Fatalf("after the refused turn: %v; want close 1008", err)
	}
}

// TestConsoleEnd: agentctl console end signs the console out and closes
// its voice connection; the cookie is refused afterwards.
func TestConsoleEnd(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "var", "agent.sock")
	addr, _ := startDaemonIn(t, dir, "")
	ws, key := consoleDial(t, addr, sock)
	defer ws.Close()
	ws.WriteJSON(map[string]any{"type": "hello", "console_key": key})
	if m := readFrame(t, ws); m["type"] != "ready" || m["session"] != "p2p:admin:console" {
		t.Fatalf("hello: %v", m)
	}
	e, err := admin.NewClient(sock).ConsoleEnd(context.Background())
	if err != nil || e.Sessions != 1 || e.Connections != 1 {
		t.Fatalf("ConsoleEnd = %+v, %v", e, err)
	}
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, _, err := ws.ReadMessage(); err == nil {
		t.Fatal("console connection open after console end")
	}
}

// TestProxyHeadersRemoveLoopbackTrust: /metrics and the health details are
// for the box itself; a request relayed by a proxy or tunnel on the box
// (proxy headers) or naming a public host is not the box itself.
func TestProxyHeadersRemoveLoopbackTrust(t *testing.T) {
	addr, _ := startDaemonServer(t, t.TempDir(), "allowed_hosts = [\"agent.example.com\"]\n", "")
	get := func(path, host string, hdr ...string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		if host != "" {
			req.Host = host
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/metrics", ""); code != 200 {
		t.Fatalf("/metrics from the box: %d", code)
	}
	for _, h := range [][]string{
		{"X-Forwarded-For", "203.0.113.7"}, {"Forwarded", "for=203.0.113.7"}, {"X-Real-IP", "203.0.113.7"},
		{"X-Forwarded-Host", "agent.example.com"}, {"Via", "1.1 tunnel"},
	} {
		if code, _ := get("/metrics", "", h...); code != http.StatusForbidden {
			t.Errorf("/metrics with %s: %d; want 403", h[0], code)
		}
		if _, body := get("/healthz", "", h...); strings.Contains(body, `"checks":[`) {
			t.Errorf("/healthz with %s shows details: %s", h[0], body)
		}
	}
	// An allowed public name is served, but it is not the box itself.
	if code, _ := get("/metrics", "agent.example.com"); code != http.StatusForbidden {
		t.Errorf("/metrics for the public name: %d; want 403", code)
	}
	if _, body := get("/healthz", ""); !strings.Contains(body, `"checks":[`) {
		t.Errorf("/healthz from the box lacks details: %s", body)
	}
}

// voiceHelloFrame says hello on a fresh connection and returns the answer.
func voiceHelloFrame(t *testing.T, addr string, hello map[string]any) map[string]any {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/voice", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	hello["type"] = "hello"
	ws.WriteJSON(hello)
	return readFrame(t, ws)
}

// TestVoiceOwnerNameCannotBeClaimed: the names in a hello are claims
// anyone with voice.token can make; one listed in agent.owners is refused,
// as device or as user, whatever the DM policy.
func TestVoiceOwnerNameCannotBeClaimed(t *testing.T) {
	addr, _ := startDaemonIn(t, t.TempDir(), "owners = [\"wecom:zhangsan\", \"voice:boss-phone\"]\n[voice]\ntoken = \"device-secret-0123456789\"\n[security]\ndm_policy = \"open\"\n")
	for _, hello := range []map[string]any{
		{"device": "cheap-panel-in-lobby", "user": "boss-phone"},
		{"user": "boss-phone"},
		{"device": "boss-phone"},
	} {
		hello["token"] = "device-secret-0123456789"
		m := voiceHelloFrame(t, addr, hello)
		if m["code"] != "forbidden" || m["fatal"] != true || !strings.Contains(fmt.Sprint(m["message"]), "agent.owners") {
			t.Errorf("hello %v: %v; want a fatal forbidden naming agent.owners", hello, m)
		}
	}
	if m := voiceHelloFrame(t, addr, map[string]any{"token": "device-secret-0123456789", "device": "cheap-panel-in-lobby"}); m["type"] != "ready" {
		t.Errorf("an ordinary device under dm_policy open: %v", m)
	}
}

// TestVoiceEveryNameMustBeAdmitted: an approved device does not bring an
// unapproved user in with it (the turns would run as that user), nor an
// approved user an unknown device.
func TestVoiceEveryNameMustBeAdmitted(t *testing.T) {
	addr, _ := startDaemonIn(t, t.TempDir(), "[voice]\ntoken = \"device-secret-0123456789\"\n[security]\ndm_policy = \"allowlist\"\nallow_from = [\"voice:kitchen-panel\", \"voice:alice\"]\n")
	for _, tc := range []struct {
		hello map[string]any
		want  string
	}{
		{map[string]any{"device": "kitchen-panel"}, "ready"},
		{map[string]any{"device": "kitchen-panel", "user": "alice"}, "ready"},
		{map[string]any{"device": "kitchen-panel", "user": "bob"}, "forbidden"},
		{map[string]any{"device": "rogue", "user": "alice"}, "forbidden"},
	} {
		tc.hello["token"] = "device-secret-0123456789"
		m := voiceHelloFrame(t, addr, tc.hello)
		got := fmt.Sprint(m["type"])
		if got == "error" {
			got = fmt.Sprint(m["code"])
		}
		if got != tc.want {
			t.Errorf("hello %v: %v; want %s", tc.hello, m, tc.want)
		}
	}
}
