package customtool_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/customtool"
	"agent/pkg/sandbox"
	"agent/pkg/sandbox/sandboxtest"
	"agent/pkg/tools"
	"agent/pkg/workspace"
)

type fixture struct {
	dir    string // the workspace
	reg    *tools.Registry
	sb     *sandbox.Sandbox
	spaces *workspace.Spaces
	m      *customtool.Manager
	net    bool

	mu       sync.Mutex
	notices  []string
	notified chan struct{}
}

func newFixture(t *testing.T, mod func(*sandbox.Config)) *fixture {
	t.Helper()
	f := &fixture{dir: sandboxtest.Dir(t), notified: make(chan struct{}, 16)}
	f.sb = sandboxtest.New(t, mod)
	f.net = f.sb.NetworkAllowed()
	var err error
	f.spaces, err = workspace.Open(workspace.Config{Dir: f.dir, IsOwner: isBoss})
	if err != nil {
		t.Fatal(err)
	}
	f.open(t)
	return f
}

func isBoss(c tools.Call) bool { return c.User == "boss" }

// open (re)starts the manager on the fixture's folder, as a daemon
// restart does, with a fresh registry holding one built-in tool.
func (f *fixture) open(t *testing.T) {
	t.Helper()
	f.reg = tools.NewRegistry()
	for _, tl := range f.spaces.Tools() {
		if err := f.reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	m, err := customtool.Open(customtool.Config{
		Dir:      filepath.Join(f.dir, "custom_tools"),
		Registry: f.reg,
		Sandbox:  func(context.Context) (customtool.Runner, error) { return f.sb, nil },
		Spaces:   f.spaces,
		Owner:    isBoss,
		Network:  func() bool { return f.net },
		Notify: func(_ context.Context, text string) {
			f.mu.Lock()
			f.notices = append(f.notices, text)
			f.mu.Unlock()
			f.notified <- struct{}{}
		},
		Reserved: func(name string) bool { return name == "exec" || name == "web_search" },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Activate(); err != nil {
		t.Fatal(err)
	}
	f.m = m
}

func call(user string, args any) tools.Call {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return tools.Call{Args: b, User: user, Channel: "wecom", Profile: "wecom"}
}

// run calls a tool through the registry, as the agent loop does.
func (f *fixture) run(user, name string, args any) (string, error) {
	return f.reg.Run(context.Background(), name, call(user, args))
}

func (f *fixture) create(t *testing.T, user string, def map[string]any) (string, error) {
	t.Helper()
	if _, ok := def["parameters"]; !ok {
		def["parameters"] = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return f.run(user, "create_tool", def)
}

func (f *fixture) mustCreate(t *testing.T, user string, def map[string]any) string {
	t.Helper()
	out, err := f.create(t, user, def)
	if err != nil {
		t.Fatalf("create_tool %v: %v", def["name"], err)
	}
	return out
}

var wordCount = map[string]any{
	"name":        "word_count",
	"description": "Count the words of a text.",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{
		"text": map[string]any{"type": "string", "description": "the text"}}, "required": []string{"text"}},
	"code": "def word_count(text):\n    return {\"words\": len(text.split())}\n",
}

func TestOwnerToolIsLiveAndSurvivesRestart(t *testing.T) {
	f := newFixture(t, nil)
	out := f.mustCreate(t, "boss", wordCount)
	if !strings.Contains(out, "live") {
		t.Fatalf("create_tool: %s", out)
	}
	got, err := f.run("alice", "word_count", map[string]any{"text": "one two three"})
	if err != nil || got != `{"words": 3}` {
		t.Fatalf("word_count = %q, %v", got, err)
	}
	if _, err := f.run("alice", "word_count", map[string]any{}); !errors.Is(err, tools.ErrBadArgs) || !strings.Contains(err.Error(), "missing text") {
		t.Fatalf("without the required text: %v", err)
	}
	f.open(t) // restart
	got, err = f.run("alice", "word_count", map[string]any{"text": "a b"})
	if err != nil || got != `{"words": 2}` {
		t.Fatalf("after restart: %q, %v", got, err)
	}
	tl, ok := f.reg.Get("word_count")
	if !ok || !strings.Contains(tl.Description, "Count the words") || !strings.Contains(string(tl.Schema), `"required":["text"]`) {
		t.Fatalf("registered tool: %+v", tl)
	}
}

func TestShellToolAndScriptStylePython(t *testing.T) {
	f := newFixture(t, nil)
	f.mustCreate(t, "boss", map[string]any{
		"name": "greet", "description": "Greet someone.", "language": "sh",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{
			"who": map[string]any{"type": "string"}, "times": map[string]any{"type": "integer"}}},
		"code": `printf 'hello %s x%s; stdin=%s' "$ARG_who" "$ARG_times" "$(cat)"`,
	})
	got, err := f.run("alice", "greet", map[string]any{"who": "Bob; rm -rf /", "times": 2})
	if err != nil || got != `hello Bob; rm -rf / x2; stdin={"times":2,"who":"Bob; rm -rf /"}` {
		t.Fatalf("greet = %q, %v", got, err)
	}
	// No function of the tool's name: the script's output is the result,
	// the arguments are in the global args; it sees the caller's folder.
	if err := os.WriteFile(filepath.Join(f.userDir(t, "alice"), "notes.txt"), []byte("alice's notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.mustCreate(t, "boss", map[string]any{
		"name": "cat_file", "description": "Print a file of the caller's folder.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}},
		"code":       "print(open(args['path']).read(), end='')",
	})
	got, err = f.run("alice", "cat_file", map[string]any{"path": "notes.txt"})
	if err != nil || got != "alice's notes" {
		t.Fatalf("cat_file = %q, %v", got, err)
	}
	// Bob's run sees Bob's folder, not Alice's.
	if got, err := f.run("bob", "cat_file", map[string]any{"path": "notes.txt"}); err == nil || !strings.Contains(err.Error(), "No such file") {
		t.Fatalf("bob reading alice's notes: %q, %v", got, err)
	}
}

func (f *fixture) userDir(t *testing.T, user string) string {
	t.Helper()
	v, err := f.spaces.View(call(user, nil))
	if err != nil {
		t.Fatal(err)
	}
	return v.Work
}

func TestNonOwnerToolWaitsForApproval(t *testing.T) {
	f := newFixture(t, nil)
	out := f.mustCreate(t, "alice", wordCount)
	if !strings.Contains(out, "waits for an owner's approval") {
		t.Fatalf("create_tool by alice: %s", out)
	}
	select {
	case <-f.notified:
	case <-time.After(10 * time.Second):
		t.Fatal("the owners were not told")
	}
	f.mu.Lock()
	notice := f.notices[0]
	f.mu.Unlock()
	if !strings.Contains(notice, "wecom:alice wrote the tool word_count") || !strings.Contains(notice, "agentctl tools approve word_count ") {
		t.Fatalf("notice: %s", notice)
	}
	// Only approved text reaches other users' models.
	if got, _ := f.run("bob", "list_custom_tools", map[string]any{}); strings.Contains(got, "Count the words") || !strings.Contains(got, "word_count: pending, v1 pending approval, by wecom:alice") {
		t.Fatalf("bob's list shows a pending description:\n%s", got)
	}
	if got, _ := f.run("alice", "list_custom_tools", map[string]any{}); !strings.Contains(got, "Count the words") {
		t.Fatalf("alice's own list: %s", got)
	}
	// The waiting version cannot change under the owners' eyes.
	changed := clone(wordCount)
	changed["code"] = "def word_count(text):\n    return 'swapped'\n"
	if _, err := f.create(t, "alice", changed); err == nil || !strings.Contains(err.Error(), "waiting for an owner's decision") {
		t.Fatalf("replacing a waiting version: %v", err)
	}
	// An approval pinned to another digest is refused.
	if _, err := f.m.Approve("word_count", "ffffffffffff", "operator"); !errors.Is(err, customtool.ErrConflict) || !strings.Contains(err.Error(), "read it again") {
		t.Fatalf("approve with a stale digest: %v", err)
	}
	if _, err := f.run("alice", "remove_tool", map[string]any{"name": "word_count"}); err == nil || !strings.Contains(err.Error(), "waiting for an owner's decision") {
		t.Fatalf("withdrawing a waiting version: %v", err)
	}
	if got := f.m.Command("wecom:boss", true, []string{"/tools", "approve", "word_count", "v9"}); !strings.Contains(got, "not v9") {
		t.Fatalf("/tools approve with a stale version: %s", got)
	}
	if _, ok := f.reg.Get("word_count"); ok {
		t.Fatal("a pending tool is offered")
	}
	if _, err := f.run("alice", "word_count", map[string]any{"text": "x"}); !errors.Is(err, tools.ErrUnknownTool) {
		t.Fatalf("a pending tool ran: %v", err)
	}
	if _, err := f.m.Call(context.Background(), "word_count", call("alice", map[string]any{"text": "x"})); !errors.Is(err, customtool.ErrNotFound) {
		t.Fatalf("Call of a pending tool: %v", err)
	}
	// Chat: a non-owner cannot approve; an owner sees the code, approves.
	if got := f.m.Command("wecom:alice", false, []string{"/tools", "approve", "word_count"}); !strings.Contains(got, "Only an owner") {
		t.Fatalf("alice approving: %s", got)
	}
	if got := f.m.Command("wecom:boss", true, []string{"/tools", "show", "word_count"}); !strings.Contains(got, "def word_count(text)") {
		t.Fatalf("/tools show: %s", got)
	}
	shown := f.m.Show("word_count")
	digest := strings.Fields(shown)[2]
	if got := f.m.Command("wecom:boss", true, []string{"/tools", "approve", "word_count", digest[:8]}); !strings.Contains(got, "give its whole digest") {
		t.Fatalf("/tools approve with a digest prefix: %s", got)
	}
	if got := f.m.Command("wecom:boss", true, []string{"/tools", "approve", "word_count", digest}); !strings.Contains(got, "Approved: word_count v1") {
		t.Fatalf("/tools approve: %s", got)
	}
	if got, err := f.run("alice", "word_count", map[string]any{"text": "x y"}); err != nil || got != `{"words": 2}` {
		t.Fatalf("approved: %q, %v", got, err)
	}

	// Alice's update waits; v1 keeps serving until it is approved.
	upd := clone(wordCount)
	upd["code"] = "def word_count(text):\n    return 'v2: %d' % len(text.split())\n"
	if out := f.mustCreate(t, "alice", upd); !strings.Contains(out, "v1 stays in use") {
		t.Fatalf("update: %s", out)
	}
	<-f.notified
	if got, _ := f.run("alice", "word_count", map[string]any{"text": "x"}); got != `{"words": 1}` {
		t.Fatalf("pending update ran: %q", got)
	}
	if _, err := f.m.Approve("word_count", "", "operator"); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.run("alice", "word_count", map[string]any{"text": "x"}); got != "v2: 1" {
		t.Fatalf("after approving v2: %q", got)
	}
	meta, err := f.m.Rollback("word_count", "operator")
	if err != nil || meta.Live != 1 {
		t.Fatalf("rollback: %+v, %v", meta, err)
	}
	if got, _ := f.run("alice", "word_count", map[string]any{"text": "x"}); got != `{"words": 1}` {
		t.Fatalf("after rollback: %q", got)
	}
	if _, err := f.m.Rollback("word_count", "operator"); !errors.Is(err, customtool.ErrConflict) {
		t.Fatalf("second rollback: %v", err)
	}
	// A rejected new tool is never offered, also not after a restart.
	bad := clone(wordCount)
	bad["name"] = "steal"
	f.mustCreate(t, "mallory", bad)
	<-f.notified
	if _, err := f.m.Reject("steal", "operator"); err != nil {
		t.Fatal(err)
	}
	f.open(t)
	if _, ok := f.reg.Get("steal"); ok {
		t.Fatal("rejected tool offered after restart")
	}
	if got, _ := f.run("alice", "list_custom_tools", map[string]any{}); !strings.Contains(got, "- steal: rejected (v1), by wecom:mallory") || !strings.Contains(got, "- word_count: live v1, by wecom:alice") {
		t.Fatalf("list_custom_tools:\n%s", got)
	}
}

func clone(m map[string]any) map[string]any {
	c := map[string]any{}
	for k, v := range m {
		c[k] = v
	}
	return c
}

func TestNamesAndOwnership(t *testing.T) {
	f := newFixture(t, nil)
	for _, name := range []string{"exec", "web_search", "read_file", "create_tool"} {
		d := clone(wordCount)
		d["name"] = name
		if _, err := f.create(t, "boss", d); err == nil || !strings.Contains(err.Error(), "built-in") {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range []string{"", "A", "x", "Bad", "has space", "srv__tool", "class", "../etc", strings.Repeat("a", 49), "名字"} {
		d := clone(wordCount)
		d["name"] = name
		if _, err := f.create(t, "boss", d); !errors.Is(err, customtool.ErrInvalid) {
			t.Errorf("name %q: %v", name, err)
		}
	}
	f.mustCreate(t, "alice", wordCount)
	<-f.notified
	d := clone(wordCount)
	d["code"] = "def word_count(text):\n    return 'mine now'\n"
	if _, err := f.create(t, "bob", d); err == nil || !strings.Contains(err.Error(), "belongs to wecom:alice") {
		t.Fatalf("bob overwriting alice's tool: %v", err)
	}
	if _, err := f.run("bob", "remove_tool", map[string]any{"name": "word_count"}); err == nil || !strings.Contains(err.Error(), "belongs to wecom:alice") {
		t.Fatalf("bob removing alice's tool: %v", err)
	}
	// An owner may update anyone's tool: live at once.
	if out := f.mustCreate(t, "boss", d); !strings.Contains(out, "live") {
		t.Fatalf("owner update: %s", out)
	}
	if got, _ := f.run("bob", "word_count", map[string]any{"text": "x"}); got != "mine now" {
		t.Fatalf("owner's version: %q", got)
	}
	if _, err := f.run("alice", "remove_tool", map[string]any{"name": "word_count"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.reg.Get("word_count"); ok {
		t.Fatal("removed tool still offered")
	}
	if ents, _ := os.ReadDir(filepath.Join(f.dir, "custom_tools")); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
	// A user cannot flood the owners with pending tools.
	for i, name := range []string{"t_one", "t_two", "t_three", "t_four"} {
		d := clone(wordCount)
		d["name"] = name
		_, err := f.create(t, "mallory", d)
		if (i < customtool.MaxPendingPerUser) != (err == nil) {
			t.Fatalf("pending tool %d: %v", i+1, err)
		}
	}
}

func TestInvalidDefinitions(t *testing.T) {
	f := newFixture(t, nil)
	obj := func(props map[string]any) map[string]any {
		return map[string]any{"type": "object", "properties": props}
	}
	for name, tc := range map[string]struct {
		params any
		code   string
		lang   string
		want   string
	}{
		"not an object":    {params: []string{"x"}, want: "JSON object"},
		"no type":          {params: map[string]any{"properties": map[string]any{}}, want: `"type": "object"`},
		"array type":       {params: map[string]any{"type": "array", "items": map[string]any{"type": "string"}}, want: `"type": "object"`},
		"property no type": {params: obj(map[string]any{"x": map[string]any{"description": "?"}}), want: `has no "type"`},
		"unknown type":     {params: obj(map[string]any{"x": map[string]any{"type": "str"}}), want: "unknown type"},
		"array no items":   {params: obj(map[string]any{"x": map[string]any{"type": "array"}}), want: "needs \"items\""},
		"bad required":     {params: map[string]any{"type": "object", "properties": map[string]any{}, "required": []string{"ghost"}}, want: "not among"},
		"bad prop name":    {params: obj(map[string]any{"a-b": map[string]any{"type": "string"}}), want: "identifier"},
		"ref":              {params: obj(map[string]any{"x": map[string]any{"$ref": "#/defs/x"}}), want: "$ref"},
		"too deep":         {params: deep(9), want: "deeper"},
		"huge code":        {code: strings.Repeat("x = 1\n", customtool.MaxCode/6+10), want: "at most"},
		"empty code":       {code: "  ", want: "code is empty"},
		"language":         {lang: "ruby", want: "python or sh"},
		"nul":              {code: "print(1)\x00", want: "NUL"},
	} {
		d := clone(wordCount)
		if tc.params != nil {
			d["parameters"] = tc.params
		}
		if tc.code != "" {
			d["code"] = tc.code
		}
		if tc.lang != "" {
			d["language"] = tc.lang
		}
		_, err := f.create(t, "boss", d)
		if !errors.Is(err, customtool.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (want %q)", name, err, tc.want)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(f.dir, "custom_tools")); len(ents) != 0 {
		t.Fatalf("refused definitions left files: %v", ents)
	}
}

func deep(n int) map[string]any {
	s := map[string]any{"type": "string"}
	for i := 0; i < n; i++ {
		s = map[string]any{"type": "object", "properties": map[string]any{"x": s}}
	}
	return s
}

func TestNetworkNeedsOwnerAndConfig(t *testing.T) {
	f := newFixture(t, nil) // network off
	d := clone(wordCount)
	d["network"] = true
	if _, err := f.create(t, "boss", d); err == nil || !strings.Contains(err.Error(), "network is off") {
		t.Fatalf("network with the sandbox's off: %v", err)
	}
	f.net = true
	if _, err := f.create(t, "alice", d); err == nil || !strings.Contains(err.Error(), "only an owner") {
		t.Fatalf("network by a non-owner: %v", err)
	}
}

// A tool is as contained as exec: it cannot read the daemon's files or
// another user's, reach the network, outgrow its limits or hang the call.
func TestCreatedToolIsContained(t *testing.T) {
	f := newFixture(t, func(c *sandbox.Config) { c.Limits.Timeout = 3 * time.Second; c.Limits.CPUSeconds = 2 })
	secretDir := sandboxtest.Dir(t)
	config := filepath.Join(secretDir, "config.toml")
	db := filepath.Join(secretDir, "agent.db")
	for _, p := range []string{config, db} {
		if err := os.WriteFile(p, []byte("api_key = sk-SECRET"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bobFile := filepath.Join(f.userDir(t, "bob"), "salary.txt")
	if err := os.WriteFile(bobFile, []byte("bob earns a lot"), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("LEAKED"))
			c.Close()
		}
	}()
	probe := "import os, socket\nout = []\n" +
		"for p in [" + quote(config) + ", " + quote(db) + ", " + quote(bobFile) + ", '../" + filepath.Base(filepath.Dir(bobFile)) + "/salary.txt', '/etc/shadow', " + quote(f.dir+"/custom_tools") + "]:\n" +
		"    try:\n        out.append(p + ': ' + open(p).read())\n    except Exception as e:\n        out.append(p + ': ' + type(e).__name__)\n" +
		"try:\n    s = socket.create_connection(('127.0.0.1', " + port(ln) + "), timeout=2)\n    out.append('net: ' + s.recv(10).decode())\n" +
		"except Exception as e:\n    out.append('net: ' + type(e).__name__)\n" +
		"print('\\n'.join(out))\n"
	f.mustCreate(t, "boss", map[string]any{"name": "probe", "description": "Try to escape.", "code": probe})
	got, err := f.run("alice", "probe", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "SECRET") || strings.Contains(got, "bob earns") || strings.Contains(got, "LEAKED") || strings.Contains(got, "root:") {
		t.Fatalf("the tool escaped:\n%s", got)
	}
	t.Logf("probe:\n%s", got)
	if !strings.Contains(got, "net: ") || strings.Count(got, "Error") < 6 {
		t.Fatalf("probe output:\n%s", got)
	}

	for name, tc := range map[string]struct{ code, lang, want string }{
		"fork_bomb":  {code: ":(){ :|:& };:", lang: "sh", want: "exited with status"},
		"flood":      {code: "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", want: "over the output limit"},
		"forever":    {code: "while True:\n    pass\n", want: "limit"},
		"sleeper":    {code: "sleep 1000", lang: "sh", want: "over the time limit"},
		"raises":     {code: "def raises():\n    raise ValueError('bad input here')\n", want: "ValueError: bad input here"},
		"big_memory": {code: "x = bytearray(2 << 30)\n", want: "MemoryError"},
	} {
		d := map[string]any{"name": name, "description": "Misbehave.", "code": tc.code}
		if tc.lang != "" {
			d["language"] = tc.lang
		}
		f.mustCreate(t, "boss", d)
		start := time.Now()
		out, err := f.run("alice", name, map[string]any{})
		if !errors.Is(err, customtool.ErrFailed) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %q, %v (want %q)", name, clipS(out), err, tc.want)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("%s took %v", name, took)
		}
		meta, _ := f.m.Store().Get(name)
		if meta.LastError == "" {
			t.Errorf("%s: no last error recorded", name)
		}
	}
	// The daemon's own process count and the other users are untouched:
	// a normal tool still runs.
	f.mustCreate(t, "boss", wordCount)
	if got, err := f.run("bob", "word_count", map[string]any{"text": "still fine"}); err != nil || got != `{"words": 2}` {
		t.Fatalf("after the attacks: %q, %v", got, err)
	}
}

func clipS(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func port(ln net.Listener) string {
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	return p
}
