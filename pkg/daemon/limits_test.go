package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"agent/pkg/admin"
	"agent/pkg/channel"
	"agent/pkg/channel/builtin"
	"agent/pkg/config"
	"agent/pkg/connlimit"
	"agent/pkg/console"
	"agent/pkg/metrics"
	"agent/pkg/wecom/wecomtest"
)

// limitsDaemon runs the daemon with WeCom enabled (against a fake API),
// a voice token and the given timeouts; it returns the HTTP address and the
// admin socket.
func limitsDaemon(t *testing.T, to HTTPTimeouts, server, extra string) (addr, sock string) {
	t.Helper()
	api := wecomtest.NewServer("wxcorp", "secret", 1000002)
	t.Cleanup(api.Close)
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	body := fmt.Sprintf(`[server]
listen = "127.0.0.1:0"
%s
[agent]
state_dir = "var"
workspace = "ws"
[security]
dm_policy = "open"
[voice]
token = "voice-secret"
[wecom]
enabled = true
corp_id = "wxcorp"
corp_secret = "secret"
agent_id = 1000002
token = "QDG6eK"
encoding_aes_key = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
api_base = %q
%s`, server, api.URL, extra)
	os.WriteFile(path, []byte(body), 0o600)
	cfg, _, err := config.Load(path, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	n := newFakeNotifier(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: cfg, Notifier: n, Channels: builtin.Channels(), HTTPTimeouts: to})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	n.waitFor(t, "READY=1", 1)
	n.mu.Lock()
	ready := n.msgs[0]
	n.mu.Unlock()
	return strings.TrimSpace(ready[strings.Index(ready, "serving on ")+len("serving on "):]), cfg.Server.AdminSocket
}

// waitClosed reads from c until the server closes it and returns what the
// server sent. The deadline is a hang guard: the timeouts under test are
// a hundred times shorter.
func waitClosed(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("the server did not close the connection: %v (read %q)", err, b)
	}
	return string(b)
}

// Slow headers and a trickled body on /wecom/callback are cut off by the
// server's timeouts; a WebSocket lives on past them (net/http clears the
// deadlines on hijack, the voice channel keeps its own).
func TestHTTPTimeoutsCutSlowClientsNotWebSockets(t *testing.T) {
	llm := streamingLLM(t)
	to := HTTPTimeouts{ReadHeader: 100 * time.Millisecond, Read: 300 * time.Millisecond, Write: 300 * time.Millisecond, Idle: 300 * time.Millisecond}
	addr, _ := limitsDaemon(t, to, "", "[llm]\nprovider = \"custom\"\nmodel = \"fake\"\nbase_url = \""+llm.BaseURL()+"\"\n")

	slowHeaders, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slowHeaders.Close()
	io.WriteString(slowHeaders, "POST /wecom/callback?msg_signature=x&timestamp=1&nonce=n HTTP/1.1\r\nHost: "+addr+"\r\n")
	waitClosed(t, slowHeaders)

	slowBody, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slowBody.Close()
	io.WriteString(slowBody, "POST /wecom/callback?msg_signature=x&timestamp=1&nonce=n HTTP/1.1\r\nHost: "+addr+"\r\nContent-Length: 1000\r\n\r\n<xml>")
	stop := make(chan struct{})
	defer close(stop)
	go func() { // one byte at a time, never the whole body
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond): // pacing the trickle
				if _, err := slowBody.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	if got := waitClosed(t, slowBody); strings.Contains(got, " 200 ") {
		t.Errorf("the trickled body was answered 200: %q", got)
	}

	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/voice", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.WriteJSON(map[string]any{"type": "hello", "token": "voice-secret", "device": "panel", "protocol": "agent.voice.v1"})
	if m := readFrame(t, ws); m["type"] != "ready" {
		t.Fatalf("hello answered %v", m)
	}
	time.Sleep(3 * to.Read) // idle past every HTTP timeout: the test is that nothing happens
	ws.WriteJSON(map[string]string{"type": "text", "text": "still there?"})
	for {
		m := readFrame(t, ws)
		if m["type"] != "reply" {
			t.Fatalf("got %v after the HTTP timeouts passed; want reply frames", m)
		}
		if m["final"] == true {
			break
		}
	}
}

