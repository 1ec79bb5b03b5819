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
	"agent/pkg/channel/builtin"
	"agent/pkg/config"
	"agent/pkg/console/consoletest"
	"agent/pkg/llm/llmtest"
	"agent/pkg/nativetest"
)

// streamingLLM answers every request with "Hello there", streamed in two
// pieces when asked to stream.
func streamingLLM(t *testing.T) *llmtest.Server {
	t.Helper()
	return llmtest.NewFunc(t, func(*llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Chunks: []string{"Hello", " there"}}
	})
}

// startDaemon runs the daemon on extra config and returns its address.
func startDaemon(t *testing.T, extra string) (addr string, stop func()) {
	t.Helper()
	return startDaemonIn(t, t.TempDir(), extra)
}

// startDaemonIn is startDaemon with its files in dir.
func startDaemonIn(t *testing.T, dir, extra string) (addr string, stop func()) {
	t.Helper()
	return startDaemonServer(t, dir, "", extra)
}

// startDaemonServer is startDaemonIn with more [server] keys.
func startDaemonServer(t *testing.T, dir, server, extra string) (addr string, stop func()) {
	t.Helper()
	path := filepath.Join(dir, "config.toml")
	os.WriteFile(path, []byte("[server]\nlisten = \"127.0.0.1:0\"\n"+server+"[agent]\nstate_dir = \"var\"\nworkspace = \"ws\"\n"+extra), 0o600)
	cfg, _, err := config.Load(path, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	n := newFakeNotifier(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: cfg, Notifier: n, Channels: builtin.Channels(), Logger: testLogger()})
	}()
	n.waitFor(t, "READY=1", 1)
	n.mu.Lock()
	ready := n.msgs[0]
	n.mu.Unlock()
	addr = strings.TrimSpace(ready[strings.Index(ready, "serving on ")+len("serving on "):])
	var once bool
	stop = func() {
		if once {
			return
		}
		once = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return addr, stop
}

func readFrame(t *testing.T, ws *websocket.Conn) map[string]any {
	t.Helper()
	ws.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang guard only
	var m map[string]any
	if err := ws.ReadJSON(&m); err != nil {
		t.Fatalf("read: %v", err)
	}
	return m
}

