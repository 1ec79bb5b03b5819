// Package tools holds the tool registry the agent loop offers to the model
// and the built-in workspace file tools.
//
// A Tool is a name, a description, a JSON schema for its arguments, the
// channel profiles allowed to use it and a handler. Errors returned by
// Registry.Run are written for the model: the agent loop sends them back as
// tool results so the model can correct itself.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"agent/pkg/llm"
)

// profileName is what a profile may be called. Profiles are an open set:
// a channel declares the profile of its turns (conversation.Inbound), a
// tool the profiles it is limited to; nothing lists them all.
var profileName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// Sentinel errors returned (wrapped) by Registry.Run. The agent loop may use
// them to decide what to count as a model mistake.
var (
	ErrUnknownTool = errors.New("unknown tool")
	ErrNotAllowed  = errors.New("tool not allowed on this channel")
	ErrBadArgs     = errors.New("invalid arguments")
)

// Call is one invocation of a tool. Args is the JSON object the model sent;
// User, Channel and Profile say who asked and where; Session is the
// conversation's routing key (session.Key).
type Call struct {
	Args    json.RawMessage
	User    string
	Channel string
	Profile string
	Session string
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Schema is the JSON schema of the arguments: an object schema, written
	// by hand or derived with SchemaFor.
	Schema json.RawMessage
	// Profiles lists the channel profiles allowed to use the tool
	// ("wecom", "voice", "hardware", "admin"); empty means all.
	Profiles []string
	Handler  func(ctx context.Context, call Call) (string, error)
	// ReadOnly and Idempotent promise that running the tool again with
	// the same arguments is safe without asking the model: it changes
	// nothing, or doing it twice is doing it once (the command cache,
	// pkg/cmdcache, repeats such calls).
	ReadOnly, Idempotent bool
	// Owner limits the tool to agent.owners and the operator (the admin
	// channel): it is not offered to anyone else, nor run for them
	// (pkg/toolselect).
	Owner bool
	// When, if set, says whether the tool can do anything now (reload_mcp
	// without MCP servers cannot): it is offered only while When is true.
	When func() bool
}

// Query is who asks, where and what, for choosing the tools of a turn
// (pkg/toolselect).
type Query struct {
	User, Channel, Profile string
	Text                   string // the user's message
	// Fast is a latency-first turn (voice, hardware): fewer tools, ranked
	// by keywords only.
	Fast bool
	// Keep are tools offered whatever their rank: used earlier in the
	// session, or pulled into the turn (find_tools).
	Keep []string
}

// Pulls is the set of tools a turn asked for by name (find_tools): the
// agent loop offers them for the rest of the turn. Safe for concurrent use.
type Pulls struct {
	mu    sync.Mutex
	names []string
}

type pullsKey struct{}

// WithPulls returns ctx carrying p, for the tools a turn runs.
func WithPulls(ctx context.Context, p *Pulls) context.Context {
	return context.WithValue(ctx, pullsKey{}, p)
}

// PullsFrom returns the turn's Pulls, or nil outside a turn.
func PullsFrom(ctx context.Context) *Pulls {
	p, _ := ctx.Value(pullsKey{}).(*Pulls)
	return p
}

// Add adds names not already pulled, up to max in all, and returns those
// it added.
func (p *Pulls) Add(max int, names ...string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var added []string
	for _, n := range names {
		if len(p.names) >= max {
			break
		}
		if !slices.Contains(p.names, n) {
			p.names = append(p.names, n)
			added = append(added, n)
		}
	}
	return added
}

// Names returns the pulled names in the order they were added.
func (p *Pulls) Names() []string {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.names)
}

// Allowed reports whether the tool may be used from profile.
func (t Tool) Allowed(profile string) bool {
	return len(t.Profiles) == 0 || slices.Contains(t.Profiles, profile)
}

// Spec returns the tool as the LLM client sends it.
func (t Tool) Spec() llm.Tool {
	return llm.Tool{Type: "function", Function: llm.FunctionSpec{
		Name:        t.Name,
		Description: t.Description,
		Parameters:  t.Schema,
	}}
}

// PanicError is returned by Run when a handler panicked. Stack is for the
// log; Error() is short enough to hand to the model.
type PanicError struct {
	Tool  string
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("tool %q failed with an internal error (panic: %v)", e.Tool, e.Value)
}

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Registry holds tools by name. It is safe for concurrent use: tools may be
// registered and removed (MCP reloads, custom tools) while turns run.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]Tool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{tools: make(map[string]Tool)}
}

// Register adds t. The name must match ^[a-zA-Z0-9_-]{1,64}$ (MCP tools use
// SERVER__TOOL), be unused, have a handler, and a schema that is a JSON
// object schema (an empty Schema becomes {"type":"object","properties":{}}).
func (r *Registry) Register(t Tool) error { return r.add(t, false) }

