// Package natstest runs real NATS servers (nats-server, embedded) with
// JetStream for tests: one node, or a cluster of three on loopback for the
// fault tests. Only test binaries import it.
package natstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Node is one running server.
type Node struct {
	tb      testing.TB
	opts    server.Options // a copy to restart from
	srv     *server.Server
	clientP int
	bin     string    // an external nats-server binary (NATSTEST_SERVER)
	cmd     *exec.Cmd // its process
}

// URL is the node's client URL.
func (n *Node) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.clientP) }

// Stop shuts the node down (a killed node, for the client side).
func (n *Node) Stop() {
	if n.cmd != nil {
		n.cmd.Process.Kill()
		n.cmd.Wait()
		n.cmd = nil
		return
	}
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.srv = nil
	}
}

// Restart starts a stopped node again on the same ports and store.
func (n *Node) Restart() {
	n.tb.Helper()
	if n.srv != nil || n.cmd != nil {
		return
	}
	if n.bin != "" {
		n.cmd = exec.Command(n.bin, "-js", "-sd", n.opts.StoreDir, "-a", "127.0.0.1", "-p", strconv.Itoa(n.clientP), "-n", n.opts.ServerName)
		if err := n.cmd.Start(); err != nil {
			n.tb.Fatalf("natstest: %s: %v", n.bin, err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", n.clientP)); err == nil {
				c.Close()
				return
			}
			if time.Now().After(deadline) {
				n.tb.Fatalf("natstest: %s does not listen", n.bin)
			}
		}
	}
	o := n.opts
	s, err := server.NewServer(&o)
	if err != nil {
		n.tb.Fatalf("natstest: restart: %v", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		n.tb.Fatal("natstest: restarted node not ready")
	}
	n.srv = s
}

// Server is the running embedded server (nil when stopped or external).
func (n *Node) Server() *server.Server { return n.srv }

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func start(tb testing.TB, o server.Options) *Node {
	tb.Helper()
	n := &Node{tb: tb, opts: o, clientP: o.Port}
	n.Restart()
	tb.Cleanup(n.Stop)
	return n
}

// Start runs one JetStream node on a free loopback port: embedded, or
// the nats-server binary NATSTEST_SERVER names (Debian's package, to test
// against the server an office installs).
func Start(tb testing.TB) *Node {
	tb.Helper()
	o := server.Options{ServerName: "n1", Host: "127.0.0.1", Port: freePort(tb), NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: filepath.Join(tb.TempDir(), "n1")}
	if bin := os.Getenv("NATSTEST_SERVER"); bin != "" {
		n := &Node{tb: tb, opts: o, clientP: o.Port, bin: bin}
		n.Restart()
		tb.Cleanup(n.Stop)
		return n
	}
	return start(tb, o)
}

// Cluster is three JetStream nodes routed to each other.
type Cluster struct {
	Nodes []*Node
}

// URLs is the nodes' client URLs, comma-separated (as nats.go takes them).
func (c *Cluster) URLs() string {
	var u []string
	for _, n := range c.Nodes {
		u = append(u, n.URL())
	}
	return strings.Join(u, ",")
}

// StartCluster runs a three-node JetStream cluster and waits for its
// meta leader.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	dir := tb.TempDir()
	var routes []string
	cports := make([]int, 3)
	for i := range cports {
		cports[i] = freePort(tb)
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", cports[i]))
	}
	c := &Cluster{}
	for i := range 3 {
		name := fmt.Sprintf("n%d", i+1)
		c.Nodes = append(c.Nodes, start(tb, server.Options{ServerName: name, Host: "127.0.0.1", Port: freePort(tb), NoLog: true, NoSigs: true,
			JetStream: true, StoreDir: filepath.Join(dir, name),
			Cluster: server.ClusterOpts{Name: "fleet", Host: "127.0.0.1", Port: cports[i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ","))}))
	}
	c.WaitLeader(tb)
	return c
}

// WaitLeader waits until the running nodes have a JetStream meta leader
// that knows all three peers.
func (c *Cluster) WaitLeader(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range c.Nodes {
			if s := n.srv; s != nil && s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == 3 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Fatal("natstest: no JetStream meta leader within 30 s")
}
