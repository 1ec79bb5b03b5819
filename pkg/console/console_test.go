package console

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"agent/pkg/asr"
	"agent/pkg/asr/asrtest"
	"agent/pkg/audio"
	"agent/pkg/channel/voice"
	"agent/pkg/conversation"
	"agent/pkg/nativetest"
)

func TestPage(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	body := rec.Body.String()
	for _, want := range []string{`id="ptt"`, `id="text"`, `id="health"`, "/voice", "/healthz", "agent.voice.v1", "getUserMedia",
		`id="signin"`, `id="token"`, "Run <code>agentctl console</code> on the box for a sign-in link"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// echoConv answers "you said: TEXT", streamed word by word.
type echoConv struct{ turns atomic.Int32 }

func (e *echoConv) Handle(ctx context.Context, in conversation.Inbound, reply conversation.Reply) (<-chan struct{}, error) {
	e.turns.Add(1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		answer := "you said: " + in.Text
		for _, w := range strings.SplitAfter(answer, " ") {
			in.Stream(w)
		}
		reply(ctx, answer)
	}()
	return done, nil
}

// cdp is a minimal Chrome DevTools protocol client for one page.
type cdp struct {
	t  *testing.T
	ws *websocket.Conn
	id int
}

func (c *cdp) call(method string, params any) json.RawMessage {
	c.t.Helper()
	c.id++
	if err := c.ws.WriteJSON(map[string]any{"id": c.id, "method": method, "params": params}); err != nil {
		c.t.Fatalf("cdp %s: %v", method, err)
	}
	for {
		c.ws.SetReadDeadline(time.Now().Add(60 * time.Second))
		var m struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := c.ws.ReadJSON(&m); err != nil {
			c.t.Fatalf("cdp %s: %v", method, err)
		}
		if m.ID != c.id {
			continue // an event
		}
		if m.Error != nil {
			c.t.Fatalf("cdp %s: %s", method, m.Error)
		}
		return m.Result
	}
}

// eval evaluates a JavaScript expression (awaiting promises) and decodes
// its value into out.
func (c *cdp) eval(expr string, out any) {
	c.t.Helper()
	res := c.call("Runtime.evaluate", map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true})
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception json.RawMessage `json:"exceptionDetails"`
	}
	json.Unmarshal(res, &r)
	if r.Exception != nil {
		c.t.Fatalf("eval %s: %s", expr, r.Exception)
	}
	if out != nil {
		if err := json.Unmarshal(r.Result.Value, out); err != nil {
			c.t.Fatalf("eval %s = %s: %v", expr, r.Result.Value, err)
		}
	}
}

// until polls a boolean expression (a bounded wait for a condition).
func (c *cdp) until(expr string, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		c.eval("!!("+expr+")", &ok)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var events any
			c.eval("JSON.stringify(consoleApp.events)", &events)
			c.t.Fatalf("%s not true after %v; events %v", expr, timeout, events)
		}
		time.Sleep(50 * time.Millisecond) // polling the page, bounded
	}
}

// TestConsoleInChromium drives the console in headless Chromium with a fake
// microphone playing espeak-ng speech: push-to-talk sends 16 kHz PCM, a
// partial transcript shows while talking, the transcript and the streamed
// reply appear, the text box works, the status
// panel shows /healthz. CONSOLE_SCREENSHOT=path keeps a screenshot.
func TestConsoleInChromium(t *testing.T) {
	browser := nativetest.Chromium(t)
	speech := asrtest.SpeechOrSkip(t, "Hello agent, what is on my calendar today?")
	var rec voice.Recognizer = fixedASR{}
	if r, err := asr.New(asr.Config{ModelPath: asrtest.TinyModel(t, false), Language: "en", Threads: asrtest.Threads, MaxTokens: 8}, nil); err == nil {
		defer r.Close()
		rec = r // the real whisper path when built with it
	}
	dir := t.TempDir()
	wavPath := filepath.Join(dir, "speech.wav")
	f, err := os.Create(wavPath)
	if err != nil {
		t.Fatal(err)
	}
	// Speech, then a second of silence, so the looping fake microphone has
	// a pause between repeats.
	if err := audio.WriteWAV(f, append(speech, make([]float32, 16000)...), 16000, 1); err != nil {
		t.Fatal(err)
	}
	f.Close()

	conv := &echoConv{}
	// No voice.token: only a console session gets in.
	sessions := NewSessions(SessionConfig{})
	vs := voice.New(voice.Config{Token: func() string { return "" }, Sessions: sessions,
		ASR: func() voice.Recognizer { return rec }, Turns: conversation.Turns(conv, nil, nil), VAD: voice.VADConfig{Silence: -1},
		Defaults: func() voice.Defaults { return voice.Defaults{Partials: true} }})
	defer vs.Close(context.Background())
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", Handler())
	mux.Handle("GET "+SignInPath, sessions.SignIn())
	mux.Handle("GET /voice", vs)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"ok","version":"test","uptime":"1m0s","checks":[{"name":"database","status":"ok"},{"name":"asr","status":"ok"},{"name":"embedding","status":"degraded","detail":"model file not found"}]}`)
	})
	hs := httptest.NewServer(mux)
	defer hs.Close()

	// Chromium's helpers may still write to the profile as it exits: it
	// lives outside t.TempDir and is removed on a best-effort basis.
	profile, err := os.MkdirTemp("", "console-chromium-*")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(profile)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless=new", "--no-sandbox", "--disable-gpu",
		"--remote-debugging-port=0", "--user-data-dir="+profile,
		"--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
		"--use-file-for-fake-audio-capture="+wavPath, "--autoplay-policy=no-user-gesture-required",
		"--window-size=1100,760", hs.URL+"/")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM) // lets it stop its own helpers
		cmd.Wait()
	}()
	port := ""
	sc := bufio.NewScanner(stderr)
	re := regexp.MustCompile(`DevTools listening on ws://[^:]+:(\d+)/`)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			port = m[1]
			break
		}
	}
	if port == "" {
		t.Fatal("chromium did not print its DevTools address")
	}
	go io.Copy(io.Discard, stderr)

	var pageWS string
	for deadline := time.Now().Add(30 * time.Second); pageWS == ""; {
		resp, err := http.Get("http://127.0.0.1:" + port + "/json/list")
		if err == nil {
			var targets []struct{ Type, URL, WebSocketDebuggerURL string }
			json.NewDecoder(resp.Body).Decode(&targets)
			resp.Body.Close()
			for _, tg := range targets {
				if tg.Type == "page" && strings.HasPrefix(tg.URL, hs.URL) {
					pageWS = tg.WebSocketDebuggerURL
				}
			}
		}
		if pageWS == "" {
			if time.Now().After(deadline) {
				t.Fatal("no page target in chromium")
			}
			time.Sleep(100 * time.Millisecond) // polling chromium, bounded
		}
	}
	ws, _, err := websocket.DefaultDialer.Dial(pageWS, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	c := &cdp{t: t, ws: ws}

	// Signed out: refused, the sign-in panel says how to get in.
	c.until(`window.consoleApp && consoleApp.fatal === "unauthorized" && !document.getElementById("signin").hidden`, 30*time.Second)
	var panel string
	c.eval(`document.getElementById("signin").innerText`, &panel)
	if !strings.Contains(panel, "Run agentctl console on the box for a sign-in link") {
		t.Errorf("sign-in panel %q", panel)
	}
	// The one-time link from agentctl console signs this browser in.
	link, err := sessions.NewLink(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	c.call("Page.navigate", map[string]any{"url": link.URL})
	c.until(`location.pathname === "/" && window.consoleApp && consoleApp.ready && consoleApp.health`, 30*time.Second)
	var hidden bool
	c.eval(`document.getElementById("signin").hidden`, &hidden)
	if !hidden {
		t.Error("sign-in panel still shown once signed in")
	}
	var ready string
	c.eval(`consoleApp.events.find(e => e.type === "ready").session`, &ready)
	if ready != "p2p:admin:console" {
		t.Errorf("console session %q; want the operator's p2p:admin:console", ready)
	}
	// The session key came in the fragment, is kept per tab and is gone
	// from the address bar.
	var hash, key string
	c.eval(`location.hash`, &hash)
	c.eval(`sessionStorage.getItem("agent.console_key") || ""`, &key)
	if hash != "" || len(key) < 40 {
		t.Errorf("after sign-in: location.hash %q, stored key %d chars", hash, len(key))
	}
	var cookieJS string
	c.eval(`document.cookie`, &cookieJS)
	if strings.Contains(cookieJS, CookieName) {
		t.Errorf("the session cookie is readable by scripts: %q", cookieJS)
	}
	var rate int
	c.eval("consoleApp.rate", &rate)
	t.Logf("browser audio context at %d Hz", rate)

	// Push to talk for about the length of the speech.
	c.eval("consoleApp.startTalk()", nil)
	// A live (partial) transcript shows while the button is held.
	c.until(`consoleApp.events.some(e => e.type === "transcript" && !e.final) && document.getElementById("partial").textContent !== ""`, 30*time.Second)
	c.until(fmt.Sprintf("consoleApp.sentBytes >= %d", len(speech)*2*rate/16000), 30*time.Second)
	start := time.Now()
	c.eval("consoleApp.stopTalk()", nil)
	c.until(`consoleApp.events.some(e => e.type === "transcript" && e.final)`, 60*time.Second)
	t.Logf("release to transcript in the browser: %v", time.Since(start))
	var transcript string
	c.eval(`consoleApp.events.find(e => e.type === "transcript" && e.final).text`, &transcript)
	if transcript != "" {
		c.until(`consoleApp.events.some(e => e.type === "reply" && e.final)`, 30*time.Second)
	}

	// The text box.
	c.eval(`document.getElementById("text").value = "turn on the lights"; document.getElementById("send").click(); true`, nil)
	c.until(`[...document.querySelectorAll(".msg.agent")].some(e => e.textContent === "you said: turn on the lights")`, 30*time.Second)
	var errs []any
	c.eval(`consoleApp.events.filter(e => e.type === "error")`, &errs)
	if len(errs) > 0 {
		t.Errorf("error frames: %v", errs)
	}
	var statusText string
	c.eval(`document.getElementById("health").textContent`, &statusText)
	if !strings.Contains(statusText, "ok") || !strings.Contains(statusText, "embedding") {
		t.Errorf("status panel %q", statusText)
	}

	if path := os.Getenv("CONSOLE_SCREENSHOT"); path != "" {
		res := c.call("Page.captureScreenshot", map[string]any{"format": "png"})
		var shot struct{ Data string }
		json.Unmarshal(res, &shot)
		png, err := base64.StdEncoding.DecodeString(shot.Data)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
	if conv.turns.Load() < 1 {
		t.Error("no turn reached the conversation")
	}
}

// fixedASR stands in for whisper in builds without it.
type fixedASR struct{}

func (fixedASR) Transcribe(_ context.Context, s []float32) (asr.Result, error) {
	return asr.Result{Text: fmt.Sprintf("%d samples", len(s))}, nil
}

func (f fixedASR) TranscribePartial(ctx context.Context, s []float32) (asr.Result, error) {
	return f.Transcribe(ctx, s)
}