// consoleDial signs in as `agentctl console` does (a link from the admin
// socket sock, opened once) and dials /voice with the session cookie; it
// returns the session key from the redirect's fragment, which the hello
// must carry as console_key.
func consoleDial(t *testing.T, addr, sock string) (*websocket.Conn, string) {
	t.Helper()
	l, err := admin.NewClient(sock).ConsoleLink(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(l.URL, "http://"+addr+"/console?code=") {
		t.Fatalf("link %q is not on %s", l.URL, addr)
	}
	resp, cookie, key := consoletest.SignIn(t, l.URL)
	if resp.StatusCode != http.StatusSeeOther || cookie == nil || key == "" {
		t.Fatalf("sign-in link: %s, location %q, cookies %v", resp.Status, resp.Header.Get("Location"), resp.Cookies())
	}
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/voice", http.Header{"Cookie": {cookie.String()}})
	if err != nil {
		t.Fatal(err)
	}
	return ws, key
}

func TestVoiceChannelThroughPipeline(t *testing.T) {
	llmSrv := streamingLLM(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "var", "agent.sock")
	addr, stop := startDaemonIn(t, dir, "[llm]\nprovider = \"custom\"\nmodel = \"fake\"\nbase_url = \""+llmSrv.BaseURL()+"\"\n")

	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "agent console") {
		t.Fatalf("GET / = %d %.80q; want the console", resp.StatusCode, body)
	}

	// No voice.token: a hello without a console session is refused, on
	// loopback too.
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/voice", nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.WriteJSON(map[string]any{"type": "hello", "user": "alice", "profile": "voice", "sample_rate": 16000, "protocol": "agent.voice.v1"})
	if m := readFrame(t, ws); m["code"] != "unauthorized" || m["fatal"] != true {
		t.Fatalf("hello without token or session answered %v; want a fatal unauthorized", m)
	}
	ws.Close()

	// The console signed in with agentctl console is the operator.
	ws, key := consoleDial(t, addr, sock)
	defer ws.Close()
	ws.WriteJSON(map[string]any{"type": "hello", "user": "alice", "profile": "voice", "sample_rate": 16000, "protocol": "agent.voice.v1", "console_key": key})
	if m := readFrame(t, ws); m["type"] != "ready" || m["session"] != "p2p:admin:console" {
		t.Fatalf("hello answered %v", m)
	}
	mresp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mbody, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, want := range []string{"agent_voice_connections 1\n", "agent_asr_workers 0\n", "agent_voice_utterances 0\n"} {
		if !strings.Contains(string(mbody), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	ws.WriteJSON(map[string]string{"type": "text", "text": "hi"})
	var pieces []string
	for {
		m := readFrame(t, ws)
		if m["type"] != "reply" {
			t.Fatalf("got %v; want reply frames", m)
		}
		if m["final"] == true {
			if m["text"] != "Hello there" {
				t.Errorf("final reply %q", m["text"])
			}
			break
		}
		pieces = append(pieces, m["text"].(string))
	}
	if strings.Join(pieces, "") != "Hello there" {
		t.Errorf("streamed pieces %q; want the reply streamed", pieces)
	}

	// No models in this daemon: speech gets asr_unavailable, the
	// connection stays.
	pcm := make([]byte, 32000)
	for i := 0; i < len(pcm); i += 2 {
		if (i/40)%2 == 0 {
			pcm[i+1] = 0x30
		} else {
			pcm[i+1] = 0xd0
		}
	}
	ws.WriteMessage(websocket.BinaryMessage, pcm)
	ws.WriteJSON(map[string]string{"type": "end"})
	if m := readFrame(t, ws); m["type"] != "error" || m["code"] != "asr_unavailable" {
		t.Fatalf("got %v; want asr_unavailable", m)
	}

	// Stopping the daemon closes the connection.
	stop()
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, _, err := ws.ReadMessage(); err == nil {
		t.Fatal("connection open after the daemon stopped")
	}
}

func TestVoiceDisabled(t *testing.T) {
	addr, _ := startDaemon(t, "[voice]\nenabled = false\n")
	resp, err := http.Get("http://" + addr + "/voice")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /voice with voice disabled = %d; want 404", resp.StatusCode)
	}
}

// TestVoicePairing: with a voice.token a client is a device, subject to
// security.dm_policy: under "pairing" an unknown device is told a code
// and admitted once the operator approves it (agentctl pair approve).
func TestVoicePairing(t *testing.T) {
	dir := t.TempDir()
	addr, _ := startDaemonIn(t, dir, "[voice]\ntoken = \"device-secret-0123456789\"\n")
	hello := func() map[string]any {
		ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/voice", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		ws.WriteJSON(map[string]any{"type": "hello", "token": "device-secret-0123456789", "device": "kitchen-panel"})
		return readFrame(t, ws)
	}
	m := hello()
	if m["type"] != "error" || m["code"] != "pairing_required" || m["fatal"] != true {
		t.Fatalf("unknown device: %v; want a fatal pairing_required", m)
	}
	msg, _ := m["message"].(string)
	i := strings.Index(msg, "agentctl pair approve ")
	if i < 0 {
		t.Fatalf("no code in %q", msg)
	}
	code := strings.Fields(msg[i+len("agentctl pair approve "):])[0]
	code = strings.TrimRight(code, ")")
	if again := hello(); !strings.Contains(fmt.Sprint(again["message"]), code) {
		t.Fatalf("second hello %v; want the same code %s", again, code)
	}
	cl := admin.NewClient(filepath.Join(dir, "var", "agent.sock"))
	p, err := cl.PairApprove(context.Background(), code)
	if err != nil || p.User != "voice:kitchen-panel" {
		t.Fatalf("approve: %+v %v", p, err)
	}
	if m := hello(); m["type"] != "ready" {
		t.Fatalf("approved device: %v; want ready", m)
	}
	// Revoking the device closes its open connection.
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/voice", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.WriteJSON(map[string]any{"type": "hello", "token": "device-secret-0123456789", "device": "kitchen-panel"})
	if m := readFrame(t, ws); m["type"] != "ready" {
		t.Fatalf("hello: %v", m)
	}
	if _, err := cl.PairRevoke(context.Background(), "voice:kitchen-panel"); err != nil {
		t.Fatal(err)
	}
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, _, err = ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || ce.Text != "revoked" {
		t.Fatalf("after revoke: %v; want close 1008 revoked", err)
	}
	if m := hello(); m["code"] != "pairing_required" {
		t.Fatalf("revoked device: %v; want pairing_required again", m)
	}
}

// TestVoiceDefaultsFollowReload: voice.tts turned on in the file and
// reloaded speaks the replies of the next connection.
func TestVoiceDefaultsFollowReload(t *testing.T) {
	nativetest.EspeakNG(t)
	llmSrv := streamingLLM(t)
	dir := t.TempDir()
	llm := "[llm]\nprovider = \"custom\"\nmodel = \"fake\"\nbase_url = \"" + llmSrv.BaseURL() + "\"\n"
	addr, _ := startDaemonIn(t, dir, llm+"[voice]\ntts = false\n")
	// turn runs a text turn and then reads what follows the final reply:
	// with speech, the audio frame; without, the reply to a second turn.
	turn := func(spoken bool) {
		ws, key := consoleDial(t, addr, filepath.Join(dir, "var", "agent.sock"))
		defer ws.Close()
		ws.WriteJSON(map[string]any{"type": "hello", "user": "alice", "console_key": key})
		if m := readFrame(t, ws); m["type"] != "ready" {
			t.Fatalf("hello: %v", m)
		}
		ws.WriteJSON(map[string]string{"type": "text", "text": "hi"})
		for {
			if m := readFrame(t, ws); m["type"] == "reply" && m["final"] == true {
				break
			}
		}
		if spoken {
			if m := readFrame(t, ws); m["type"] != "audio" {
				t.Fatalf("after the final reply with voice.tts on: %v, want the audio frame", m)
			}
			return
		}
		ws.WriteJSON(map[string]string{"type": "text", "text": "again"})
		if m := readFrame(t, ws); m["type"] != "reply" {
			t.Fatalf("after the final reply with voice.tts off: %v, want the next turn's reply (no audio, not busy)", m)
		}
	}
	turn(false)
	path := filepath.Join(dir, "config.toml")
	b, _ := os.ReadFile(path)
	os.WriteFile(path, []byte(strings.Replace(string(b), "tts = false", "tts = true", 1)), 0o600)
	if err := admin.NewClient(filepath.Join(dir, "var", "agent.sock")).Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	turn(true)
}
