// Command soak runs the installed daemon under systemd with a mixed load
// for a while and checks that nothing grows, restarts or gets lost. It is
// run inside the test container by `scripts/test-systemd.sh --soak MIN`
// (`make soak`), as root, next to the agent.service it drives.
//
// It starts a fake OpenAI-compatible model (llmtest.Serve) and a fake WeCom
// API (wecomtest) on loopback, writes /etc/agent/config.toml to use them
// (WeCom and voice on, the random-weight models of testdata/models so both
// local models are loaded), restarts the service and then, for -minutes:
//   - a signed, encrypted WeCom callback every second, from 20 users in
//     turn; the model answers each with its token, and every user's
//     session fills and is compressed into facts (memory grows);
//   - a voice device connecting every 3 s for a typed turn, then closing;
//   - `agentctl send` every 10 s (an operator's turn on the admin socket);
//   - three scheduled jobs, each due every minute (a model task each).
//
// Every minute it samples the service's main PID, open files, goroutines
// (/metrics) and NRestarts; VmRSS every 10 s, keeping each minute's lowest
// reading (what the daemon holds; a large run in flight borrows memory for
// a moment and gives it back) and its highest. At the end it waits for the replies
// and checks: every WeCom message answered exactly once, every voice
// turn and admin send answered, each job run about once a minute, no restart,
// and no upward trend after the warm-up (RSS in the second half of the
// minutes after it; files, goroutines). A long message opens the warm-up. It
// prints a Markdown report (also written to -out) and exits 1 on a failure.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"agent/pkg/llm/llmtest"
	wx "agent/pkg/wecom"
	"agent/pkg/wecom/wecomtest"
)

const (
	corpID     = "wx5823bf96d3bd56c7"
	agentID    = 1000002
	wxToken    = "QDG6eK"
	aesKey     = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
	voiceToken = "soak-voice-token-0123456789"
	listen     = "127.0.0.1:18790"
	users      = 20
	jobs       = 3
)

var tokenRE = regexp.MustCompile(`soak-[wva]-\d+|soak job \d+`)

func main() {
	minutes := flag.Int("minutes", 30, "how long the load runs")
	warmup := flag.Int("warmup", 10, "minutes of warm-up not counted in the trend (the first compressions fall in it)")
	models := flag.String("models", "/usr/share/agent/soak-models", "folder (readable by the agent user) with bge-small-random/ and ggml-tiny-random-multi.bin")
	out := flag.String("out", "/root/soak.md", "where the Markdown report goes")
	flag.Parse()
	if *minutes < 3 {
		fmt.Fprintln(os.Stderr, "soak: -minutes must be at least 3")
		os.Exit(2)
	}
	if *warmup > *minutes/2 { // a short run: the trend needs minutes of its own
		*warmup = *minutes / 3
	}
	report, err := run(*minutes, *warmup, *models)
	fmt.Print(report)
	os.WriteFile(*out, []byte(report), 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak: FAIL:", err)
		os.Exit(1)
	}
}

// model answers like a model would, enough for every path: facts for a
// compression, a schedule call for "schedule soak job N", "done" after a
// tool result, and otherwise "ack" with the message's tokens.
func model(req *llmtest.Request) llmtest.Reply {
	if strings.Contains(req.System(), "long-term memory") {
		var facts []string
		for _, t := range tokenRE.FindAllString(req.LastUser(), 12) {
			facts = append(facts, fmt.Sprintf(`{"fact":"The user mentioned %s in the soak test.","keywords":[%q],"persons":[],"time":"","topic":"soak","supersedes":null}`, t, t))
		}
		return llmtest.Text(`{"facts":[` + strings.Join(facts, ",") + `]}`)
	}
	if req.Last().Role == "tool" {
		return llmtest.Text("done")
	}
	last := req.LastUser()
	if m := regexp.MustCompile(`schedule (soak job \d+)`).FindStringSubmatch(last); m != nil {
		args, _ := json.Marshal(map[string]string{"cron": "* * * * *", "prompt": "Say: " + m[1], "name": m[1]})
		return llmtest.Calls(llmtest.Call("schedule", string(args)))
	}
	return llmtest.Text("ack " + strings.Join(tokenRE.FindAllString(last, -1), " "))
}