// The server for server.listen carries the timeouts and the caps.
func TestHTTPServerSettings(t *testing.T) {
	cfg := testConfig(t)
	cfg.Server.MaxConns, cfg.Server.MaxConnsPerClient = 512, 32
	channels, _ := channel.NewSet(nil, nil)
	d := &Daemon{logger: slog.New(slog.DiscardHandler), now: time.Now, cfg: cfg, metrics: metrics.NewRegistry(),
		channels: channels, sessions: console.NewSessions(console.SessionConfig{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv, lim := d.httpServer(ln, cfg)
	if srv.ReadHeaderTimeout != 5*time.Second || srv.ReadTimeout != 10*time.Second || srv.WriteTimeout != 30*time.Second ||
		srv.IdleTimeout != time.Minute || srv.MaxHeaderBytes != 64<<10 || srv.ConnState == nil || srv.ConnContext == nil {
		t.Errorf("server settings: header %v read %v write %v idle %v max header %d", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
	got := lim.Limits()
	if nofile, ok := connlimit.NoFile(); ok && nofile >= 512+fdReserve && got.Max != 512 {
		t.Errorf("max %d; want server.max_conns 512", got.Max)
	}
	if got.PerClient != 32 || got.Reserve != 8 {
		t.Errorf("per client %d reserve %d; want 32 and 512/64", got.PerClient, got.Reserve)
	}
}

// Voice connections are hijacked, which the listener never evicts: with the ordinary slots all taken by them a
// newcomer lands on a reserved slot, where /healthz and /livez answer and
// everything else gets 503. The admin socket is not counted at all.
func TestReservedSlotServesHealthOnly(t *testing.T) {
	addr, sock := limitsDaemon(t, HTTPTimeouts{}, "max_conns = 16\nmax_conns_per_client = 16", "")
	_, port, _ := net.SplitHostPort(addr)
	for i := range 14 { // 16 - a reserve of 2; 7 from each of two addresses (8 pre-hello sockets each at most)
		src := []string{"127.0.0.2", "127.0.0.3"}[i%2]
		nd := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		d := websocket.Dialer{NetDialContext: nd.DialContext}
		ws, _, err := d.Dial("ws://127.0.0.1:"+port+"/voice", nil)
		if err != nil {
			t.Fatalf("voice socket %d from %s: %v", i, src, err)
		}
		defer ws.Close()
		// Past the hello: a device, which stays (a socket that says nothing
		// would be closed after the hello timeout).
		ws.WriteJSON(map[string]any{"type": "hello", "token": "voice-secret", "device": fmt.Sprintf("panel-%d", i), "protocol": "agent.voice.v1"})
		if m := readFrame(t, ws); m["type"] != "ready" {
			t.Fatalf("voice socket %d: hello answered %v", i, m)
		}
	}
	get := func(method, path string) (code int, closed bool) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\n\r\n", method, path, addr)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Close
	}
	if code, closed := get("GET", "/healthz"); code != 200 || !closed {
		t.Errorf("/healthz on a reserved slot: %d, Connection: close %v; want 200 and close", code, closed)
	}
	if code, _ := get("GET", "/metrics"); code != http.StatusServiceUnavailable {
		t.Errorf("/metrics on a reserved slot: %d; want 503", code)
	}
	if code, _ := get("GET", "/livez"); code != 200 {
		t.Errorf("/livez on a reserved slot: %d", code)
	}
	if code, _ := get("POST", "/wecom/callback?msg_signature=x&timestamp=1&nonce=n"); code != http.StatusServiceUnavailable {
		t.Errorf("/wecom/callback on a reserved slot: %d; want 503", code)
	}
	if _, err := admin.NewClient(sock).Status(context.Background()); err != nil {
		t.Errorf("admin socket: %v", err)
	}
}
