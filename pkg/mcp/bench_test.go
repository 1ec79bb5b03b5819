package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"

	"agent/pkg/config"
	"agent/pkg/tools"
)

// BenchmarkCallOverhead compares one echo tool call through the Manager
// (SDK client, result formatting, timeout) with a hand-written JSON-RPC
// tools/call exchange over the stdin/stdout pipes of the same fake server.
// The difference is what the Manager and the SDK cost per call.
func BenchmarkCallOverhead(b *testing.B) {
	b.Run("manager", func(b *testing.B) {
		h := newHarness(b, nil)
		h.m.Apply(context.Background(), map[string]config.MCPServer{"fake": fakeConfig(b, "basic")})
		h.waitReady(b, "fake")
		tool, _ := h.reg.Get("fake__echo")
		call := tools.Call{Args: json.RawMessage(`{"message":"ping"}`)}
		ctx := context.Background()
		b.ResetTimer()
		for b.Loop() {
			got, err := tool.Handler(ctx, call)
			if err != nil || got != "ping" {
				b.Fatalf("echo = %q, %v", got, err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		rc := startRaw(b)
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			got, err := rc.call(i+2, "echo", `{"message":"ping"}`)
			if err != nil || got != "ping" {
				b.Fatalf("echo = %q, %v", got, err)
			}
		}
	})
}

// rawClient speaks JSON-RPC to a fake server by hand.
type rawClient struct {
	in  io.WriteCloser
	out *bufio.Reader
}

func startRaw(b *testing.B) *rawClient {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{fakeEnv + "=basic", "PATH=/usr/bin:/bin"}
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
	})
	rc := &rawClient{in: in, out: bufio.NewReader(out)}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
	if _, err := io.WriteString(in, init); err != nil {
		b.Fatal(err)
	}
	if _, err := rc.response(1); err != nil {
		b.Fatal(err)
	}
	return rc
}

// call sends tools/call and returns the first text content of the result.
func (rc *rawClient) call(id int, tool, args string) (string, error) {
	req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`+"\n", id, tool, args)
	if _, err := io.WriteString(rc.in, req); err != nil {
		return "", err
	}
	raw, err := rc.response(id)
	if err != nil {
		return "", err
	}
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Content) == 0 {
		return "", fmt.Errorf("bad result %s: %v", raw, err)
	}
	return res.Content[0].Text, nil
}

// response reads lines until the response to id and returns its result.
func (rc *rawClient) response(id int) (json.RawMessage, error) {
	for {
		line, err := rc.out.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		var msg struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(line, &msg); err != nil {
			return nil, err
		}
		if msg.ID == nil || *msg.ID != id {
			continue // a notification or a request from the server
		}
		if msg.Error != nil {
			return nil, fmt.Errorf("error %s", msg.Error)
		}
		return msg.Result, nil
	}
}