type sample struct {
	minute                 int
	pid, restarts          int
	rssKB, fds, goroutines int // rssKB: the minute's lowest VmRSS
	anonKB, fileKB         int // at that reading: RssAnon (heaps, arenas) and RssFile (mapped files: libraries, models, the database)
	peakKB                 int // the minute's highest VmRSS
	heapKB                 int // the Go heap in use (the rest of the anonymous memory is C's: ONNX Runtime, whisper, SQLite)
	wecom, voice, admin    int64
}

// rssReading is one reading of the service's resident memory.
type rssReading struct{ rss, anon, file int }

func readRSS(pid int) rssReading {
	return rssReading{rss(pid, "VmRSS:"), rss(pid, "RssAnon:"), rss(pid, "RssFile:")}
}

// rssRange folds the readings of one minute: the lowest and the highest.
type rssRange struct {
	low  rssReading
	peak int
	n    int
}

func (r *rssRange) add(x rssReading) {
	if x.rss == 0 { // the process was gone for the moment (a restart): counted elsewhere
		return
	}
	if r.n == 0 || x.rss < r.low.rss {
		r.low = x
	}
	r.peak = max(r.peak, x.rss)
	r.n++
}

type counters struct {
	wecom, voice, admin atomic.Int64 // sent
	voiceOK, voiceBad   atomic.Int64
	adminOK, adminBad   atomic.Int64
	callbackErrs        atomic.Int64
	mu                  sync.Mutex
	errs                []string
}

func (c *counters) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) < 20 {
		c.errs = append(c.errs, fmt.Sprintf(format, args...))
	}
}

