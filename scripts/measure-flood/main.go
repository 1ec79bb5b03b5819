// Command measure-flood replays the slow-body flood of issue 13 against
// the built daemon and measures what still gets through. The daemon runs
// with WeCom enabled against an in-process fake WeCom API (wecomtest) and
// an in-process echo LLM, default connection limits (server.max_conns
// 1024, max_conns_per_client 64) and, with -models, its local models.
//
// Scenarios, one after another on the same daemon:
//   - baseline: signed, encrypted WeCom callbacks at -rate per second,
//     each on a new connection from 127.0.0.1, for -seconds;
//   - the same while -conns slow-body POSTs to /wecom/callback are held
//     open (headers sent, then one byte every -trickle; a connection the
//     daemon closes is reopened, at most -connect-rate (re)connections per
//     second, as slowhttptest does) from 32 other addresses;
//   - the same with the flood from 127.0.0.1, the callbacks' own address
//     (a TCP tunnel makes every client one address);
//   - voice: -voice-idle sockets that upgrade and never say hello (each
//     reopened when the daemon closes it), then -voice-clients devices
//     connect and say hello: idle sockets from 13 other addresses, from
//     127.0.0.1 (the devices' own), both reopened 100 ms after a close, and
//     from 127.0.0.1 reopened at once (a connection storm).
//
// During each flood /healthz and the admin socket are probed twice a
// second and the daemon's VmRSS sampled every 100 ms. It prints Markdown
// for scripts/bench.sh.
//
//	go run ./scripts/measure-flood -bin bin/agent -models testdata/models
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"agent/pkg/admin"
	wx "agent/pkg/wecom"
	"agent/pkg/wecom/wecomtest"
)

const (
	corpID     = "wx5823bf96d3bd56c7"
	agentID    = 1000002
	wxToken    = "QDG6eK"
	aesKey     = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
	voiceToken = "measure-flood-token"
)

