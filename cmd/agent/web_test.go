package main

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"agent/pkg/llm/llmtest"
	"agent/pkg/webtest"
	wx "agent/pkg/wecom"
	"agent/pkg/wecom/wecomtest"
)

// A link a colleague shares on WeCom, end to end through the real daemon
// binary: the callback's link message reaches the model with its URL and
// the web_fetch hint, the model reads the page (a local news site,
// allowed by web.fetch_allow) and the summary goes back through the
// WeCom API. A link to the box's own listener is refused.
func TestWeComLinkIsRead(t *testing.T) {
	site := webtest.NewSite(t)
	url := regexp.MustCompile(`https?://[^\s\]]+`)
	srv := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		last := r.Last()
		switch {
		case last.Role == "user" && strings.Contains(last.Content, "(web_fetch reads the page)"):
			b, _ := json.Marshal(map[string]string{"url": url.FindString(last.Content)})
			return llmtest.Calls(llmtest.Call("web_fetch", string(b)))
		case last.Role == "tool":
			for line := range strings.SplitSeq(last.Content, "\n") {
				if strings.Contains(line, "megawatts") {
					return llmtest.Text("SUMMARY: " + line)
				}
			}
			return llmtest.Text("FAILED: " + strings.SplitN(last.Content, "\n", 2)[0])
		}
		return llmtest.Text("re: " + last.Content)
	})
	api := wecomtest.NewServer(e2eCorpID, "secret", e2eAgent)
	defer api.Close()
	dir := t.TempDir()
	writeConfig(t, dir, wecomConfig(srv.URL(), api.URL, "open")+"[web]\nengines = []\nfetch_allow = [\""+site.Allow()[0]+"\"]\n")
	in, base, crypto := startWeCom(t, dir)
	link := func(id, u string) *wx.Message {
		return &wx.Message{ToUserName: e2eCorpID, FromUserName: "zed", CreateTime: time.Now().Unix(), MsgType: wx.MsgLink,
			Title: "Tidal power", Description: "Have a look", URL: u, MsgID: id, AgentID: e2eAgent}
	}
	reply := func(n int) string {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			var got []string
			for _, m := range api.Messages() {
				if m.ToUser == "zed" {
					got = append(got, m.Content)
				}
			}
			if len(got) >= n {
				return got[n-1]
			}
			if time.Now().After(deadline) {
				t.Fatalf("no reply %d; sent %q", n, got)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if ok, err := postCallback(http.DefaultClient, crypto, base, link("1", site.URL+"/article"), "1"); !ok || err != nil {
		t.Fatalf("callback: %v %v", ok, err)
	}
	if got := reply(1); !strings.HasPrefix(got, "SUMMARY: ") || !strings.Contains(got, "40 megawatts") {
		t.Fatalf("reply: %q", got)
	}
	hits := site.Hits()
	if ok, err := postCallback(http.DefaultClient, crypto, base, link("2", base+"/metrics"), "2"); !ok || err != nil {
		t.Fatalf("callback: %v %v", ok, err)
	}
	if got := reply(2); !strings.HasPrefix(got, "FAILED: ") {
		t.Fatalf("a link to the box itself: %q", got)
	}
	if site.Hits() != hits {
		t.Fatal("the refused link reached the site")
	}
	in.cmd.Process.Signal(syscall.SIGTERM)
	if code := in.wait(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
