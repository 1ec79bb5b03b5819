package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
)

func echo(_ context.Context, c Call) (string, error) { return string(c.Args), nil }

func TestRegisterValidation(t *testing.T) {
	tests := []struct {
		name    string
		tool    Tool
		wantErr string
	}{
		{"ok", Tool{Name: "read_file", Handler: echo}, ""},
		{"mcp name", Tool{Name: "github__create-issue", Handler: echo}, ""},
		{"64 chars", Tool{Name: strings.Repeat("a", 64), Handler: echo}, ""},
		{"65 chars", Tool{Name: strings.Repeat("a", 65), Handler: echo}, "name must match"},
		{"empty name", Tool{Name: "", Handler: echo}, "name must match"},
		{"space", Tool{Name: "read file", Handler: echo}, "name must match"},
		{"dot", Tool{Name: "a.b", Handler: echo}, "name must match"},
		{"unicode", Tool{Name: "lesen_ä", Handler: echo}, "name must match"},
		{"no handler", Tool{Name: "x"}, "no handler"},
		{"schema not json", Tool{Name: "x", Handler: echo, Schema: json.RawMessage(`{`)}, "not a JSON object"},
		{"schema array", Tool{Name: "x", Handler: echo, Schema: json.RawMessage(`[]`)}, "not a JSON object"},
		{"schema null", Tool{Name: "x", Handler: echo, Schema: json.RawMessage(`null`)}, "not a JSON object"},
		{"schema string type", Tool{Name: "x", Handler: echo, Schema: json.RawMessage(`{"type":"string"}`)}, `"type": "object"`},
		{"schema no type", Tool{Name: "x", Handler: echo, Schema: json.RawMessage(`{"properties":{}}`)}, `"type": "object"`},
		{"schema bad properties", Tool{Name: "x", Handler: echo, Schema: json.RawMessage(`{"type":"object","properties":[]}`)}, `"properties"`},
		{"schema bad required", Tool{Name: "x", Handler: echo, Schema: json.RawMessage(`{"type":"object","required":"a"}`)}, `"required"`},
		{"schema ok", Tool{Name: "x", Handler: echo, Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`)}, ""},
		{"bad profile", Tool{Name: "x", Handler: echo, Profiles: []string{"SMS channel!"}}, "is not a name like wecom"},
		{"empty profile", Tool{Name: "x", Handler: echo, Profiles: []string{""}}, "is not a name like wecom"},
		// Profiles are an open set: a new channel's profile needs no list.
		{"new channel's profile", Tool{Name: "x", Handler: echo, Profiles: []string{"sms"}}, ""},
		{"good profiles", Tool{Name: "x", Handler: echo, Profiles: []string{"admin", "wecom"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := NewRegistry().Register(tt.tool)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Register: got %v, want nil", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Register: got %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestRegisterDuplicateAndDefaults(t *testing.T) {
	r := NewRegistry()
	if err := r.Register(Tool{Name: "a", Handler: echo}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(Tool{Name: "a", Handler: echo}); err == nil || !strings.Contains(err.Error(), "already registered") {
		t.Fatalf("duplicate: got %v", err)
	}
	got, ok := r.Get("a")
	if !ok || string(got.Schema) != `{"type":"object","properties":{}}` {
		t.Fatalf("Get: got %+v %v, want default schema", got, ok)
	}
	if !r.Unregister("a") || r.Unregister("a") {
		t.Fatal("Unregister: want true then false")
	}
	if err := r.Register(Tool{Name: "a", Handler: echo}); err != nil {
		t.Fatalf("re-register after Unregister: %v", err)
	}
	if err := r.Replace(Tool{Name: "a", Description: "new", Handler: echo}); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	if got, _ := r.Get("a"); got.Description != "new" {
		t.Fatalf("Replace kept %q", got.Description)
	}
	if err := r.Replace(Tool{Name: "b c", Handler: echo}); err == nil {
		t.Fatal("Replace skipped the checks")
	}
}

func newTestRegistry(t *testing.T) *Registry {
	t.Helper()
	r := NewRegistry()
	for _, tool := range []Tool{
		{Name: "zeta", Description: "z", Handler: echo},
		{Name: "alpha", Description: "a", Handler: echo, Profiles: []string{"admin"}},
		{Name: "mid", Description: "m", Handler: echo, Profiles: []string{"wecom", "voice"}},
		{Name: "boom", Handler: func(context.Context, Call) (string, error) { panic("kaputt") }},
		{Name: "fail", Handler: func(context.Context, Call) (string, error) { return "", errors.New("disk full") }},
	} {
		if err := r.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func names(ts []Tool) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.Name)
	}
	return strings.Join(s, ",")
}

func TestListProfiles(t *testing.T) {
	r := newTestRegistry(t)
	tests := []struct{ profile, want string }{
		{"", "alpha,boom,fail,mid,zeta"},
		{"admin", "alpha,boom,fail,zeta"},
		{"wecom", "boom,fail,mid,zeta"},
		{"voice", "boom,fail,mid,zeta"},
		{"hardware", "boom,fail,zeta"},
	}
	for _, tt := range tests {
		if got := names(r.List(tt.profile)); got != tt.want {
			t.Errorf("List(%q) = %s, want %s", tt.profile, got, tt.want)
		}
	}
	specs := r.Specs("hardware")
	if len(specs) != 3 || specs[0].Type != "function" || specs[0].Function.Name != "boom" || string(specs[2].Function.Parameters) != `{"type":"object","properties":{}}` {
		t.Fatalf("Specs = %+v", specs)
	}
	if specs[2].Function.Description != "z" {
		t.Errorf("description: got %q", specs[2].Function.Description)
	}
}

func TestRun(t *testing.T) {
	r := newTestRegistry(t)
	tests := []struct {
		name, tool, profile, args string
		want, wantErr             string
		is                        error
	}{
		{name: "ok", tool: "zeta", args: `{"a":1}`, want: `{"a":1}`},
		{name: "empty args become {}", tool: "zeta", args: "  ", want: `{}`},
		{name: "allowed profile", tool: "alpha", profile: "admin", args: `{}`, want: `{}`},
		{name: "unknown", tool: "nope", profile: "hardware", wantErr: `unknown tool "nope"; available tools: boom, fail, zeta`, is: ErrUnknownTool},
		{name: "not allowed", tool: "alpha", profile: "voice", args: `{}`, wantErr: `"alpha" cannot be used on the "voice" channel`, is: ErrNotAllowed},
		{name: "bad json", tool: "zeta", args: `{"a":`, wantErr: "not valid JSON", is: ErrBadArgs},
		{name: "array", tool: "zeta", args: `[1]`, wantErr: "must be a JSON object, got an array", is: ErrBadArgs},
		{name: "string", tool: "zeta", args: `"x"`, wantErr: "got a string", is: ErrBadArgs},
		{name: "null", tool: "zeta", args: `null`, wantErr: "got null", is: ErrBadArgs},
		{name: "number", tool: "zeta", args: `3`, wantErr: "got a number", is: ErrBadArgs},
		{name: "two objects", tool: "zeta", args: `{}{}`, wantErr: "not valid JSON", is: ErrBadArgs},
		{name: "handler error", tool: "fail", args: `{}`, wantErr: "disk full"},
		{name: "panic", tool: "boom", args: `{}`, wantErr: `tool "boom" failed with an internal error (panic: kaputt)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Run(context.Background(), tt.tool, Call{Args: json.RawMessage(tt.args), Profile: tt.profile})
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("Run = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Run error = %v; want containing %q", err, tt.wantErr)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("Run error %v is not %v", err, tt.is)
			}
		})
	}
}

func TestRunPanicError(t *testing.T) {
	r := newTestRegistry(t)
	_, err := r.Run(context.Background(), "boom", Call{})
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Tool != "boom" || len(pe.Stack) == 0 {
		t.Fatalf("want *PanicError with stack, got %#v", err)
	}
}

func TestRunCancelled(t *testing.T) {
	r := newTestRegistry(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Run(ctx, "zeta", Call{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestRegistryConcurrent(t *testing.T) {
	r := newTestRegistry(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "t" + string(rune('a'+i))
			_ = r.Register(Tool{Name: name, Handler: echo})
			_, _ = r.Run(context.Background(), "zeta", Call{})
			_ = r.Specs("")
			r.Unregister(name)
		}()
	}
	wg.Wait()
	if got := names(r.List("")); got != "alpha,boom,fail,mid,zeta" {
		t.Fatalf("after concurrent use: %s", got)
	}
}