type options struct {
	bin, models             string
	conns, rate, seconds    int
	trickle                 time.Duration
	connectRate             int
	voiceIdle, voiceClients int
	policy                  string
	maxConns                int
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin/agent", "daemon binary")
	flag.StringVar(&o.models, "models", "", "folder with bge-small-random/ and ggml-tiny-random.bin (empty: no local models)")
	flag.IntVar(&o.conns, "conns", 2000, "slow-body connections the flood holds open")
	flag.IntVar(&o.rate, "rate", 200, "WeCom callbacks per second")
	flag.IntVar(&o.seconds, "seconds", 15, "seconds of callbacks per scenario")
	flag.DurationVar(&o.trickle, "trickle", 10*time.Second, "a slow body sends one byte this often")
	flag.IntVar(&o.connectRate, "connect-rate", 500, "the flood's (re)connections per second at most")
	flag.IntVar(&o.voiceIdle, "voice-idle", 100, "voice sockets held open without a hello")
	flag.IntVar(&o.voiceClients, "voice-clients", 20, "voice devices that connect meanwhile (0: no voice scenarios)")
	flag.IntVar(&o.maxConns, "max-conns", 0, "server.max_conns (0: the default, 1024)")
	flag.StringVar(&o.policy, "policy", "allowlist", "security.dm_policy: allowlist (only the voice devices listed: each WeCom callback is verified, decrypted, stored and acknowledged, then refused, so the ack path is what is measured) or open (every message also runs a turn)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "measure-flood:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	bin, _ := filepath.Abs(o.bin)
	dir, err := os.MkdirTemp("", "agent-measure-flood-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	api := wecomtest.NewServer(corpID, "secret", agentID)
	defer api.Close()
	llm := echoLLM()
	defer llm.Close()

	embed, asrModel := "/nonexistent", "/nonexistent.bin"
	if o.models != "" {
		m, _ := filepath.Abs(o.models)
		embed, asrModel = filepath.Join(m, "bge-small-random"), filepath.Join(m, "ggml-tiny-random.bin")
	}
	cfg := fmt.Sprintf(`[agent]
state_dir = "var"
workspace = "workspace"
[server]
listen = "127.0.0.1:0"
admin_socket = "var/agent.sock"
%s
[embedding]
model_dir = %q
threads = 2
[asr]
model = %q
threads = 2
[llm]
provider = "custom"
model = "fake"
base_url = %q
[security]
dm_policy = %q
allow_from = [%s]
[voice]
enabled = true
token = %q
[wecom]
enabled = true
corp_id = %q
corp_secret = "secret"
agent_id = %d
token = %q
encoding_aes_key = %q
api_base = %q
`, maxConnsLine(o.maxConns), embed, asrModel, llm.URL+"/v1", o.policy, devices(o.voiceClients), voiceToken, corpID, agentID, wxToken, aesKey, api.URL)
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600); err != nil {
		return err
	}
	d, err := startDaemon(bin, dir)
	if err != nil {
		return err
	}
	defer d.stop()
	time.Sleep(2 * time.Second) // let background start-up work finish
	idleRSS, _ := rss(d.pid)

	crypto, err := wx.NewCrypto(wxToken, aesKey, corpID)
	if err != nil {
		return err
	}
	var rows []string
	msg := 0
	scenario := func(name string, fl *flood) {
		var ramp string
		if fl != nil {
			fl.start()
			t0 := time.Now()
			for fl.connects.Load() < int64(o.conns) && time.Since(t0) < time.Minute {
				time.Sleep(50 * time.Millisecond) // waiting for the ramp
			}
			ramp = time.Since(t0).Round(100 * time.Millisecond).String()
		}
		before := d.metrics()
		cpu0, t0 := cpuTime(d.pid), time.Now()
		pr := startProbes(d)
		res := callbacks(d.base, crypto, o.rate, o.seconds, &msg)
		p := pr.finish()
		cpu := float64(cpuTime(d.pid)-cpu0) / float64(time.Since(t0)) * 100
		after := d.metrics()
		floodCell := "none"
		if fl != nil {
			floodCell = fmt.Sprintf("%d wanted from %s; %d open on the client side at the end (ramp %s), %d (re)connects", o.conns, fl.from, fl.held.Load(), ramp, fl.connects.Load())
			fl.stop()
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %d/%d | %s | %s | %s | %s | %s | %.0f MB | %.0f %% | %.0f / %.0f | %.0f |",
			name, floodCell, len(res.lat), res.sent, ms(pct(res.lat, 50)), ms(pct(res.lat, 99)), ms(slices.Max(append(res.lat, 0))),
			p.health.String(), p.admin.String(), float64(p.peakRSS)/1e6, cpu,
			after["agent_http_connections"], after["agent_http_max_conns"], after["agent_http_connections_evicted"]-before["agent_http_connections_evicted"]))
		if len(res.errs) > 0 {
			fmt.Fprintf(os.Stderr, "measure-flood: %s: %d callbacks not acknowledged, e.g. %v\n", name, len(res.errs), res.errs[0])
		}
		waitQuiet(d)
	}
	fmt.Fprintln(os.Stderr, "measure-flood: baseline")
	scenario("no flood", nil)
	var others []string
	for i := range 32 {
		others = append(others, fmt.Sprintf("127.0.0.%d", 2+i))
	}
	fmt.Fprintln(os.Stderr, "measure-flood: flood from 32 other addresses")
	scenario("slow-body flood from 32 other addresses", newFlood(d.addr, others, "127.0.0.2-33", o))
	fmt.Fprintln(os.Stderr, "measure-flood: flood through a tunnel")
	scenario("slow-body flood from 127.0.0.1 (as through a tunnel)", newFlood(d.addr, []string{"127.0.0.1"}, "127.0.0.1", o))

	var voiceRows []string
	for _, v := range []struct {
		name      string
		idle      []string
		devs      []string
		reconnect time.Duration
	}{
		{"13 other addresses, each reopened 100 ms after the daemon closes it", others[:13], []string{"127.0.0.1", "127.0.0.40"}, 100 * time.Millisecond},
		{"127.0.0.1, the devices' own address (a tunnel), reopened after 100 ms", []string{"127.0.0.1"}, []string{"127.0.0.1"}, 100 * time.Millisecond},
		{"127.0.0.1, reopened at once (a connection storm through the tunnel)", []string{"127.0.0.1"}, []string{"127.0.0.1"}, 0},
	} {
		if o.voiceClients <= 0 {
			break
		}
		fmt.Fprintln(os.Stderr, "measure-flood: voice:", v.name)
		row, err := voiceScenario(d, v.name, v.idle, v.devs, v.reconnect, o)
		if err != nil {
			return err
		}
		voiceRows = append(voiceRows, row)
	}
	finalRSS, _ := rss(d.pid)

	fmt.Printf("Daemon RSS idle before the floods: %.0f MB; after them: %.0f MB (local models: %v). security.dm_policy %q.\n\n", float64(idleRSS)/1e6, float64(finalRSS)/1e6, o.models != "", o.policy)
	fmt.Println("| scenario | flood | callbacks acknowledged | ack p50 | ack p99 | ack max | /healthz answered (max) | admin socket answered (max) | daemon RSS peak | daemon CPU (of one core) | HTTP connections open at the end / max_conns | connections evicted |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Println(r)
	}
	if len(voiceRows) == 0 {
		return nil
	}
	fmt.Println()
	fmt.Printf("Voice: %d sockets that upgrade and never say hello are held open (each reopened when the daemon closes it), then %d devices connect and say hello, four at a time.\n\n", o.voiceIdle, o.voiceClients)
	fmt.Println("| idle sockets from | idle sockets open when the devices start | devices admitted | connect to ready p50 | max | idle sockets closed by the daemon (evicted for a newcomer, or hello timeout) | idle sockets refused (503) |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, r := range voiceRows {
		fmt.Println(r)
	}
	return nil
}

