// Package customtool is create_tool: tools the model writes at run time,
// kept as data (a description, a JSON schema and Python or shell code)
// under the workspace's custom_tools/ folder and run only in the sandbox,
// never in the daemon. A call runs the code in the caller's sandbox (their
// folder at /work, shared/ read-only, no network unless the tool was made
// with network by an owner and the config allows it) with the arguments as
// JSON on stdin; stdout is the result, a non-zero exit or a limit is an
// error the model sees.
//
// Trust: a tool an owner creates is live at once. Anyone else's tool (or
// update of a tool) waits for an owner, who is told and approves or
// rejects it (agentctl tools approve|reject NAME, or /tools approve NAME in
// chat); a pending version is never offered or run. Every version is kept
// until replaced ten times over, so an owner can roll back.
package customtool

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"agent/pkg/clock"
	"agent/pkg/invisible"
	"agent/pkg/tools"
)

// Config of the Manager.
type Config struct {
	// Dir is the workspace's custom_tools/ folder.
	Dir      string
	Registry *tools.Registry
	// Sandbox returns the sandbox once it works (it may wait for the first
	// probe).
	Sandbox func(ctx context.Context) (Runner, error)
	Spaces  Spaces
	// Owner says whether a tool call comes from an owner (or the
	// operator on the admin channel).
	Owner func(call tools.Call) bool
	// Network says whether sandbox runs may have the network
	// (sandbox.network = "on").
	Network func() bool
	// Notify tells the owners, on their channels (a new tool to approve).
	Notify func(ctx context.Context, text string)
	// Reserved says whether a name belongs to a built-in tool, registered
	// or not yet (web_search before [web] is configured).
	Reserved func(name string) bool
	// Python names the sandbox's interpreter in create_tool's description.
	Python string
	Clock  clock.Clock
	Logger *slog.Logger
}

// Bounds on how many tools there may be.
const (
	MaxTools = 100
	// MaxPendingPerUser bounds the tools one user has waiting: each
	// creation messages every owner.
	MaxPendingPerUser = 3
)

// MaxTotalSpec bounds what the custom tools' descriptions and schemas
// add to every request to the model, all versions that may be offered
// together.
const MaxTotalSpec = 32 << 10

// specBytes is what the tools other than skip add to a request: the live
// and pending versions (a pending one may become live).
func (m *Manager) specBytes(skip string) int {
	n := 0
	for _, meta := range m.store.List() {
		if meta.Name == skip {
			continue
		}
		for _, v := range []int{meta.Live, meta.Pending} {
			if ver, err := m.store.Version(meta.Name, v); v > 0 && err == nil {
				n += len(ver.Parameters) + len(ver.Description)
			}
		}
	}
	return n
}

// Manager owns the custom tools: their store, their entries in the
// registry and the tools that manage them. Safe for concurrent use.
type Manager struct {
	cfg    Config
	store  *Store
	logger *slog.Logger

	mu         sync.Mutex      // serialises changes of the store + registry
	registered map[string]bool // custom tools in the registry
	active     bool            // Activate ran: live tools are offered
}

// Open loads the tools under cfg.Dir. Nothing is offered before Activate.
func Open(cfg Config) (*Manager, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Owner == nil {
		cfg.Owner = func(tools.Call) bool { return false }
	}
	if cfg.Network == nil {
		cfg.Network = func() bool { return false }
	}
	if cfg.Notify == nil {
		cfg.Notify = func(context.Context, string) {}
	}
	if cfg.Reserved == nil {
		cfg.Reserved = func(string) bool { return false }
	}
	cfg.Clock = clock.Or(cfg.Clock)
	st, err := OpenStore(cfg.Dir, cfg.Clock, cfg.Logger)
	if err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, store: st, logger: cfg.Logger, registered: map[string]bool{}}
	m.holdHidden()
	return m, nil
}

// holdHidden takes every live version holding invisible characters that
// no owner approved escaped (stored before create_tool refused them) out
// of service: it waits for approval again (the pending version, unless
// another one waits already: then it goes to the history) and the record
// says why.
func (m *Manager) holdHidden() {
	for _, meta := range m.store.List() {
		if meta.Live == 0 || slices.Contains(meta.Escaped, meta.Live) {
			continue
		}
		ver, err := m.store.Version(meta.Name, meta.Live)
		if err != nil {
			continue
		}
		why := ver.Hidden()
		if why == "" {
			continue
		}
		_, err = m.store.Change(meta.Name, func(next *Meta) error {
			if next.Pending == 0 {
				next.Pending = next.Live
			} else {
				next.History = append(next.History, next.Live)
			}
			next.LastError = fmt.Sprintf("not offered: v%d has %s, which whoever approved it could not see; "+
				"it waits for approval again: read it (agentctl tools show %s shows every character) and approve it with its digest",
				next.Live, why, next.Name)
			next.LastErrorAt = m.cfg.Clock.Now().UTC()
			next.Live = 0
			return nil
		})
		if err != nil {
			m.logger.Error("custom tool with invisible characters not held back", "tool", meta.Name, "err", err)
			continue
		}
		m.logger.Warn("custom tool held for approval again: it has invisible characters", "tool", meta.Name, "version", meta.Live, "why", why)
	}
}

// unseen says why version v of name may not run (it holds invisible
// characters no owner approved escaped); "" when it may.
func (m *Manager) unseen(meta Meta, v int) string {
	if slices.Contains(meta.Escaped, v) {
		return ""
	}
	ver, err := m.store.Version(meta.Name, v)
	if err != nil {
		return ""
	}
	return ver.Hidden()
}

// Store is the manager's store (agentctl's view).
func (m *Manager) Store() *Store { return m.store }

// Activate registers the management tools and every live tool. The host
// calls it once the sandbox works: without one nothing a tool does can
// run, so nothing is offered.
func (m *Manager) Activate() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.active {
		return nil
	}
	for _, t := range m.tools() {
		if err := m.cfg.Registry.Register(t); err != nil {
			return err
		}
	}
	m.active = true
	for _, meta := range m.store.List() {
		if meta.Live > 0 {
			m.offer(meta)
		}
	}
	return nil
}

// offer registers (or replaces) meta's live version. m.mu is held.
func (m *Manager) offer(meta Meta) {
	if !m.active {
		return
	}
	ver, err := m.store.Version(meta.Name, meta.Live)
	if why := m.unseen(meta, meta.Live); err == nil && why != "" {
		err = fmt.Errorf("v%d has %s; an owner must approve it again", meta.Live, why)
	}
	if err == nil && !m.registered[meta.Name] {
		if _, taken := m.cfg.Registry.Get(meta.Name); taken || m.cfg.Reserved(meta.Name) {
			err = fmt.Errorf("the name %s is taken by a built-in tool now; remove this tool or create it under another name", meta.Name)
		}
	}
	if err == nil {
		err = m.cfg.Registry.Replace(m.tool(meta, ver))
	}
	if err != nil {
		m.logger.Warn("custom tool not offered", "tool", meta.Name, "err", err)
		m.store.NoteError(meta.Name, "not offered: "+err.Error())
		return
	}
	m.registered[meta.Name] = true
}

// withdraw takes name out of the registry. m.mu is held.
func (m *Manager) withdraw(name string) {
	if m.registered[name] {
		m.cfg.Registry.Unregister(name)
		delete(m.registered, name)
	}
}

// tool is the registry entry of a live version. The handler reads the
// live version at call time: an approval or rollback in between is
// honoured, and a tool withdrawn meanwhile does not run.
func (m *Manager) tool(meta Meta, ver Version) tools.Tool {
	desc := strings.TrimSpace(ver.Description) + fmt.Sprintf(" (custom tool v%d by %s)", ver.Version, meta.Creator)
	return tools.Tool{
		Name:        meta.Name,
		Description: desc,
		Schema:      ver.Parameters,
		Handler: func(ctx context.Context, call tools.Call) (string, error) {
			return m.Call(ctx, meta.Name, call)
		},
	}
}

// Call runs the live version of the named tool for call.
func (m *Manager) Call(ctx context.Context, name string, call tools.Call) (string, error) {
	meta, ok := m.store.Get(name)
	if !ok || meta.Live == 0 {
		return "", fmt.Errorf("%w %q (removed, or not approved yet)", ErrNotFound, name)
	}
	ver, err := m.store.Version(name, meta.Live)
	if err != nil {
		return "", fmt.Errorf("custom tool %s: %w", name, err)
	}
	if err := checkArgs(name, ver, call.Args); err != nil {
		return "", err
	}
	sb, err := m.cfg.Sandbox(ctx)
	if err != nil {
		return "", fmt.Errorf("custom tool %s cannot run: the sandbox is unavailable: %v", name, err)
	}
	v, err := m.cfg.Spaces.View(call)
	if err != nil {
		return "", err // a folder over its quota runs nothing
	}
	sp := spec(name, ver, v, call.Args)
	sp.Network = sp.Network && m.cfg.Network()
	start := m.cfg.Clock.Now()
	res, err := sb.Run(ctx, sp)
	if err != nil {
		m.logger.Error("custom tool: sandbox failed", "tool", name, "err", err)
		return "", fmt.Errorf("custom tool %s: the sandbox failed, nothing ran: %v", name, err)
	}
	out, err := result(name, res)
	m.logger.Info("custom tool", "tool", name, "version", ver.Version, "scope", v.Scope, "exit", res.Exit,
		"limit", string(res.Limit), "took", m.cfg.Clock.Now().Sub(start).Round(time.Millisecond))
	if err != nil {
		m.store.NoteError(name, firstLine(err.Error()))
	}
	return out, err
}

func clipWord(s string) string {
	if len(s) > 40 {
		return strings.ToValidUTF8(s[:40], "") + "..."
	}
	return s
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = strings.ToValidUTF8(s[:300], "") + "..."
	}
	return s
}

// Def is what create_tool receives.
type Def struct {
	Name        string          `json:"name" desc:"tool name: lower-case letters, digits and _ (like convert_units)"`
	Description string          `json:"description" desc:"what the tool does, when to use it and what it returns"`
	Parameters  json.RawMessage `json:"parameters" desc:"JSON schema of the arguments: {\"type\":\"object\",\"properties\":{...},\"required\":[...]}"`
	Code        string          `json:"code" desc:"the program"`
	Language    string          `json:"language,omitempty" desc:"python (default) or sh"`
	Network     bool            `json:"network,omitempty" desc:"true if the tool needs the internet (owners only, when the sandbox allows it)"`
}

// Outcome is what Create did.
type Outcome struct {
	Meta    Meta
	Version Version
	Updated bool // a new version of an existing tool
	Live    bool // offered now; else waiting for an owner
}

// Create stores def as a new tool, or a new version of the caller's own
// tool (any tool for an owner). An owner's version is live at once;
// anyone else's waits for approval and the owners are told.
func (m *Manager) Create(ctx context.Context, call tools.Call, def Def) (Outcome, error) {
	def.Name = strings.TrimSpace(def.Name)
	if def.Language == "" {
		def.Language = LangPython
	}
	if err := CheckName(def.Name); err != nil {
		return Outcome{}, err
	}
	if err := CheckDef(def.Description, def.Code, def.Language); err != nil {
		return Outcome{}, err
	}
	if err := CheckSchema(def.Parameters); err != nil {
		return Outcome{}, err
	}
	owner := m.cfg.Owner(call)
	who := call.Channel + ":" + call.User
	if def.Network {
		switch {
		case !m.cfg.Network():
			return Outcome{}, fmt.Errorf("%w: network: the sandbox has no network here ([sandbox] network is off); create the tool without it", ErrInvalid)
		case !owner:
			return Outcome{}, fmt.Errorf("%w: network: only an owner may create a tool with network access", ErrInvalid)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	existing, exists := m.store.Get(def.Name)
	if !exists {
		if _, taken := m.cfg.Registry.Get(def.Name); taken || m.cfg.Reserved(def.Name) {
			return Outcome{}, fmt.Errorf("%w: %q is the name of a built-in tool; choose another name", ErrInvalid, def.Name)
		}
		all, pending := m.store.Count(who)
		if all >= MaxTools {
			return Outcome{}, fmt.Errorf("%w: there are %d custom tools already (the most); remove one first", ErrInvalid, all)
		}
		if !owner && pending >= MaxPendingPerUser {
			return Outcome{}, fmt.Errorf("%w: you have %d tools waiting for approval already; wait for an owner", ErrInvalid, pending)
		}
	} else if existing.Creator != who && !owner {
		return Outcome{}, fmt.Errorf("%w: the tool %q belongs to %s; only they or an owner may change it (choose another name)", ErrInvalid, def.Name, existing.Creator)
	} else if existing.Pending > 0 && !owner {
		// The owners may be reading it now: what they approve must be
		// what they read.
		return Outcome{}, fmt.Errorf("%w: v%d of %q is waiting for an owner's decision; it cannot change until they approve or reject it", ErrInvalid, existing.Pending, def.Name)
	}
	params, _ := compact(def.Parameters)
	if total := m.specBytes(def.Name) + len(params) + len(def.Description); total > MaxTotalSpec {
		return Outcome{}, fmt.Errorf("%w: the custom tools' descriptions and schemas would take %d bytes of every request to the model; at most %d (shorten this one or remove a tool)", ErrInvalid, total, MaxTotalSpec)
	}
	ver := Version{Description: strings.TrimSpace(def.Description), Parameters: params, Code: def.Code,
		Language: def.Language, Network: def.Network, Author: who}
	meta, ver, err := m.store.Save(def.Name, who, ver, func(next *Meta) error {
		if owner {
			if next.Live > 0 {
				next.History = append(next.History, next.Live)
			}
			next.Live, next.ApprovedBy = next.Latest, who
			if next.Pending > 0 {
				next.Pending = 0 // superseded by the owner's version
			}
		} else {
			next.Pending = next.Latest // replaces an earlier pending version
		}
		next.LastError, next.LastErrorAt = "", time.Time{}
		return nil
	})
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Meta: meta, Version: ver, Updated: exists, Live: owner}
	if owner {
		m.offer(meta)
		m.logger.Info("custom tool created", "tool", def.Name, "version", ver.Version, "by", who, "live", true)
		return out, nil
	}
	m.logger.Info("custom tool waiting for approval", "tool", def.Name, "version", ver.Version, "by", who)
	d := ver.Digest()
	text := fmt.Sprintf("%s wrote the tool %s (v%d %s, %s, %d lines): %s\nIt runs only after an owner approves it. Read its code: agentctl tools show %s (or /tools show %s)\nApprove what you read: agentctl tools approve %s %s (or /tools approve %s %s)\nReject: agentctl tools reject %s (or /tools reject %s)",
		invisible.Escape(who), def.Name, ver.Version, d, ver.Language, strings.Count(ver.Code, "\n")+1, invisible.Escape(firstLine(ver.Description)), def.Name, def.Name, def.Name, d, def.Name, d, def.Name, def.Name)
	go m.cfg.Notify(context.WithoutCancel(ctx), text)
	return out, nil
}

func compact(raw json.RawMessage) (json.RawMessage, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw, err
	}
	b, err := json.Marshal(v)
	return b, err
}

// Approve makes the pending version of name live. want, when not "",
// pins what the owner read: the version's whole digest; a pending version
// that is not it is refused. (Without it the version waiting now is
// approved: only an owner can change or withdraw a waiting version, so it
// is the one the owners were told about.)
func (m *Manager) Approve(name, want, by string) (Meta, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	meta, err := m.store.Change(name, func(next *Meta) error {
		if next.Pending == 0 {
			return fmt.Errorf("%w: %s has no version waiting for approval", ErrConflict, name)
		}
		if err := m.pinned(name, next.Pending, want); err != nil {
			return err
		}
		if why := m.unseen(*next, next.Pending); why != "" {
			if strings.TrimSpace(want) == "" {
				return fmt.Errorf("%w: v%d of %s has %s: read it (agentctl tools show %s shows every character) and approve it with its digest", ErrConflict, next.Pending, name, why, name)
			}
			next.Escaped = append(next.Escaped, next.Pending)
			next.LastError, next.LastErrorAt = "", time.Time{}
		}
		if next.Live > 0 {
			next.History = append(next.History, next.Live)
		}
		if strings.HasPrefix(next.LastError, "not offered:") {
			next.LastError, next.LastErrorAt = "", time.Time{}
		}
		next.Live, next.Pending, next.ApprovedBy = next.Pending, 0, by
		return nil
	})
	if err != nil {
		return Meta{}, err
	}
	m.offer(meta)
	m.logger.Info("custom tool approved", "tool", name, "version", meta.Live, "by", by)
	return meta, nil
}

// pinned checks that version v of name is the one want names.
func (m *Manager) pinned(name string, v int, want string) error {
	want = strings.ToLower(strings.TrimSpace(want))
	if want == "" {
		return nil
	}
	ver, err := m.store.Version(name, v)
	if err != nil {
		return err
	}
	if d := ver.Digest(); want != d {
		return fmt.Errorf("%w: the version waiting is v%d %s, not %s; read it again (agentctl tools show %s) and give its whole digest", ErrConflict, v, d, clipWord(want), name)
	}
	return nil
}

// Reject drops the pending version of name; a tool that was never live
// stays listed as rejected until its creator updates or removes it.
func (m *Manager) Reject(name, by string) (Meta, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	meta, err := m.store.Change(name, func(next *Meta) error {
		if next.Pending == 0 {
			return fmt.Errorf("%w: %s has no version waiting for approval", ErrConflict, name)
		}
		next.Rejected, next.Pending = next.Pending, 0
		return nil
	})
	if err != nil {
		return Meta{}, err
	}
	m.logger.Info("custom tool rejected", "tool", name, "version", meta.Rejected, "by", by)
	return meta, nil
}

// Rollback makes the version live before the current one live again.
func (m *Manager) Rollback(name, by string) (Meta, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	meta, err := m.store.Change(name, func(next *Meta) error {
		if len(next.History) == 0 {
			return fmt.Errorf("%w: %s has no earlier version to go back to", ErrConflict, name)
		}
		if v := next.History[len(next.History)-1]; m.unseen(*next, v) != "" {
			return fmt.Errorf("%w: v%d of %s has %s, which whoever approved it could not see; it cannot be made live again (create the tool anew)", ErrConflict, v, name, m.unseen(*next, v))
		}
		next.Live = next.History[len(next.History)-1]
		next.History = next.History[:len(next.History)-1]
		next.ApprovedBy = by
		return nil
	})
	if err != nil {
		return Meta{}, err
	}
	m.offer(meta)
	m.logger.Info("custom tool rolled back", "tool", name, "version", meta.Live, "by", by)
	return meta, nil
}

// Remove deletes name (every version). call nil: the operator.
func (m *Manager) Remove(call *tools.Call, name string) (Meta, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	meta, ok := m.store.Get(name)
	if !ok {
		return Meta{}, fmt.Errorf("%w %q", ErrNotFound, name)
	}
	owner := call == nil || m.cfg.Owner(*call)
	if !owner && meta.Creator != call.Channel+":"+call.User {
		return Meta{}, fmt.Errorf("%w: %s belongs to %s; only they or an owner may remove it", ErrConflict, name, meta.Creator)
	}
	if !owner && meta.Pending > 0 {
		// What waits is what the owners were told about and may be
		// reading: it stays until they decide (and a creator cannot
		// withdraw and re-send to flood them).
		return Meta{}, fmt.Errorf("%w: v%d of %s is waiting for an owner's decision; it can be removed once they approved or rejected it", ErrConflict, meta.Pending, name)
	}
	m.withdraw(name)
	meta, err := m.store.Remove(name)
	if err != nil {
		return Meta{}, err
	}
	m.logger.Info("custom tool removed", "tool", name, "by", who(call))
	return meta, nil
}

func who(call *tools.Call) string {
	if call == nil {
		return "operator"
	}
	return call.Channel + ":" + call.User
}

// tools are create_tool, list_custom_tools and remove_tool.
func (m *Manager) tools() []tools.Tool {
	py := "python3"
	if m.cfg.Python != "" {
		py = m.cfg.Python
	}
	createDesc := "Create (or update) a tool you can call from the next step on; it runs sandboxed like exec (your folder at /work, no network). " +
		"Python (" + py + "): def NAME(**args) returns the result. sh: read $ARG_<param> or the JSON arguments on stdin; what it prints is the result. " +
		"A non-owner's tool waits for an owner's approval."
	if m.cfg.Network() {
		createDesc += " network: true (owners only) gives the tool internet access."
	}
	return []tools.Tool{
		{Name: "create_tool", Description: createDesc, Schema: tools.SchemaFor[Def](), Handler: m.createTool},
		{Name: "list_custom_tools", Description: "List the custom tools: name, state (live, pending approval, rejected), creator, version, last error.", Handler: m.listTool},
		{Name: "remove_tool", Description: "Remove a custom tool you created (owners: any).", Schema: tools.SchemaFor[nameArg](), Handler: m.removeTool},
	}
}

type nameArg struct {
	Name string `json:"name" desc:"the custom tool's name"`
}

func (m *Manager) createTool(ctx context.Context, call tools.Call) (string, error) {
	var def Def
	if err := json.Unmarshal(call.Args, &def); err != nil {
		return "", fmt.Errorf("%w for create_tool: %v", tools.ErrBadArgs, err)
	}
	out, err := m.Create(ctx, call, def)
	if err != nil {
		return "", err
	}
	verb := "created"
	if out.Updated {
		verb = "updated to"
	}
	if out.Live {
		return fmt.Sprintf("Tool %s %s v%d: it is live; call it as %s from the next step on.", def.Name, verb, out.Version.Version, def.Name), nil
	}
	if out.Meta.Live > 0 {
		return fmt.Sprintf("Tool %s %s v%d, waiting for an owner's approval; v%d stays in use until then. The owners have been told.", def.Name, verb, out.Version.Version, out.Meta.Live), nil
	}
	return fmt.Sprintf("Tool %s %s v%d: it waits for an owner's approval and cannot be used before. The owners have been told; tell the user.", def.Name, verb, out.Version.Version), nil
}

func (m *Manager) listTool(_ context.Context, call tools.Call) (string, error) {
	list := m.store.List()
	if len(list) == 0 {
		return "There are no custom tools yet (create_tool makes one).", nil
	}
	var b strings.Builder
	for _, meta := range list {
		fmt.Fprintf(&b, "- %s: %s", meta.Name, meta.State())
		if meta.Live > 0 {
			fmt.Fprintf(&b, " v%d", meta.Live)
		}
		if meta.Pending > 0 {
			fmt.Fprintf(&b, ", v%d pending approval", meta.Pending)
		}
		if meta.State() == StateRejected {
			fmt.Fprintf(&b, " (v%d)", meta.Rejected)
		}
		fmt.Fprintf(&b, ", by %s", meta.Creator)
		// Only approved text reaches other users' models: a waiting or
		// rejected description is its creator's (and the owners') alone.
		v := meta.Live
		if meta.Creator == call.Channel+":"+call.User || m.cfg.Owner(call) {
			v = max(meta.Live, meta.Pending, meta.Rejected)
		}
		if ver, err := m.store.Version(meta.Name, v); v > 0 && err == nil {
			fmt.Fprintf(&b, ", %s: %s", ver.Language, firstLine(ver.Description))
		}
		if meta.LastError != "" && (meta.Creator == call.Channel+":"+call.User || m.cfg.Owner(call)) {
			fmt.Fprintf(&b, " [last error %s: %s]", meta.LastErrorAt.Format(time.DateTime), meta.LastError)
		}
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

func (m *Manager) removeTool(_ context.Context, call tools.Call) (string, error) {
	a, err := tools.Decode[nameArg](call.Args)
	if err != nil {
		return "", err
	}
	meta, err := m.Remove(&call, strings.TrimSpace(a.Name))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Tool %s removed (all %d versions).", meta.Name, meta.Latest), nil
}

// Command is the chat command of owners: "/tools", "/tools approve NAME",
// "/tools reject NAME". isOwner says whether the sender is one.
func (m *Manager) Command(user string, isOwner bool, fields []string) string {
	if len(fields) < 2 {
		var b strings.Builder
		for _, meta := range m.store.List() {
			if meta.Pending > 0 {
				fmt.Fprintf(&b, "- %s v%d by %s waits for approval\n", meta.Name, meta.Pending, invisible.Escape(meta.Creator))
			}
		}
		if b.Len() == 0 {
			return "No custom tool waits for approval. (" + commandUsage + ")"
		}
		return b.String() + commandUsage
	}
	if !isOwner {
		return "Only an owner can approve or reject tools."
	}
	if len(fields) != 3 && !(len(fields) == 4 && strings.EqualFold(fields[1], "approve")) {
		return commandUsage
	}
	var meta Meta
	var err error
	switch strings.ToLower(fields[1]) {
	case "show":
		return m.Show(fields[2])
	case "approve":
		want := ""
		if len(fields) == 4 {
			want = fields[3]
		}
		meta, err = m.Approve(fields[2], want, user)
	case "reject":
		meta, err = m.Reject(fields[2], user)
	default:
		return commandUsage
	}
	if err != nil {
		return "Not done: " + err.Error()
	}
	if strings.EqualFold(fields[1], "approve") {
		return fmt.Sprintf("Approved: %s v%d is live.", meta.Name, meta.Live)
	}
	return fmt.Sprintf("Rejected: %s v%d.", meta.Name, meta.Rejected)
}

const commandUsage = "Usage: /tools show NAME | /tools approve NAME [DIGEST] | /tools reject NAME (/tools show prints the digest)"

// Show is a tool's record and the code of its pending (else live)
// version, for an owner deciding on it.
func (m *Manager) Show(name string) string {
	meta, ok := m.store.Get(name)
	if !ok {
		return fmt.Sprintf("No custom tool %q.", name)
	}
	v := meta.Pending
	if v == 0 {
		v = max(meta.Live, meta.Rejected)
	}
	ver, err := m.store.Version(name, v)
	if err != nil {
		return fmt.Sprintf("%s: version %d unreadable: %v", name, v, err)
	}
	// Every character shows (invisible.Escape): what an owner approves
	// by its digest is what they read.
	out := fmt.Sprintf("%s v%d %s (%s) by %s, %s, network %v\n%s\nparameters: %s\n--- code ---\n%s",
		name, v, ver.Digest(), meta.State(), invisible.Escape(ver.Author), ver.Language, ver.Network,
		invisible.Escape(ver.Description), invisible.Escape(string(ver.Parameters)), invisible.Escape(ver.Code))
	if meta.LastError != "" {
		out += "\n--- note ---\n" + invisible.Escape(meta.LastError)
	}
	return out
}

// Names are the management tools' names (reserved for built-ins).
var Names = []string{"create_tool", "list_custom_tools", "remove_tool"}
