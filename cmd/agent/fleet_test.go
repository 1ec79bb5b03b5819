package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"agent/pkg/fleet/natstest"
	wx "agent/pkg/wecom"
	"agent/pkg/wecom/wecomtest"
)

// Two real daemons (this binary, as processes) in fleet mode on a real
// NATS server, WeCom's callbacks at the ingress for users homed on the
// other box. The home box is killed with SIGKILL twice mid-burst and
// started again; then the ingress is killed the same way, and what it had
// not acknowledged is posted again (as WeCom retries). Every message is
// answered exactly once, by the home box.
func TestFleetKill9MidBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("kills real daemons mid-burst")
	}
	nats := natstest.Start(t)
	api := wecomtest.NewServer(e2eCorpID, "secret", e2eAgent)
	defer api.Close()
	api.SetSendDelay(20 * time.Millisecond)
	llm := echoLLM(t)
	fleetCfg := func(box string, ingress bool) string {
		return wecomConfig(llm.URL(), api.URL, "open") + fmt.Sprintf("[fleet]\nenabled = true\nnats_url = %q\nbox = %q\ningress = %v\ndefault_home = \"home\"\n", nats.URL(), box, ingress)
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	writeConfig(t, dirA, fleetCfg("ingress", true))
	writeConfig(t, dirB, fleetCfg("home", false))
	boot := func(dir string) (*instance, string) {
		t.Helper()
		ns := newNotifySock(t)
		in := start(t, dir, "NOTIFY_SOCKET="+ns.path)
		return in, readyAddr(t, ns)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second) // a hung daemon, not a timing assertion
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	crypto, err := wx.NewCrypto(e2eToken, e2eAESKey, e2eCorpID)
	if err != nil {
		t.Fatal(err)
	}
	ingress, base := boot(dirA)
	home, _ := boot(dirB)

	const users = 120
	client := &http.Client{Timeout: 10 * time.Second}
	var mu sync.Mutex
	acked := make([]bool, users)
	post := func(base string) {
		var wg sync.WaitGroup
		next := make(chan int)
		for range 8 {
			wg.Go(func() {
				for i := range next {
					m := &wx.Message{ToUserName: e2eCorpID, FromUserName: "f" + strconv.Itoa(i), CreateTime: time.Now().Unix(),
						MsgType: "text", Content: "m" + strconv.Itoa(i), MsgID: strconv.Itoa(300000 + i), AgentID: e2eAgent}
					if ok, _ := postCallback(client, crypto, base, m, strconv.Itoa(i)); ok {
						mu.Lock()
						acked[i] = true
						mu.Unlock()
					}
				}
			})
		}
		for i := range users {
			mu.Lock()
			done := acked[i]
			mu.Unlock()
			if !done {
				next <- i
			}
		}
		close(next)
		wg.Wait()
	}
	delivered := func() int { return len(api.Messages()) }

	// The home box dies twice while the ingress takes the burst.
	posted := make(chan struct{})
	go func() { post(base); close(posted) }()
	for k, at := range []int{20, 50} {
		waitFor(fmt.Sprintf("%d replies before the home box's kill %d", at, k+1), func() bool { return delivered() >= at })
		home.cmd.Process.Signal(syscall.SIGKILL)
		home.wait(t)
		home, _ = boot(dirB)
	}
	<-posted
	// Then the ingress dies mid-retry-round; what it did not acknowledge
	// is posted again to its successor, as WeCom retries.
	for i := range users / 2 {
		mu.Lock()
		acked[i] = false // WeCom's retries of messages already acknowledged: duplicates
		mu.Unlock()
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		ingress.cmd.Process.Signal(syscall.SIGKILL)
	}()
	post(base)
	ingress.wait(t)
	ingress, base = boot(dirA)
	for {
		post(base)
		mu.Lock()
		all := true
		for _, a := range acked {
			all = all && a
		}
		mu.Unlock()
		if all {
			break
		}
	}
	waitFor("every user answered", func() bool { return delivered() >= users })
	time.Sleep(500 * time.Millisecond) // nothing more arrives
	for i := range users {
		if n := api.Delivered("f"+strconv.Itoa(i), "re: m"+strconv.Itoa(i)); n != 1 {
			t.Errorf("f%d received its reply %d times", i, n)
		}
	}
	if n := delivered(); n != users {
		t.Errorf("%d messages sent to users, want %d", n, users)
	}
	if t.Failed() {
		os.Stderr.WriteString(home.stderr.String())
	}
	_ = ingress
}