// ---- the daemon ----

type daemon struct {
	cmd        *exec.Cmd
	pid        int
	addr, base string
	sock       string
	notify     net.Conn
}

func startDaemon(bin, dir string) (*daemon, error) {
	sockPath := filepath.Join(dir, "notify.sock")
	nc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-config", filepath.Join(dir, "config.toml"), "-log-level", "error")
	cmd.Dir = dir
	cmd.Env = []string{"NOTIFY_SOCKET=" + sockPath, "PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		nc.Close()
		return nil, err
	}
	d := &daemon{cmd: cmd, pid: cmd.Process.Pid, sock: filepath.Join(dir, "var", "agent.sock"), notify: nc}
	buf := make([]byte, 4096)
	nc.SetReadDeadline(time.Now().Add(3 * time.Minute))
	loaded := false
	for d.addr == "" || !loaded {
		n, err := nc.Read(buf)
		if err != nil {
			d.stop()
			return nil, fmt.Errorf("waiting for READY: %w", err)
		}
		msg := string(buf[:n])
		if i := strings.Index(msg, "serving on "); i >= 0 && d.addr == "" {
			d.addr = strings.TrimSuffix(strings.Fields(msg[i+len("serving on "):])[0], ";")
		}
		loaded = loaded || strings.Contains(msg, "local models ready")
	}
	d.base = "http://" + d.addr
	return d, nil
}

func (d *daemon) stop() {
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.cmd.Wait()
	d.notify.Close()
}

// metrics reads the daemon's agent_http_* series.
func (d *daemon) metrics() map[string]float64 {
	out := map[string]float64{}
	c := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(d.base + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && strings.HasPrefix(f[0], "agent_http_") && !strings.Contains(f[0], "{") {
			out[f[0]], _ = strconv.ParseFloat(f[1], 64)
		}
	}
	return out
}