// Replace is Register for a tool that may be registered already: it
// takes the old one's place at once, so a turn never sees the name
// missing (a reload rebuilding a tool from the new config).
func (r *Registry) Replace(t Tool) error { return r.add(t, true) }

func (r *Registry) add(t Tool, replace bool) error {
	if !nameRE.MatchString(t.Name) {
		return fmt.Errorf("tools: register %q: name must match ^[a-zA-Z0-9_-]{1,64}$", t.Name)
	}
	if t.Handler == nil {
		return fmt.Errorf("tools: register %q: no handler", t.Name)
	}
	if len(bytes.TrimSpace(t.Schema)) == 0 {
		t.Schema = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	if err := checkObjectSchema(t.Schema); err != nil {
		return fmt.Errorf("tools: register %q: %w", t.Name, err)
	}
	for _, p := range t.Profiles {
		if !profileName.MatchString(p) {
			return fmt.Errorf("tools: register %q: profile %q is not a name like wecom or voice (^[a-z][a-z0-9_-]{0,31}$)", t.Name, p)
		}
	}
	t.Schema = slices.Clone(t.Schema)
	t.Profiles = slices.Clone(t.Profiles)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[t.Name]; dup && !replace {
		return fmt.Errorf("tools: register %q: already registered", t.Name)
	}
	r.tools[t.Name] = t
	return nil
}

// Unregister removes the named tool and reports whether it was there.
func (r *Registry) Unregister(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.tools[name]
	delete(r.tools, name)
	return ok
}

func checkObjectSchema(s json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(s, &m); err != nil || m == nil {
		return errors.New("schema is not a JSON object")
	}
	var typ string
	if err := json.Unmarshal(m["type"], &typ); err != nil || typ != "object" {
		return errors.New(`schema must have "type": "object"`)
	}
	if p, ok := m["properties"]; ok {
		var props map[string]json.RawMessage
		if err := json.Unmarshal(p, &props); err != nil || props == nil {
			return errors.New(`schema "properties" must be an object`)
		}
	}
	if rq, ok := m["required"]; ok {
		var req []string
		if err := json.Unmarshal(rq, &req); err != nil {
			return errors.New(`schema "required" must be an array of strings`)
		}
	}
	return nil
}

// Get returns the named tool.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// List returns the tools allowed for profile, sorted by name. An empty
// profile returns every tool.
func (r *Registry) List(profile string) []Tool {
	r.mu.RLock()
	out := make([]Tool, 0, len(r.tools))
	for _, t := range r.tools {
		if profile == "" || t.Allowed(profile) {
			out = append(out, t)
		}
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Specs returns List(profile) as the LLM client sends it.
func (r *Registry) Specs(profile string) []llm.Tool {
	list := r.List(profile)
	out := make([]llm.Tool, len(list))
	for i, t := range list {
		out[i] = t.Spec()
	}
	return out
}

// Run calls the named tool. It refuses unknown tools, tools not allowed for
// call.Profile (an empty Profile, for internal calls, allows every tool)
// and arguments that are not a JSON object (empty arguments are
// taken as {}), and turns a handler panic into a *PanicError. Every error
// is phrased for the model.
func (r *Registry) Run(ctx context.Context, name string, call Call) (out string, err error) {
	t, ok := r.Get(name)
	if !ok || (call.Profile != "" && !t.Allowed(call.Profile)) {
		names := make([]string, 0)
		for _, t := range r.List(call.Profile) {
			names = append(names, t.Name)
		}
		avail := strings.Join(names, ", ")
		if len(names) > 40 {
			avail = strings.Join(names[:40], ", ") + ", ..."
		}
		if !ok {
			return "", fmt.Errorf("%w %q; available tools: %s", ErrUnknownTool, name, avail)
		}
		return "", fmt.Errorf("%w: %q cannot be used on the %q channel; available tools: %s", ErrNotAllowed, name, call.Profile, avail)
	}
	args := bytes.TrimSpace(call.Args)
	if len(args) == 0 {
		args = []byte("{}")
	}
	if !json.Valid(args) {
		return "", fmt.Errorf("%w for tool %q: arguments are not valid JSON; send one JSON object matching the tool's schema", ErrBadArgs, name)
	}
	if args[0] != '{' {
		return "", fmt.Errorf("%w for tool %q: arguments must be a JSON object, got %s", ErrBadArgs, name, jsonKind(args))
	}
	call.Args = json.RawMessage(args)
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("tool %q not run: %w", name, err)
	}
	defer func() {
		if v := recover(); v != nil {
			out, err = "", &PanicError{Tool: name, Value: v, Stack: debug.Stack()}
		}
	}()
	return t.Handler(ctx, call)
}

func jsonKind(b []byte) string {
	switch b[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}
