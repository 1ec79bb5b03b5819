package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/admin"
	"agent/pkg/channel"
	"agent/pkg/channel/builtin"
	"agent/pkg/channel/gate"
	"agent/pkg/channelhost"
	"agent/pkg/health"
	"agent/pkg/llm/llmtest"
	"agent/pkg/tools"
	"agent/pkg/turn"
)

// echoChannel is README's "Adding a channel" example, whole: one HTTP
// route that passes the DM-policy gate and asks the assistant, and a Send
// for what the assistant sends unprompted. A real channel is this in its
// own package, plus one line in pkg/channel/builtin and its config
// section.
type echoChannel struct {
	env  channelhost.Env
	sent chan string
}

func buildEcho(sent chan string) channelhost.Build {
	return func(_ context.Context, env channelhost.Env) (channel.Channel, error) {
		return &echoChannel{env: env, sent: sent}, nil
	}
}

func (c *echoChannel) Name() string { return "echo" }

func (c *echoChannel) Routes() []channel.Route {
	return []channel.Route{{Pattern: "POST /echo/{user}", Handler: http.HandlerFunc(c.serve)}}
}

func (c *echoChannel) serve(w http.ResponseWriter, r *http.Request) {
	user := r.PathValue("user")
	text, err := io.ReadAll(io.LimitReader(r.Body, 4<<10))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	dec, err := c.env.Gate.Admit(r.Context(), nil, gate.Request{Principals: []string{"echo:" + user}})
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	case !dec.Allowed():
		http.Error(w, "not allowed (security.dm_policy)", http.StatusForbidden)
		return
	}
	if err := c.env.Turns.Err(); err != nil { // the pipeline did not start
		http.Error(w, "the assistant is unavailable: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	var mu sync.Mutex
	var replies []string
	done, err := c.env.Turns.Handle(r.Context(), turn.Message{Channel: "echo", Sender: user, Text: string(text)},
		turn.Sink{Reply: func(_ context.Context, text string) error {
			mu.Lock()
			replies = append(replies, text)
			mu.Unlock()
			return nil
		}})
	if err == nil {
		<-done
	}
	mu.Lock()
	defer mu.Unlock()
	w.Write([]byte(strings.Join(replies, "\n")))
}

func (c *echoChannel) Run(ctx context.Context) error { return nil } // nothing in the background

// Tools: a channel's own tools are for its own users. One that names no
// profile (every channel's users), the operator's or another channel's
// is not registered.
func (c *echoChannel) Tools() []tools.Tool {
	echo := func(context.Context, tools.Call) (string, error) { return "echo", nil }
	return []tools.Tool{
		{Name: "echo_back", Description: "Echo.", Profiles: []string{"echo"}, Handler: echo},
		{Name: "echo_everyone", Description: "Echo.", Handler: echo},
		{Name: "echo_operator", Description: "Echo.", Profiles: []string{"echo", "admin"}, Handler: echo},
		{Name: "echo_to_wecom", Description: "Echo.", Profiles: []string{"wecom"}, Handler: echo},
	}
}

func (c *echoChannel) Send(_ context.Context, to, text string) error {
	c.sent <- to + ": " + text
	return nil
}

// brokenChannel's background work panics every time it starts.
type brokenChannel struct{}

func (brokenChannel) Name() string                                       { return "broken" }
func (brokenChannel) Routes() []channel.Route                            { return nil }
func (brokenChannel) Send(context.Context, string, string) error         { return errors.New("broken") }
func (brokenChannel) Run(context.Context) error                          { panic("a bug in the channel") }
func buildBroken(context.Context, channel.Host) (channel.Channel, error) { return brokenChannel{}, nil }

// A channel added to the list gets its route mounted, its users' messages
// through the gate into the assistant, and what the assistant sends to its
// users (the message tool) by its name. A channel whose Run panics is
// reported on /healthz and restarted; the daemon and the other channels
// run on.
func TestAddingAChannel(t *testing.T) {
	srv := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		if last := r.Last(); last.Role == "user" && strings.Contains(last.Content, "tell bob") {
			return llmtest.Calls(llmtest.Call("message", `{"channel":"echo","to":"bob","text":"lunch at noon"}`))
		}
		return llmtest.Text("you said: " + r.LastUser())
	})
	cfg := fakeLLMConfig(t, srv.BaseURL(), `owners = ["echo:alice"]
[security]
dm_policy = "allowlist"
allow_from = ["echo:alice"]
`)
	sent := make(chan string, 4)
	n := newFakeNotifier(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	channels := append(builtin.Channels(),
		channelhost.Builder{Name: "echo", Build: buildEcho(sent)},
		channelhost.Builder{Name: "broken", Build: channelhost.Plain(buildBroken)})
	go func() {
		done <- Run(ctx, Options{Config: cfg, Notifier: n, Channels: channels})
	}()
	n.waitFor(t, "READY=1", 1)
	base := "http://" + readyAddr(t, n)

	post := func(user, text string) (int, string) {
		t.Helper()
		resp, err := http.Post(base+"/echo/"+user, "text/plain", strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("alice", "hello there"); code != http.StatusOK || body != "you said: hello there" {
		t.Fatalf("alice: %d %q", code, body)
	}
	if code, _ := post("mallory", "hello"); code != http.StatusForbidden {
		t.Fatalf("mallory, not in allow_from: %d", code)
	}
	if code, _ := post("alice", "tell bob about lunch"); code != http.StatusOK {
		t.Fatalf("alice asking to tell bob: %d", code)
	}
	select {
	case got := <-sent:
		if got != "bob: lunch at noon" {
			t.Errorf("echo channel sent %q", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the message tool did not reach the echo channel")
	}

	// The broken channel is reported, degraded, never failing.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var hz healthzBody
		if err := json.Unmarshal([]byte(get(t, base+"/healthz")), &hz); err != nil {
			t.Fatal(err)
		}
		var broken health.Result
		for _, c := range hz.Checks {
			if c.Name == "channel_broken" {
				broken = c
			}
		}
		if broken.Status == health.Degraded && strings.Contains(broken.Detail, "panic") {
			break
		}
		if broken.Status == health.Failing || time.Now().After(deadline) {
			t.Fatalf("channel_broken check: %+v", broken)
		}
		time.Sleep(10 * time.Millisecond) // the supervisor restarts it on the real clock
	}
	st := admin.NewClient(cfg.Server.AdminSocket)
	if _, err := st.Status(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := st.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	for _, tool := range list.Tools {
		registered[tool.Name] = true
	}
	if !registered["echo_back"] || registered["echo_everyone"] || registered["echo_operator"] || registered["echo_to_wecom"] {
		t.Errorf("the echo channel's tools registered: %v", registered)
	}
	if code, _ := post("alice", "still there?"); code != http.StatusOK {
		t.Fatalf("the echo channel after the other one panicked: %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