// waitQuiet waits until the daemon holds few connections again.
func waitQuiet(d *daemon) {
	for range 100 {
		if d.metrics()["agent_http_connections"] < 10 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cpuTime is the user and system time pid has used (/proc/PID/stat,
// in clock ticks of 10 ms).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // after the command name
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond
}

func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// ---- the flood ----

type flood struct {
	addr    string
	sources []string
	from    string
	o       options

	held, connects atomic.Int64
	quit           chan struct{}
	wg             sync.WaitGroup
	mu             sync.Mutex
	open           map[net.Conn]struct{}
	tokens         chan struct{}
}

func newFlood(addr string, sources []string, from string, o options) *flood {
	return &flood{addr: addr, sources: sources, from: from, o: o, quit: make(chan struct{}), open: map[net.Conn]struct{}{}, tokens: make(chan struct{})}
}

func (f *flood) start() {
	f.wg.Add(1)
	go func() { // the (re)connection budget
		defer f.wg.Done()
		t := time.NewTicker(time.Second / time.Duration(f.o.connectRate))
		defer t.Stop()
		for {
			select {
			case <-f.quit:
				return
			case <-t.C:
				select {
				case f.tokens <- struct{}{}:
				case <-f.quit:
					return
				default:
				}
			}
		}
	}()
	for i := range f.o.conns {
		f.wg.Add(1)
		go f.worker(f.sources[i%len(f.sources)])
	}
}

func (f *flood) stop() {
	close(f.quit)
	f.mu.Lock()
	for c := range f.open {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// worker holds one slow-body POST open, reopening it when the daemon
// closes it.
func (f *flood) worker(src string) {
	defer f.wg.Done()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	buf := make([]byte, 512)
	for {
		select {
		case <-f.quit:
			return
		case <-f.tokens:
		}
		c, err := d.Dial("tcp", f.addr)
		if err != nil {
			continue
		}
		f.mu.Lock()
		select {
		case <-f.quit:
			f.mu.Unlock()
			c.Close()
			return
		default:
		}
		f.open[c] = struct{}{}
		f.mu.Unlock()
		f.connects.Add(1)
		_, err = fmt.Fprintf(c, "POST /wecom/callback?msg_signature=0&timestamp=%d&nonce=n HTTP/1.1\r\nHost: %s\r\nContent-Type: text/xml\r\nContent-Length: 100000\r\n\r\n<xml>", time.Now().Unix(), f.addr)
		if err == nil {
			f.held.Add(1)
			for {
				c.SetReadDeadline(time.Now().Add(f.o.trickle))
				if _, err := c.Read(buf); err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						if _, err := c.Write([]byte("x")); err == nil {
							continue
						}
					}
				}
				break // the daemon answered or closed it
			}
			f.held.Add(-1)
		}
		f.mu.Lock()
		delete(f.open, c)
		f.mu.Unlock()
		c.Close()
	}
}

// ---- WeCom callbacks ----

type result struct {
	sent int
	lat  []time.Duration
	errs []error
}

// callbacks posts signed, encrypted text messages at rate per second for
// seconds, each on a new connection from 127.0.0.1, and times each
// acknowledgement.
func callbacks(base string, crypto *wx.Crypto, rate, seconds int, msg *int) result {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}).DialContext}}
	n := rate * seconds
	var mu sync.Mutex
	var res result
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate)))) // open-loop pacing
		*msg++
		id := *msg
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := &wx.Message{ToUserName: corpID, FromUserName: "user" + strconv.Itoa(id%50), CreateTime: time.Now().Unix(),
				MsgType: "text", Content: "flood check " + strconv.Itoa(id), MsgID: strconv.Itoa(7000000 + id), AgentID: agentID}
			req, err := wecomtest.CallbackRequest(crypto, base+"/wecom/callback", m, strconv.FormatInt(time.Now().Unix(), 10), "n"+strconv.Itoa(id))
			if err != nil {
				mu.Lock()
				res.errs = append(res.errs, err)
				mu.Unlock()
				return
			}
			t0 := time.Now()
			resp, err := client.Do(req)
			var body []byte
			if err == nil {
				body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != "success" {
					err = fmt.Errorf("HTTP %d %q", resp.StatusCode, body)
				}
			}
			d := time.Since(t0)
			mu.Lock()
			if err != nil {
				res.errs = append(res.errs, err)
			} else {
				res.lat = append(res.lat, d)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.sent = n
	return res
}

// ---- probes: /healthz, the admin socket, RSS ----

type probeStat struct {
	ok, total int
	max       time.Duration
}

func (p probeStat) String() string { return fmt.Sprintf("%d/%d (%s)", p.ok, p.total, ms(p.max)) }

type probes struct {
	quit          chan struct{}
	done          chan struct{}
	health, admin probeStat
	peakRSS       int64
}

