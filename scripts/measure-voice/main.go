// Command measure-voice starts the built daemon with its local models
// (bge-small and whisper tiny with random weights, the real Silero VAD)
// and the voice channel on,
// opens N agent.voice.v1 WebSocket connections at once, each streaming a
// 3 s espeak-ng utterance (hello with the token, PCM frames, end) and
// waiting for its final transcript, for a few rounds, while it samples the
// daemon's VmRSS every 5 ms. It prints a Markdown table with the peak RSS
// (and VmHWM, which includes start-up) for scripts/bench.sh. No LLM is
// reachable (each turn is cancelled after its transcript).
//
//	go run ./scripts/measure-voice -bin bin/agent -models testdata/models
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

const token = "measure-voice-token"

// utterances: about three seconds of espeak-ng speech each.
var utterances = []string{
	"Please schedule a meeting with the design team tomorrow at ten.",
	"Turn on the kitchen lights and set the oven to two hundred degrees.",
	"What is the weather going to be like this weekend in the mountains?",
	"Remind me to call my sister when I get home from work tonight.",
}

func main() {
	bin := flag.String("bin", "bin/agent", "daemon binary")
	models := flag.String("models", "testdata/models", "folder with bge-small-random/ and ggml-tiny-random.bin")
	vadModel := flag.String("vad", ".deps/models/silero_vad_v5.onnx", "Silero VAD model (scripts/deps.sh vad)")
	conns := flag.Int("conns", 4, "concurrent voice connections")
	rounds := flag.Int("rounds", 3, "utterances per connection (one after another)")
	flag.Parse()
	if err := run(*bin, *models, *vadModel, *conns, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "measure-voice:", err)
		os.Exit(1)
	}
}

func run(bin, models, vadModel string, conns, rounds int) error {
	bin, _ = filepath.Abs(bin)
	models, _ = filepath.Abs(models)
	vadModel, _ = filepath.Abs(vadModel)
	dir, err := os.MkdirTemp("", "agent-measure-voice-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	pcm := make([][]byte, conns)
	rate := 0
	for i := range pcm {
		if pcm[i], rate, err = speech(dir, utterances[i%len(utterances)]); err != nil {
			return err
		}
	}

	// No LLM is reachable: base_url points at a closed loopback port, and
	// each client cancels its turn once it has the transcript.
	cfg := fmt.Sprintf(`[agent]
state_dir = "var"
[llm]
base_url = "http://127.0.0.1:9/v1"
api_key = "none"
[server]
listen = "127.0.0.1:0"
admin_socket = "var/agent.sock"
[embedding]
model_dir = %q
threads = 2
[asr]
model = %q
threads = 2
[voice]
enabled = true
token = %q
vad = "silero"
vad_model = %q
[security]
dm_policy = "allowlist"
allow_from = [%s]
`, filepath.Join(models, "bge-small-random"), filepath.Join(models, "ggml-tiny-random.bin"), token, vadModel, devices(conns))
	if err = os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600); err != nil {
		return err
	}
	sock := filepath.Join(dir, "notify.sock")
	nc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer nc.Close()
	cmd := exec.Command(bin, "-config", filepath.Join(dir, "config.toml"), "-log-level", "error")
	cmd.Dir = dir
	cmd.Env = []string{"NOTIFY_SOCKET=" + sock, "PATH=" + os.Getenv("PATH")}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err = cmd.Start(); err != nil {
		return err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	pid := cmd.Process.Pid

	// READY carries the address; "local models ready" says all loaded.
	var addr string
	loaded := false
	buf := make([]byte, 4096)
	nc.SetReadDeadline(time.Now().Add(2 * time.Minute))
	for addr == "" || !loaded {
		n, rerr := nc.Read(buf)
		if rerr != nil {
			return fmt.Errorf("waiting for READY: %w", rerr)
		}
		msg := string(buf[:n])
		if i := strings.Index(msg, "STATUS=serving on "); i >= 0 && addr == "" {
			addr = strings.Fields(msg[i+len("STATUS=serving on "):])[0]
			addr = strings.TrimSuffix(addr, ";")
		}
		if strings.Contains(msg, "local models ready") {
			if !strings.Contains(msg, "3/3 local models ready") {
				return fmt.Errorf("models not all loaded: %q", msg)
			}
			loaded = true
		}
	}
	time.Sleep(2 * time.Second) // let background start-up work finish
	before, _, err := memory(pid)
	if err != nil {
		return err
	}

	stop := make(chan struct{})
	peak := make(chan int64)
	go func() {
		var max int64
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if rss, _, err := memory(pid); err == nil && rss > max {
				max = rss
			}
			select {
			case <-t.C:
			case <-stop:
				peak <- max
				return
			}
		}
	}()

	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, conns)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = client(addr, i, rate, pcm[i], rounds)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	max := <-peak
	after, hwm, err := memory(pid)
	if err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Println("| load | RSS before | peak RSS (VmRSS sampled every 5 ms) | RSS after | VmHWM (incl. start-up) | wall |")
	fmt.Println("|---|---|---|---|---|---|")
	fmt.Printf("| %d concurrent voice connections, %d x 3 s espeak-ng utterance each (bge-small + whisper tiny with its automatic speech workers + Silero VAD; random weights but Silero's) | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %s |\n",
		conns, rounds, float64(before)/1e6, float64(max)/1e6, float64(after)/1e6, float64(hwm)/1e6, elapsed.Round(10*time.Millisecond))
	return nil
}