func run(minutes, warmup int, models string) (string, error) {
	llm := llmtest.Serve(model)
	defer llm.Close()
	api := wecomtest.NewServer(corpID, "secret", agentID)
	defer api.Close()
	// The packaged configuration, with what the soak needs set.
	raw, err := os.ReadFile("/etc/agent/config.toml")
	if err != nil {
		return "", err
	}
	cfg := string(raw)
	for _, kv := range [][3]string{
		{"server", "listen", strconv.Quote(listen)},
		{"llm", "provider", `"custom"`}, {"llm", "model", `"fake"`}, {"llm", "base_url", strconv.Quote(llm.BaseURL())},
		{"embedding", "model_dir", strconv.Quote(filepath.Join(models, "bge-small-random"))},
		{"asr", "model", strconv.Quote(filepath.Join(models, "ggml-tiny-random-multi.bin"))},
		{"security", "dm_policy", `"open"`},
		// Sessions compress into facts after 20 messages, within the
		// warm-up (20 users writing every 20 s each), so that the trend
		// is measured over steady state: memory growing, compressions
		// coming round again and again.
		{"memory", "session_max_messages", "20"},
		{"voice", "enabled", "true"}, {"voice", "token", strconv.Quote(voiceToken)},
		{"wecom", "enabled", "true"}, {"wecom", "corp_id", strconv.Quote(corpID)}, {"wecom", "corp_secret", `"secret"`},
		{"wecom", "agent_id", strconv.Itoa(agentID)}, {"wecom", "token", strconv.Quote(wxToken)},
		{"wecom", "encoding_aes_key", strconv.Quote(aesKey)}, {"wecom", "api_base", strconv.Quote(api.URL)},
	} {
		cfg = setKey(cfg, kv[0], kv[1], kv[2])
	}
	if err := os.WriteFile("/etc/agent/config.toml", []byte(cfg), 0o640); err != nil {
		return "", err
	}
	exec.Command("chgrp", "agent", "/etc/agent/config.toml").Run()
	if out, err := exec.Command("systemctl", "restart", "agent").CombinedOutput(); err != nil {
		return "", fmt.Errorf("systemctl restart: %v: %s", err, out)
	}
	if err := waitReady(60 * time.Second); err != nil {
		return "", err
	}
	crypto, err := wx.NewCrypto(wxToken, aesKey, corpID)
	if err != nil {
		return "", err
	}
	pid0, restarts0 := prop("MainPID"), prop("NRestarts")
	var c counters
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(minutes)*time.Minute)
	defer cancel()
	start := time.Now()

	// The scheduled jobs: asked for by three users (the model calls schedule).
	for j := 1; j <= jobs; j++ {
		if err := callback(crypto, fmt.Sprintf("soak-job-owner-%d", j), fmt.Sprintf("please schedule soak job %d", j), 9000000+j); err != nil {
			return "", fmt.Errorf("asking for job %d: %w", j, err)
		}
	}
	// The largest input a day brings, early in the warm-up: a long message
	// (its retrieval embeds the most tokens the model takes: the embedder's
	// arena grows to that, and is shrunk again once idle).
	long := "soak-long: " + strings.Repeat("the quarterly review of the regional offices covers budgets, hiring and the new building. ", 60)
	if err := callback(crypto, "soak-long-user", long, 9100000); err != nil {
		return "", fmt.Errorf("the long message: %w", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { every(ctx, time.Second, func(n int) { wecomTurn(crypto, &c, n) }) })
	wg.Go(func() { every(ctx, 3*time.Second, func(n int) { voiceTurn(&c, n) }) })
	wg.Go(func() { every(ctx, 10*time.Second, func(n int) { adminSend(&c, n) }) })
	var samples []sample
	var minuteRSS rssRange
	take := func(minute int) {
		pid := prop("MainPID")
		minuteRSS.add(readRSS(pid))
		r := minuteRSS
		minuteRSS = rssRange{}
		g, heap := goMetrics()
		s := sample{minute: minute, pid: pid, restarts: prop("NRestarts") - restarts0,
			rssKB: r.low.rss, anonKB: r.low.anon, fileKB: r.low.file, peakKB: r.peak, heapKB: heap, fds: fds(pid), goroutines: g,
			wecom: c.wecom.Load(), voice: c.voice.Load(), admin: c.admin.Load()}
		samples = append(samples, s)
		fmt.Fprintf(os.Stderr, "soak: minute %d: pid %d, RSS %.1f MB at the lowest (anonymous %.1f, files %.1f), %.1f MB at the highest of %d readings, Go heap %.1f MB, %d files, %d goroutines, %d restarts; sent %d WeCom, %d voice, %d admin\n",
			minute, s.pid, float64(s.rssKB)/1024, float64(s.anonKB)/1024, float64(s.fileKB)/1024, float64(s.peakKB)/1024, r.n, float64(s.heapKB)/1024, s.fds, s.goroutines, s.restarts, s.wecom, s.voice, s.admin)
	}
	take(0)
	tick := time.NewTicker(time.Minute)
	every10s := time.NewTicker(10 * time.Second)
	for m := 1; m <= minutes; m++ {
	minute:
		for {
			select {
			case <-every10s.C:
				minuteRSS.add(readRSS(prop("MainPID")))
			case <-tick.C:
				break minute
			case <-ctx.Done():
				break minute
			}
		}
		take(m)
	}
	tick.Stop()
	every10s.Stop()
	cancel()
	wg.Wait()

	// Replies: every WeCom token to its user once, every admin send once.
	want := map[string]string{} // token -> user
	for n := 1; n <= int(c.wecom.Load()); n++ {
		want[fmt.Sprintf("soak-w-%d", n)] = user(n)
	}
	var got map[string]int
	var runs map[string]int
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, runs = map[string]int{}, map[string]int{}
		for _, m := range api.Messages() {
			for _, t := range tokenRE.FindAllString(m.Content, -1) {
				if strings.HasPrefix(t, "soak job") {
					runs[t]++
				} else if want[t] == m.ToUser {
					got[t]++
				}
			}
		}
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	var missing, doubled []string
	for t := range want {
		switch got[t] {
		case 0:
			missing = append(missing, t)
		case 1:
		default:
			doubled = append(doubled, t)
		}
	}
	elapsed := time.Since(start)

	// The verdict.
	var problems []string
	last := samples[len(samples)-1]
	if last.pid != pid0 || last.restarts != 0 {
		problems = append(problems, fmt.Sprintf("the service restarted (pid %d -> %d, NRestarts +%d)", pid0, last.pid, last.restarts))
	}
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("%d messages never answered (e.g. %s)", len(missing), strings.Join(first(missing, 5), ", ")))
	}
	if len(doubled) > 0 {
		problems = append(problems, fmt.Sprintf("%d messages answered twice (e.g. %s)", len(doubled), strings.Join(first(doubled, 5), ", ")))
	}
	if c.voiceBad.Load() > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d voice turns failed", c.voiceBad.Load(), c.voice.Load()))
	}
	if c.adminBad.Load() > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d agentctl sends failed", c.adminBad.Load(), c.admin.Load()))
	}
	if c.callbackErrs.Load() > 0 {
		problems = append(problems, fmt.Sprintf("%d WeCom callbacks not acknowledged", c.callbackErrs.Load()))
	}
	for j := 1; j <= jobs; j++ {
		if n := runs[fmt.Sprintf("soak job %d", j)]; n < minutes-2 {
			problems = append(problems, fmt.Sprintf("job %d ran %d times in %d minutes", j, n, minutes))
		}
	}
	trend := samples[min(warmup, len(samples)-2):]
	rssSlope := slope(trend, func(s sample) float64 { return float64(s.rssKB) / 1024 })
	// A leak keeps growing; a buffer reaching its bound is a step, then
	// flat. The verdict is on the second half of the minutes after the
	// warm-up, over each minute's lowest reading: a leak lifts the floor,
	// while a large run in flight at the moment of one reading (the
	// embedder's arena holds a run's peak for 3 s) only lifts that reading.
	late := trend[len(trend)/2:]
	lateSlope := slope(late, func(s sample) float64 { return float64(s.rssKB) / 1024 })
	// Where it grows, to tell a leak from a cache filling: anonymous memory
	// (of it the Go heap; the rest is C's) and file-backed pages (the
	// database's memory map grows with the database).
	lateAnon := slope(late, func(s sample) float64 { return float64(s.anonKB) / 1024 })
	lateHeap := slope(late, func(s sample) float64 { return float64(s.heapKB) / 1024 })
	lateFile := slope(late, func(s sample) float64 { return float64(s.fileKB) / 1024 })
	fdSlope := slope(trend, func(s sample) float64 { return float64(s.fds) })
	grSlope := slope(trend, func(s sample) float64 { return float64(s.goroutines) })
	t0, tN := trend[0], trend[len(trend)-1]
	// A leak of 100 KB a minute is 150 MB a day: past what a 2 GB box
	// running for months can carry. Files and goroutines may wander by a
	// few (connections in flight) but must not climb.
	if lateSlope > 0.1 {
		problems = append(problems, fmt.Sprintf("RSS still grows %.2f MB/min in the last %d minutes", lateSlope, len(late)-1))
	}
	if tN.fds > t0.fds+8 && fdSlope > 0.2 {
		problems = append(problems, fmt.Sprintf("open files climb from %d to %d", t0.fds, tN.fds))
	}
	if tN.goroutines > t0.goroutines+15 && grSlope > 0.3 {
		problems = append(problems, fmt.Sprintf("goroutines climb from %d to %d", t0.goroutines, tN.goroutines))
	}
	c.mu.Lock()
	for _, e := range c.errs {
		problems = append(problems, "load: "+e)
	}
	c.mu.Unlock()

	var b strings.Builder
	fmt.Fprintf(&b, "Load for %d minutes (%s): %d WeCom callbacks from %d users, %d voice turns (a new connection each), %d `agentctl send`, %d scheduled jobs due every minute (%d runs delivered), %d model requests; memory grew to %s (sessions compressed).\n\n",
		minutes, elapsed.Round(time.Second), c.wecom.Load(), users, c.voice.Load(), c.admin.Load(), jobs, sum(runs), llm.Count(), facts())
	fmt.Fprintf(&b, "RSS is read every 10 s: the minute's lowest reading (with its anonymous and file-backed parts), and its highest.\n\n")
	fmt.Fprintf(&b, "| minute | RSS, lowest | of which anonymous / files | RSS, highest | Go heap in use | open files | goroutines | restarts | sent (WeCom / voice / admin) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range samples {
		fmt.Fprintf(&b, "| %d | %.1f MB | %.1f / %.1f MB | %.1f MB | %.1f MB | %d | %d | %d | %d / %d / %d |\n", s.minute, float64(s.rssKB)/1024, float64(s.anonKB)/1024, float64(s.fileKB)/1024, float64(s.peakKB)/1024, float64(s.heapKB)/1024, s.fds, s.goroutines, s.restarts, s.wecom, s.voice, s.admin)
	}
	fmt.Fprintf(&b, "\nAfter the %d-minute warm-up (least squares over each minute's lowest reading): RSS %+.3f MB/min (%.1f -> %.1f MB), in the last %d minutes %+.3f MB/min (the verdict: at most +0.1; anonymous %+.3f, of which the Go heap %+.3f; file-backed %+.3f); open files %+.2f/min (%d -> %d), goroutines %+.2f/min (%d -> %d). ",
		warmup, rssSlope, float64(t0.rssKB)/1024, float64(tN.rssKB)/1024, len(late)-1, lateSlope, lateAnon, lateHeap, lateFile, fdSlope, t0.fds, tN.fds, grSlope, t0.goroutines, tN.goroutines)
	fmt.Fprintf(&b, "WeCom replies delivered exactly once: %d of %d; voice turns answered: %d of %d; agentctl sends answered: %d of %d; restarts: %d.\n",
		len(want)-len(missing)-len(doubled), len(want), c.voiceOK.Load(), c.voice.Load(), c.adminOK.Load(), c.admin.Load(), last.restarts)
	if len(problems) > 0 {
		fmt.Fprintf(&b, "\n**FAILED**: %s\n", strings.Join(problems, "; "))
		return b.String(), errors.New(strings.Join(problems, "; "))
	}
	fmt.Fprintf(&b, "\nVerdict: no restart, nothing lost or doubled, no upward trend.\n")
	return b.String(), nil
}