func startProbes(d *daemon) *probes {
	p := &probes{quit: make(chan struct{}), done: make(chan struct{})}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	ac := admin.NewClient(d.sock)
	go func() {
		defer close(p.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			if r, err := rss(d.pid); err == nil && r > p.peakRSS {
				p.peakRSS = r
			}
			if i%5 == 0 {
				t0 := time.Now()
				resp, err := hc.Get(d.base + "/healthz")
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				p.health.total++
				if err == nil && resp.StatusCode == 200 {
					p.health.ok++
				}
				p.health.max = max(p.health.max, time.Since(t0))
				t0 = time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err = ac.Status(ctx)
				cancel()
				p.admin.total++
				if err == nil {
					p.admin.ok++
				}
				p.admin.max = max(p.admin.max, time.Since(t0))
			}
			select {
			case <-p.quit:
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

func (p *probes) finish() *probes {
	close(p.quit)
	<-p.done
	return p
}

// ---- voice ----

// voiceScenario holds o.voiceIdle sockets that never say hello (from idle,
// round robin), then connects o.voiceClients devices (from devs) and
// counts how many get ready.
func voiceScenario(d *daemon, name string, idle, devs []string, reconnect time.Duration, o options) (string, error) {
	dialer := func(src string) *websocket.Dialer {
		nd := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
		return &websocket.Dialer{NetDialContext: nd.DialContext, HandshakeTimeout: 10 * time.Second}
	}
	url := "ws://" + d.addr + "/voice"
	quit := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[*websocket.Conn]struct{}{}
	var held, connects, closedByServer, refused atomic.Int64
	for i := range o.voiceIdle {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dl := dialer(idle[i%len(idle)])
			for {
				select {
				case <-quit:
					return
				default:
				}
				ws, resp, err := dl.Dial(url, nil)
				if err != nil {
					if resp != nil && resp.StatusCode == http.StatusServiceUnavailable {
						refused.Add(1)
					}
					select {
					case <-quit:
						return
					case <-time.After(50 * time.Millisecond): // reconnect pacing
					}
					continue
				}
				mu.Lock()
				open[ws] = struct{}{}
				mu.Unlock()
				held.Add(1)
				connects.Add(1)
				ws.SetReadDeadline(time.Time{})
				ws.ReadMessage() // until the daemon closes it (how does not matter)
				held.Add(-1)
				mu.Lock()
				delete(open, ws)
				mu.Unlock()
				ws.Close()
				select {
				case <-quit:
					return
				default:
					closedByServer.Add(1)
				}
				select {
				case <-quit:
					return
				case <-time.After(reconnect):
				}
			}
		}()
	}
	for t0 := time.Now(); connects.Load() < int64(o.voiceIdle) && time.Since(t0) < 30*time.Second; {
		time.Sleep(20 * time.Millisecond) // waiting for every idle socket to have connected once
	}
	heldAtStart := held.Load()
	var lat []time.Duration
	admitted := 0
	var fails []string
	sem := make(chan struct{}, 4)
	var dwg sync.WaitGroup
	for i := range o.voiceClients {
		dwg.Add(1)
		sem <- struct{}{}
		go func() {
			defer dwg.Done()
			defer func() { <-sem }()
			t0 := time.Now()
			ws, _, err := dialer(devs[i%len(devs)]).Dial(url, nil)
			if err != nil {
				mu.Lock()
				fails = append(fails, err.Error())
				mu.Unlock()
				return
			}
			defer ws.Close()
			ws.WriteJSON(map[string]any{"type": "hello", "token": voiceToken, "device": fmt.Sprintf("panel-%d", i), "protocol": "agent.voice.v1"})
			ws.SetReadDeadline(time.Now().Add(30 * time.Second))
			var f struct{ Type, Code string }
			err = ws.ReadJSON(&f)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || f.Type != "ready" {
				fails = append(fails, fmt.Sprintf("%s %s %v", f.Type, f.Code, err))
				return
			}
			admitted++
			lat = append(lat, time.Since(t0))
		}()
	}
	dwg.Wait()
	close(quit)
	mu.Lock()
	for ws := range open {
		ws.Close()
	}
	mu.Unlock()
	wg.Wait()
	if len(fails) > 0 {
		fmt.Fprintf(os.Stderr, "measure-flood: voice (%s): %d devices not admitted, e.g. %s\n", name, len(fails), fails[0])
	}
	return fmt.Sprintf("| %s | %d | %d/%d | %s | %s | %d | %d |", name, heldAtStart, admitted, o.voiceClients, ms(pct(lat, 50)), ms(slices.Max(append(lat, 0))), closedByServer.Load(), refused.Load()), nil
}

// ---- helpers ----

func maxConnsLine(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf("max_conns = %d", n)
}

// devices lists the voice devices' principals for security.allow_from.
func devices(n int) string {
	var out []string
	for i := range n {
		out = append(out, strconv.Quote(fmt.Sprintf("voice:panel-%d", i)))
	}
	return strings.Join(out, ", ")
}

func echoLLM() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"noted"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, (len(s)*p+99)/100-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }
