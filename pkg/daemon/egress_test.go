package daemon

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"agent/pkg/admin"
	"agent/pkg/egress"
	"agent/pkg/llm/llmtest"
	"agent/pkg/wecom/aibottest"
)

// openSockets are the TCP connections this process holds (established or
// connecting), as "local->remote" addresses, from /proc/self/net/tcp{,6}
// and the process's own socket inodes.
func openSockets(t *testing.T) []string {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var out []string
	for _, file := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || !inodes[fs[9]] {
				continue
			}
			if st := fs[3]; st != "01" && st != "02" { // ESTABLISHED, SYN_SENT
				continue
			}
			out = append(out, procAddr(fs[1])+"->"+procAddr(fs[2]))
		}
		f.Close()
	}
	return out
}

// procAddr reads /proc/net/tcp's "0100007F:1F90" as "127.0.0.1:8080".
func procAddr(s string) string {
	h, p, _ := strings.Cut(s, ":")
	b, err := hex.DecodeString(h)
	if err != nil {
		return s
	}
	var ip net.IP
	switch len(b) {
	case 4:
		ip = net.IP{b[3], b[2], b[1], b[0]}
	case 16:
		ip = make(net.IP, 16)
		for i := 0; i < 16; i += 4 {
			ip[i], ip[i+1], ip[i+2], ip[i+3] = b[i+3], b[i+2], b[i+1], b[i]
		}
	}
	var port int
	fmt.Sscanf(p, "%X", &port)
	return net.JoinHostPort(ip.String(), fmt.Sprint(port))
}

// The whole daemon with [privacy] egress_allow = ["127.0.0.1"]: WeCom (the
// AI Bot), a voice device, the model, memory and the scheduler at work, and an MCP server
// on 127.0.0.2, which is not allowed. The ledger shows the model's and the
// bot's traffic and the refused MCP connection; at the socket level, no
// connection of the process ever had an end outside 127.0.0.1.
func TestEgressOnlyToAllowedHosts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	srvMCP := mcp.NewServer(&mcp.Implementation{Name: "exfil", Version: "1"}, nil)
	hsrv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srvMCP }, nil)}
	go hsrv.Serve(ln)
	defer hsrv.Close()
	var hits atomic.Int32
	llmSrv := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		hits.Add(1)
		if strings.Contains(r.LastUser(), "remind me") {
			return llmtest.Calls(llmtest.Call("remember", `{"fact":"zhangsan likes tea"}`))
		}
		return llmtest.Text("fine")
	})
	bot := aibottest.New(t)
	dir := t.TempDir()
	cfg := botConfig(llmSrv.BaseURL(), bot.URL()) + fmt.Sprintf(`[voice]
token = "egress-token-0123456789"
[privacy]
egress_allow = ["127.0.0.1"]
[mcp_servers.exfil]
transport = "http"
url = "http://%s/mcp"
`, ln.Addr())
	addr, stop := startDaemonIn(t, dir, cfg)
	defer stop()
	if !bot.WaitReady(20 * time.Second) {
		t.Fatal("not subscribed")
	}
	var seen []string
	sample := func() { seen = append(seen, openSockets(t)...) }
	sample()
	waitFinished(t, bot, bot.Text("e1", "zhangsan", "single", "", "remind me: I like tea"))
	sample()
	// A voice device's text turn.
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/voice", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.WriteJSON(map[string]any{"type": "hello", "token": "egress-token-0123456789", "user": "lisi", "profile": "voice", "sample_rate": 16000,
		"protocol": "agent.voice.v1", "tts": false})
	if m := readFrame(t, ws); m["type"] != "ready" {
		t.Fatalf("voice hello: %v", m)
	}
	if got := say(t, ws, "hello"); got != "fine" {
		t.Fatalf("voice turn: %q", got)
	}
	sample()
	c := admin.NewClient(filepath.Join(dir, "var", "agent.sock"))
	if _, err := c.AddJob(context.Background(), admin.JobSpec{Owner: "wecom:zhangsan", Cron: "0 9 * * *", Text: "tea time"}); err != nil {
		t.Fatal(err)
	}
	var rep egress.Report
	deadline := time.Now().Add(30 * time.Second)
	for {
		sample()
		rep, err = c.Egress(context.Background(), 24)
		if err != nil {
			t.Fatal(err)
		}
		if refused(rep, egress.MCP, "127.0.0.2") > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the MCP server's connection was not refused: %+v", rep)
		}
		time.Sleep(20 * time.Millisecond)
	}
	bytes := map[egress.Purpose]int64{}
	for _, d := range rep.Destinations {
		if d.Host != "127.0.0.1" && d.Conns > 0 {
			t.Errorf("connected to %s for %s", d.Host, d.Purpose)
		}
		bytes[d.Purpose] += d.BytesIn + d.BytesOut
	}
	if bytes[egress.LLM] == 0 || bytes[egress.WeComBot] == 0 || len(rep.Rules) != 1 {
		t.Fatalf("ledger: %+v", rep)
	}
	for _, s := range seen {
		local, remote, _ := strings.Cut(s, "->")
		if !strings.HasPrefix(local, "127.0.0.1:") || !strings.HasPrefix(remote, "127.0.0.1:") {
			t.Fatalf("a socket outside the allowed host: %s (all: %q)", s, seen)
		}
	}
	if len(seen) == 0 {
		t.Fatal("no socket seen at all: the check saw nothing")
	}
	mt := get(t, "http://"+addr+"/metrics")
	if !strings.Contains(mt, `agent_egress_refused_total{host="127.0.0.2",purpose="mcp"}`) && !strings.Contains(mt, `agent_egress_refused_total{purpose="mcp",host="127.0.0.2"}`) {
		t.Fatalf("/metrics lacks the refusal")
	}
	if !strings.Contains(mt, `agent_egress_bytes_total{host="127.0.0.1",purpose="llm"}`) && !strings.Contains(mt, `agent_egress_bytes_total{purpose="llm",host="127.0.0.1"}`) {
		t.Fatalf("/metrics lacks the model's bytes")
	}
	if hits.Load() == 0 {
		t.Fatal("the model was never asked")
	}
}

func refused(rep egress.Report, p egress.Purpose, host string) int64 {
	for _, d := range rep.Destinations {
		if d.Purpose == p && d.Host == host {
			return d.Refused
		}
	}
	return 0
}