// devices lists the clients' principals for security.allow_from (TOML).
func devices(n int) string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%q", fmt.Sprintf("voice:measure-%d", i)))
	}
	return strings.Join(out, ", ")
}

// client: hello, then rounds of (3 s of PCM in 100 ms frames, end, wait
// for the final transcript).
func client(addr string, id, rate int, pcm []byte, rounds int) error {
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/voice", nil)
	if err != nil {
		return fmt.Errorf("client %d: dial: %w", id, err)
	}
	defer ws.Close()
	ws.SetReadDeadline(time.Now().Add(5 * time.Minute))
	hello := map[string]any{"type": "hello", "token": token, "device": fmt.Sprintf("measure-%d", id),
		"profile": "voice", "sample_rate": rate, "protocol": "agent.voice.v1"}
	if err := ws.WriteJSON(hello); err != nil {
		return err
	}
	if f, err := next(ws); err != nil || f.Type != "ready" {
		return fmt.Errorf("client %d: hello answered %+v, %v", id, f, err)
	}
	frame := rate / 10 * 2
	for r := range rounds {
		for b := pcm; len(b) > 0; {
			n := min(frame, len(b))
			if err := ws.WriteMessage(websocket.BinaryMessage, b[:n]); err != nil {
				return err
			}
			b = b[n:]
		}
		if err := ws.WriteJSON(map[string]string{"type": "end"}); err != nil {
			return err
		}
		for {
			f, err := next(ws)
			if err != nil {
				return fmt.Errorf("client %d round %d: %w", id, r, err)
			}
			if f.Type == "transcript" && f.Final {
				break
			}
			if f.Type == "error" && f.Code != "llm_unavailable" { // a late answer of the cancelled turn
				return fmt.Errorf("client %d round %d: error frame %s: %s", id, r, f.Code, f.Message)
			}
		}
		// The transcript's turn is not wanted: cancel it (handled in
		// order, so the next utterance is not "busy").
		if err := ws.WriteJSON(map[string]string{"type": "cancel"}); err != nil {
			return err
		}
	}
	ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	return nil
}

type frame struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Final   bool   `json:"final"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func next(ws *websocket.Conn) (frame, error) {
	for {
		typ, data, err := ws.ReadMessage()
		if err != nil {
			return frame{}, err
		}
		if typ != websocket.TextMessage {
			continue
		}
		var f frame
		err = json.Unmarshal(data, &f)
		return f, err
	}
}

// speech is text spoken by espeak-ng as exactly 3 s of PCM s16le at the
// voice's rate.
func speech(dir, text string) ([]byte, int, error) {
	path := filepath.Join(dir, "speech.wav")
	if out, err := exec.Command("espeak-ng", "-v", "en", "-w", path, text).CombinedOutput(); err != nil {
		return nil, 0, fmt.Errorf("espeak-ng: %v: %s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	if len(b) < 44 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return nil, 0, errors.New("espeak-ng wrote no WAV")
	}
	rate := 0
	for off := 12; off+8 <= len(b); {
		id, size := string(b[off:off+4]), int(binary.LittleEndian.Uint32(b[off+4:]))
		switch id {
		case "fmt ":
			rate = int(binary.LittleEndian.Uint32(b[off+12:]))
		case "data":
			data := b[off+8 : min(len(b), off+8+size)]
			out := make([]byte, 3*rate*2)
			copy(out, data)
			return out, rate, nil
		}
		off += 8 + size + size&1
	}
	return nil, 0, errors.New("espeak-ng WAV without data")
}

// memory returns VmRSS and VmHWM of pid in bytes.
func memory(pid int) (rss, hwm int64, err error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fs[1], 10, 64)
		switch fs[0] {
		case "VmRSS:":
			rss = kb * 1024
		case "VmHWM:":
			hwm = kb * 1024
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("no VmRSS for pid %d", pid)
	}
	return rss, hwm, sc.Err()
}
