package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"agent/pkg/admin"
	"agent/pkg/llm/llmtest"
	wx "agent/pkg/wecom"
	"agent/pkg/wecom/wecomtest"
)

const (
	e2eToken  = "QDG6eK"
	e2eAESKey = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
	e2eCorpID = "wx5823bf96d3bd56c7"
	e2eAgent  = 1000002
)

// echoLLM answers every conversation with "re: " and the last user text;
// its Count says whether a client reached the model at all.
func echoLLM(t *testing.T) *llmtest.Server {
	t.Helper()
	return llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: "re: " + r.LastUser(), Usage: &llmtest.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}}
	})
}

func wecomConfig(llmURL, apiURL, policy string) string {
	return fmt.Sprintf(`[llm]
provider = "custom"
model = "fake"
base_url = %q
[security]
dm_policy = %q
[wecom]
enabled = true
corp_id = %q
corp_secret = "secret"
agent_id = %d
token = %q
encoding_aes_key = %q
api_base = %q
debounce = "50ms"
`, llmURL+"/v1", policy, e2eCorpID, e2eAgent, e2eToken, e2eAESKey, apiURL)
}

func readyAddr(t *testing.T, ns *notifySock) string {
	t.Helper()
	ready := ns.await(t, "READY=1")
	return "http://" + strings.TrimSpace(ready[strings.Index(ready, "serving on ")+len("serving on "):])
}

// startWeCom starts the daemon configured in dir (with wecomConfig) and
// returns it, its base URL once it is ready, and the callback crypto of
// wecomConfig's token and key.
func startWeCom(t *testing.T, dir string) (*instance, string, *wx.Crypto) {
	t.Helper()
	ns := newNotifySock(t)
	in := start(t, dir, "NOTIFY_SOCKET="+ns.path)
	base := readyAddr(t, ns)
	crypto, err := wx.NewCrypto(e2eToken, e2eAESKey, e2eCorpID)
	if err != nil {
		t.Fatal(err)
	}
	return in, base, crypto
}

