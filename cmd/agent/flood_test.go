package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/admin"
	wx "agent/pkg/wecom"
	"agent/pkg/wecom/wecomtest"
)

// slowPost opens a connection from the loopback address src and starts a
// POST to /wecom/callback whose body never completes. It returns nil when
// the daemon closed the connection before the headers were sent.
func slowPost(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		if _, lerr := net.Listen("tcp", src+":0"); lerr != nil {
			t.Skipf("cannot use %s (needs the whole 127/8 on loopback): %v", src, lerr)
		}
		return nil
	}
	t.Cleanup(func() { c.Close() })
	if _, err := fmt.Fprintf(c, "POST /wecom/callback?msg_signature=0&timestamp=%d&nonce=n HTTP/1.1\r\nHost: %s\r\nContent-Type: text/xml\r\nContent-Length: 100000\r\n\r\n<xml>", time.Now().Unix(), addr); err != nil {
		return nil
	}
	return c
}

// The attack of the issue, against the daemon binary: slow-body POSTs to
// /wecom/callback (trickling a byte at a time) from several addresses and
// from loopback itself (a tunnel's address), far over server.max_conns.
// While they are held, /healthz answers, the admin socket answers, a
// WeCom POST with a bad signature is answered 4xx and a real signed
// callback is acknowledged — also from the flooding address. The daemon's
// descriptors stay bounded by the cap, not by the flood.
func TestSlowBodyFloodThroughTheDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("floods a real daemon")
	}
	api := wecomtest.NewServer(e2eCorpID, "secret", e2eAgent)
	defer api.Close()
	dir := t.TempDir()
	writeServerConfig(t, dir, "max_conns = 64\nmax_conns_per_client = 16\n", wecomConfig(echoLLM(t).URL(), api.URL, "open"))
	in, base, crypto := startWeCom(t, dir)
	addr := strings.TrimPrefix(base, "http://")
	fdsBefore := countFDs(t, in.cmd.Process.Pid)

	// 240 slow bodies: 40 from each of five addresses and from 127.0.0.1.
	const perAddr = 40
	var held []net.Conn
	for i := range 6 * perAddr {
		src := fmt.Sprintf("127.0.0.%d", 1+i%6)
		if c := slowPost(t, src, addr); c != nil {
			held = append(held, c)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // one byte per connection per tick: the trickle
		defer wg.Done()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				for _, c := range held {
					c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
					c.Write([]byte("x"))
				}
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	client := &http.Client{Timeout: 30 * time.Second} // a hang guard
	for round, src := range []string{"127.0.0.1", "127.0.0.9"} {
		local := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).DialContext, DisableKeepAlives: true}}
		resp, err := local.Get(base + "/healthz")
		if err != nil {
			t.Fatalf("/healthz from %s during the flood: %v", src, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("/healthz from %s during the flood: %d", src, resp.StatusCode)
		}
		resp, err = local.Post(base+"/wecom/callback?msg_signature=bad&nonce=n&timestamp="+strconv.FormatInt(time.Now().Unix(), 10), "text/xml",
			strings.NewReader("<xml><ToUserName>x</ToUserName><Encrypt>AAAA</Encrypt></xml>"))
		if err != nil {
			t.Fatalf("bad-signature callback from %s during the flood: %v", src, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Errorf("bad-signature callback from %s: %d; want 4xx", src, resp.StatusCode)
		}
		m := &wx.Message{ToUserName: e2eCorpID, FromUserName: "flood" + strconv.Itoa(round), CreateTime: time.Now().Unix(),
			MsgType: "text", Content: "hello", MsgID: strconv.Itoa(900 + round), AgentID: e2eAgent}
		if ok, err := postCallback(local, crypto, base, m, "n"+strconv.Itoa(round)); !ok || err != nil {
			t.Errorf("signed callback from %s during the flood: acknowledged %v, %v", src, ok, err)
		}
	}
	st, err := admin.NewClient(filepath.Join(dir, "var", "agent.sock")).Status(context.Background())
	if err != nil {
		t.Fatalf("admin socket during the flood: %v", err)
	}
	if st.PID != in.cmd.Process.Pid {
		t.Errorf("admin status pid %d", st.PID)
	}
	fds := countFDs(t, in.cmd.Process.Pid)
	t.Logf("flood: %d slow bodies opened; daemon descriptors %d before, %d during (max_conns 64)", len(held), fdsBefore, fds)
	if fds > fdsBefore+64+16 {
		t.Errorf("daemon holds %d descriptors during the flood (%d before): not bounded by max_conns 64", fds, fdsBefore)
	}
	resp, err := client.Get(base + "/metrics")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "agent_http_connections_evicted ") {
			t.Errorf("/metrics lacks the eviction count")
		}
	}
}

// countFDs counts the open descriptors of pid.
func countFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	return len(ents)
}