// setKey sets key = value in [section] of a TOML text: the key's line
// replaced, or a line added after the section's header.
func setKey(cfg, section, key, value string) string {
	lines := strings.Split(cfg, "\n")
	in := false
	header := -1
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "[") {
			in = t == "["+section+"]"
			if in {
				header = i
			}
			continue
		}
		if in {
			if k, _, ok := strings.Cut(t, "="); ok && strings.TrimSpace(k) == key {
				lines[i] = key + " = " + value
				return strings.Join(lines, "\n")
			}
		}
	}
	if header < 0 {
		return cfg + "\n[" + section + "]\n" + key + " = " + value + "\n"
	}
	lines = append(lines[:header+1], append([]string{key + " = " + value}, lines[header+1:]...)...)
	return strings.Join(lines, "\n")
}

func user(n int) string { return fmt.Sprintf("soak-user-%d", n%users) }

// every calls fn(1), fn(2), ... each period until ctx ends (open loop:
// a slow call does not delay the next).
func every(ctx context.Context, period time.Duration, fn func(n int)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(period)
	defer t.Stop()
	for n := 1; ; n++ {
		wg.Go(func() { fn(n) })
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func wecomTurn(crypto *wx.Crypto, c *counters, n int) {
	c.wecom.Add(1)
	text := fmt.Sprintf("soak-w-%d: the meeting room %d is booked for the review", n, n%7)
	if err := callback(crypto, user(n), text, 7000000+n); err != nil {
		c.callbackErrs.Add(1)
		c.fail("callback %d: %v", n, err)
	}
}

var callbackClient = &http.Client{Timeout: 10 * time.Second}

func callback(crypto *wx.Crypto, from, text string, id int) error {
	m := &wx.Message{ToUserName: corpID, FromUserName: from, CreateTime: time.Now().Unix(),
		MsgType: "text", Content: text, MsgID: strconv.Itoa(id), AgentID: agentID}
	req, err := wecomtest.CallbackRequest(crypto, "http://"+listen+"/wecom/callback", m, strconv.FormatInt(time.Now().Unix(), 10), "n"+strconv.Itoa(id))
	if err != nil {
		return err
	}
	resp, err := callbackClient.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "success" {
		return fmt.Errorf("HTTP %d %q", resp.StatusCode, body)
	}
	return nil
}

func voiceTurn(c *counters, n int) {
	c.voice.Add(1)
	err := func() error {
		d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
		ws, _, err := d.Dial("ws://"+listen+"/voice", nil)
		if err != nil {
			return err
		}
		defer ws.Close()
		ws.SetReadDeadline(time.Now().Add(60 * time.Second))
		hello := map[string]any{"type": "hello", "token": voiceToken, "device": fmt.Sprintf("panel-%d", n%4),
			"profile": "voice", "sample_rate": 16000, "protocol": "agent.voice.v1"}
		if err := ws.WriteJSON(hello); err != nil {
			return err
		}
		if err := ws.WriteJSON(map[string]string{"type": "text", "text": fmt.Sprintf("soak-v-%d what is on today", n)}); err != nil {
			return err
		}
		for {
			var f struct {
				Type, Text, Code, Message string
				Final                     bool
			}
			if err := ws.ReadJSON(&f); err != nil {
				return err
			}
			switch {
			case f.Type == "error":
				return fmt.Errorf("error %s: %s", f.Code, f.Message)
			case f.Type == "reply" && f.Final:
				if !strings.Contains(f.Text, fmt.Sprintf("soak-v-%d", n)) {
					return fmt.Errorf("reply %q is not this turn's", f.Text)
				}
				return nil
			}
		}
	}()
	if err != nil {
		c.voiceBad.Add(1)
		c.fail("voice turn %d: %v", n, err)
		return
	}
	c.voiceOK.Add(1)
}

// adminSend is an operator's turn through the admin socket (agentctl
// send speaks on the admin channel and prints the reply).
func adminSend(c *counters, n int) {
	c.admin.Add(1)
	token := fmt.Sprintf("soak-a-%d", n)
	out, err := exec.Command("agentctl", "-config", "/etc/agent/config.toml", "send", "--to", "soak-admin",
		token+" from the operator").CombinedOutput()
	switch {
	case err != nil:
		c.fail("agentctl send %d: %v: %s", n, err, strings.TrimSpace(string(out)))
	case !strings.Contains(string(out), token):
		c.fail("agentctl send %d: reply %q is not this turn's", n, strings.TrimSpace(string(out)))
	default:
		c.adminOK.Add(1)
		return
	}
	c.adminBad.Add(1)
}

func waitReady(limit time.Duration) error {
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		out, _ := exec.Command("systemctl", "show", "agent", "-p", "StatusText", "--value").Output()
		if strings.Contains(string(out), "serving on") {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.New("the service did not become ready")
}

func prop(name string) int {
	out, _ := exec.Command("systemctl", "show", "agent", "-p", name, "--value").Output()
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}

// rss reads one kB field of the process's status (VmRSS:, RssAnon:, ...).
func rss(pid int, field string) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

func fds(pid int) int {
	e, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(e)
}

// goMetrics reads the daemon's goroutines and Go heap in use (KB) from
// /metrics; -1 for what it could not read.
func goMetrics() (goroutines, heapKB int) {
	goroutines, heapKB = -1, -1
	resp, err := http.Get("http://" + listen + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			goroutines = int(n)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			heapKB = int(n / 1024)
		}
	}
	return
}

// facts is the number of facts in memory (agentctl memory list).
func facts() string {
	out, err := exec.Command("agentctl", "-config", "/etc/agent/config.toml", "--json", "memory", "list", "--limit", "1000").Output()
	if err != nil {
		return "(agentctl memory list failed)"
	}
	var list []json.RawMessage
	if err := json.Unmarshal(out, &list); err != nil {
		return "(agentctl memory list: " + err.Error() + ")"
	}
	return fmt.Sprintf("%d facts", len(list))
}

// slope is the least-squares slope of f over the samples, per minute.
func slope(s []sample, f func(sample) float64) float64 {
	var n, sx, sy, sxx, sxy float64
	for _, v := range s {
		x, y := float64(v.minute), f(v)
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	if d := n*sxx - sx*sx; d != 0 {
		return (n*sxy - sx*sy) / d
	}
	return 0
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

func sum(m map[string]int) int {
	t := 0
	for _, v := range m {
		t += v
	}
	return t
}