func postCallback(client *http.Client, c *wx.Crypto, base string, m *wx.Message, nonce string) (bool, error) {
	req, err := wecomtest.CallbackRequest(c, base+"/wecom/callback", m, strconv.FormatInt(time.Now().Unix(), 10), nonce)
	if err != nil {
		return false, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode == 200 && string(body) == "success", nil
}

// The real daemon, WeCom end to end: URL verification, pairing through
// agentctl's API, and a reply delivered through the fake API.
func TestWeComThroughTheDaemon(t *testing.T) {
	api := wecomtest.NewServer(e2eCorpID, "secret", e2eAgent)
	defer api.Close()
	dir := t.TempDir()
	writeConfig(t, dir, wecomConfig(echoLLM(t).URL(), api.URL, "pairing"))
	in, base, crypto := startWeCom(t, dir)
	req, _ := wecomtest.VerifyRequest(crypto, base+"/wecom/callback", "echo-123", strconv.FormatInt(time.Now().Unix(), 10), "n", true)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "echo-123" {
		t.Fatalf("verification: %d %q", resp.StatusCode, body)
	}
	msg := func(id, text string) *wx.Message {
		return &wx.Message{ToUserName: e2eCorpID, FromUserName: "zed", CreateTime: time.Now().Unix(), MsgType: "text", Content: text, MsgID: id, AgentID: e2eAgent}
	}
	sentTo := func(user string) []string {
		var out []string
		for _, m := range api.Messages() {
			if m.ToUser == user {
				out = append(out, m.Content)
			}
		}
		return out
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if ok, err := postCallback(http.DefaultClient, crypto, base, msg("1", "hello"), "1"); !ok || err != nil {
		t.Fatalf("callback: %v %v", ok, err)
	}
	waitFor("the pairing code", func() bool { return len(sentTo("zed")) == 1 })
	c := admin.NewClient(filepath.Join(dir, "var", "agent.sock"))
	list, err := c.PairList(context.Background())
	if err != nil || len(list) != 1 || list[0].State != "pending" || !strings.Contains(sentTo("zed")[0], list[0].Code) {
		t.Fatalf("pair list %+v %v; sent %q", list, err, sentTo("zed"))
	}
	if p, err := c.PairApprove(context.Background(), list[0].Code); err != nil || p.User != "wecom:zed" {
		t.Fatalf("approve %+v %v", p, err)
	}
	waitFor("the approval notice", func() bool { return len(sentTo("zed")) == 2 })
	postCallback(http.DefaultClient, crypto, base, msg("2", "what now?"), "2")
	waitFor("the answer", func() bool { return len(sentTo("zed")) == 3 })
	if got := sentTo("zed")[2]; got != "re: what now?" {
		t.Fatalf("answer %q", got)
	}
	in.cmd.Process.Signal(syscall.SIGTERM)
	if code := in.wait(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// Kill -9 the daemon in the middle of a flood of callbacks, restart it:
// every acknowledged MsgId gets its reply, and exactly one unless the kill
// landed between a send and its record (at most the sender's parallelism).
func TestWeComCrashMidFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("floods a real daemon")
	}
	api := wecomtest.NewServer(e2eCorpID, "secret", e2eAgent)
	defer api.Close()
	dir := t.TempDir()
	writeConfig(t, dir, wecomConfig(echoLLM(t).URL(), api.URL, "open"))
	in, base, crypto := startWeCom(t, dir)

	const total, rate, killAt = 300, 200, 150
	client := &http.Client{Timeout: 5 * time.Second}
	var mu sync.Mutex
	acked := map[int]bool{}
	var wg sync.WaitGroup
	start0 := time.Now()
	for i := range total {
		if i == killAt {
			in.cmd.Process.Kill() // SIGKILL mid-flood
		}
		if d := time.Until(start0.Add(time.Duration(i) * time.Second / rate)); d > 0 {
			time.Sleep(d) // pacing the load, not synchronisation
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			m := &wx.Message{ToUserName: e2eCorpID, FromUserName: "u" + strconv.Itoa(i), CreateTime: time.Now().Unix(),
				MsgType: "text", Content: "m" + strconv.Itoa(i), MsgID: strconv.Itoa(100000 + i), AgentID: e2eAgent}
			if ok, _ := postCallback(client, crypto, base, m, strconv.Itoa(i)); ok {
				mu.Lock()
				acked[i] = true
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	in.wait(t)
	if len(acked) == 0 {
		t.Fatal("no callback acknowledged before the kill")
	}
	ns2 := newNotifySock(t)
	in2 := start(t, dir, "NOTIFY_SOCKET="+ns2.path)
	readyAddr(t, ns2)

	count := func() map[string][]string {
		got := map[string][]string{}
		for _, m := range api.Messages() {
			got[m.ToUser] = append(got[m.ToUser], m.Content)
		}
		return got
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		got := count()
		missing := 0
		for i := range acked {
			if len(got["u"+strconv.Itoa(i)]) == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged messages never answered", missing, len(acked))
		}
		time.Sleep(50 * time.Millisecond)
	}
	got := count()
	dups := 0
	for i := range acked {
		replies := got["u"+strconv.Itoa(i)]
		want := "re: m" + strconv.Itoa(i)
		for _, r := range replies {
			if r != want {
				t.Errorf("u%d got %q, want %q", i, r, want)
			}
		}
		dups += len(replies) - 1
	}
	// A send in flight at the kill is in doubt: it is sent again with the
	// same duplicate check, which the fake WeCom (like the real one) does
	// not deliver twice within the interval. No reply may arrive twice.
	inDoubt := 0
	if m := regexp.MustCompile(`in_doubt=(\d+)`).FindStringSubmatch(in2.stderr.String()); m != nil {
		inDoubt, _ = strconv.Atoi(m[1])
	}
	t.Logf("%d sent, %d acknowledged, all answered after kill -9 and restart; %d duplicate replies, %d sends in doubt", total, len(acked), dups, inDoubt)
	if dups != 0 {
		t.Errorf("%d duplicate replies (%d sends were in doubt); want none", dups, inDoubt)
	}
	in2.cmd.Process.Signal(syscall.SIGTERM)
	in2.wait(t)
}
