package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	wx "agent/pkg/wecom"
	"agent/pkg/wecom/wecomtest"
)

// Exactly-once replies across kill -9, against the daemon binary: 200 users
// each send one message; WeCom's API (the fake, which implements the
// documented duplicate check) is slow, so sends are in flight when the
// daemon is killed with SIGKILL, three times during the flood. Callbacks
// not acknowledged are posted again after each restart, as WeCom retries.
// Once the outbox has drained, every user has exactly one reply: none lost,
// none twice, and the sends that were in flight at a kill were resent and
// dropped by the duplicate check. Before the flood, one user gets the same
// reply twice on purpose; both arrive.
func TestWeComExactlyOnceAcrossKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a real daemon mid-flood")
	}
	began := time.Now()
	api := wecomtest.NewServer(e2eCorpID, "secret", e2eAgent)
	defer api.Close()
	dir := t.TempDir()
	writeConfig(t, dir, wecomConfig(echoLLM(t).URL(), api.URL, "open"))
	crypto, err := wx.NewCrypto(e2eToken, e2eAESKey, e2eCorpID)
	if err != nil {
		t.Fatal(err)
	}
	var logs []*instance
	boot := func() (*instance, string) {
		t.Helper()
		ns := newNotifySock(t)
		in := start(t, dir, "NOTIFY_SOCKET="+ns.path)
		logs = append(logs, in)
		return in, readyAddr(t, ns)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second) // a hung daemon, not a timing assertion
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond) // poll
		}
	}
	client := &http.Client{Timeout: 5 * time.Second}
	message := func(from, id, text string) *wx.Message {
		return &wx.Message{ToUserName: e2eCorpID, FromUserName: from, CreateTime: time.Now().Unix(),
			MsgType: "text", Content: text, MsgID: id, AgentID: e2eAgent}
	}

	in, base := boot()

	// A legitimate repeat: the same question twice, the same answer twice.
	for i, id := range []string{"900001", "900002"} {
		if ok, err := postCallback(client, crypto, base, message("rep", id, "same"), id); !ok || err != nil {
			t.Fatalf("callback %s: %v %v", id, ok, err)
		}
		waitFor("the repeated answer", func() bool { return api.Delivered("rep", "re: same") == i+1 })
	}

	// The flood, with sends in flight at every kill.
	api.SetSendDelay(40 * time.Millisecond)
	const users = 200
	kills := []int{30, 80, 130} // kill when the API has delivered this many flood replies
	var mu sync.Mutex
	acked := make([]bool, users)
	// post sends every callback not yet acknowledged (16 at a time) to base.
	post := func(base string) {
		var wg sync.WaitGroup
		next := make(chan int)
		for range 16 {
			wg.Go(func() {
				for i := range next {
					ok, _ := postCallback(client, crypto, base, message("u"+strconv.Itoa(i), strconv.Itoa(100000+i), "m"+strconv.Itoa(i)), strconv.Itoa(i))
					if ok {
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
	floodDelivered := func() int { return len(api.Messages()) - 2 }
	for k, at := range kills {
		posted := make(chan struct{})
		go func(base string) { post(base); close(posted) }(base)
		waitFor(fmt.Sprintf("%d deliveries before kill %d", at, k+1), func() bool { return floodDelivered() >= at })
		in.cmd.Process.Signal(syscall.SIGKILL)
		<-posted
		in.wait(t)
		in, base = boot()
	}
	allAcked := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range acked {
			if !a {
				return false
			}
		}
		return true
	}
	for !allAcked() {
		post(base)
	}

	// Drained: every user answered and nothing left to send.
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "var", "agent.db")+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	waitFor("the outbox to drain", func() bool {
		var pending int
		if err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM outbox WHERE channel = 'wecom' AND state IN (0, 3)`).Scan(&pending); err != nil {
			return false
		}
		return pending == 0 && floodDelivered() >= users
	})

	lost, dups := 0, 0
	for i := range users {
		switch n := api.Delivered("u"+strconv.Itoa(i), "re: m"+strconv.Itoa(i)); {
		case n == 0:
			lost++
		case n > 1:
			dups += n - 1
			t.Errorf("u%d received its reply %d times", i, n)
		}
	}
	for d, n := range api.Deliveries() {
		if d.ToUser != "rep" && d.Content != "re: m"+strings.TrimPrefix(d.ToUser, "u") {
			t.Errorf("unexpected delivery %+v (%d)", d, n)
		}
	}
	if n := api.Delivered("rep", "re: same"); n != 2 {
		t.Errorf("the legitimate repeat was delivered %d times, want 2", n)
	}
	inDoubt := 0
	re := regexp.MustCompile(`in_doubt=(\d+)`)
	for _, in := range logs {
		for _, m := range re.FindAllStringSubmatch(in.stderr.String(), -1) {
			n, _ := strconv.Atoi(m[1])
			inDoubt += n
		}
	}
	dropped := len(api.Dropped())
	t.Logf("%d users, %d kill -9 mid-flood: %d replies delivered, %d lost, %d duplicates; %d sends in doubt after the kills, %d resends dropped by the duplicate check; %.1f s",
		users, len(kills), len(api.Messages()), lost, dups, inDoubt, dropped, time.Since(began).Seconds())
	if lost != 0 || dups != 0 {
		t.Fatalf("%d lost, %d duplicated", lost, dups)
	}
	if dropped == 0 || inDoubt == 0 {
		t.Fatalf("no send was in flight at a kill (in doubt %d, dropped %d): the test did not exercise the resend", inDoubt, dropped)
	}
	in.cmd.Process.Signal(syscall.SIGTERM)
	if code := in.wait(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
