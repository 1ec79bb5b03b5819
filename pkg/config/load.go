package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/BurntSushi/toml"
)

// maxFileSize bounds config.toml and secret files; anything larger is a
// mistake (a model file named by accident, /dev/zero).
const (
	maxFileSize   = 1 << 20
	maxSecretSize = 64 << 10
)

// OSEnv is the production Env: os.LookupEnv.
func OSEnv(key string) (string, bool) { return os.LookupEnv(key) }

// Find returns the config file to load: explicit when it is not empty; else
// ./config.toml when it exists; else $CONFIGURATION_DIRECTORY/config.toml
// when that exists (systemd ConfigurationDirectory=, e.g. /etc/agent/TENANT
// for agent@.service; the first of several colon-separated directories);
// else DefaultPath, whether or not it exists (Load then says how to create
// it).
func Find(explicit string, env Env) string {
	return find(explicit, env, os.Stat)
}

func find(explicit string, env Env, stat func(string) (fs.FileInfo, error)) string {
	if explicit != "" {
		return explicit
	}
	isFile := func(p string) bool {
		fi, err := stat(p)
		return err == nil && !fi.IsDir()
	}
	if isFile("config.toml") {
		return "config.toml"
	}
	if dir := firstPath(env, "CONFIGURATION_DIRECTORY"); dir != "" {
		if p := filepath.Join(dir, "config.toml"); isFile(p) {
			return p
		}
	}
	return DefaultPath
}

// firstPath returns the first entry of a colon-separated list of paths in
// the environment variable key (systemd sets several when a unit lists
// several directories), or "".
func firstPath(env Env, key string) string {
	v, ok := lookupEnv(env, key)
	if !ok {
		return ""
	}
	first, _, _ := strings.Cut(v, ":")
	return strings.TrimSpace(first)
}

// Load reads the config file at path and parses it with Parse, relative
// paths resolving against the file's directory. Any failure, a missing or
// unreadable file included, is an *Error naming the file. The returned
// Config's Path is the file's absolute path. Warnings come back even when
// err is not nil. A nil env is the process environment (os.LookupEnv).
func Load(path string, env Env) (*Config, []Warning, error) {
	if env == nil {
		env = os.LookupEnv
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = filepath.Clean(path)
	}
	data, err := readLimited(path, maxFileSize)
	if err != nil {
		reason := "cannot read: " + err.Error()
		if errors.Is(err, fs.ErrNotExist) {
			reason = fmt.Sprintf("config file does not exist: copy config.toml from the source tree to %s, "+
				"or pass -config PATH; \"agentctl doctor\" lists what else is missing", abs)
		}
		return nil, nil, &Error{File: path, Problems: []Problem{{Reason: reason}}, err: err}
	}
	cfg, warnings, err := Parse(path, data, filepath.Dir(abs), env)
	if cfg != nil {
		cfg.Path = abs
	}
	return cfg, warnings, err
}

// readLimited reads a regular file of at most limit bytes. Its errors do
// not repeat the path ("permission denied", "is a directory").
func readLimited(path string, limit int64) ([]byte, error) {
	// Check before opening: opening a FIFO would block.
	fi, err := os.Stat(path)
	if err != nil {
		return nil, describeFSError(err)
	}
	if fi.IsDir() {
		return nil, errors.New("is a directory")
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("is not a regular file")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, describeFSError(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, describeFSError(err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("is larger than %d KiB", limit>>10)
	}
	return data, nil
}

// fsError keeps the cause (for errors.Is) but prints without the path, which
// the caller shows its own way.
type fsError struct {
	msg string
	err error
}

func (e *fsError) Error() string { return e.msg }
func (e *fsError) Unwrap() error { return e.err }

func describeFSError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fsError{msg: pe.Err.Error(), err: err}
	}
	return &fsError{msg: err.Error(), err: err}
}

// Parse decodes and validates data, the contents of the config file name
// (used only in messages). Relative paths resolve against baseDir (the
// working directory when ""). A nil env is an empty environment. Parse reads
// the secret files that *_file keys and VAR_FILE variables name, and
// nothing else.
//
// On success it returns the Config and any warnings. On failure it returns a
// nil Config, the warnings, and an *Error listing every problem found.
func Parse(name string, data []byte, baseDir string, env Env) (*Config, []Warning, error) {
	return parse(name, data, baseDir, env, renamedKeys)
}

func parse(name string, data []byte, baseDir string, env Env, renames []rename) (*Config, []Warning, error) {
	if abs, err := filepath.Abs(baseDir); err == nil {
		baseDir = abs
	}
	text := string(data)
	raw, perr := decodeRaw(text)
	if perr != nil {
		return nil, nil, &Error{File: name, Problems: []Problem{*perr}}
	}

	p := &parser{
		baseDir: baseDir,
		env:     env,
		lines:   newLineFinder(text),
		present: make(map[string]bool),
		bad:     make(map[string]bool),
		aliases: make(map[string][]string),
	}
	p.applyRenames(raw, renames)

	cfg := Default()
	p.decodeTable(nil, raw, reflect.ValueOf(cfg).Elem())
	if p.unknowns > maxUnknownWarnings {
		p.warn(nil, "", "%d more unknown keys not listed", p.unknowns-maxUnknownWarnings)
	}
	p.finish(cfg)
	p.validate(cfg)

	warnings := make([]Warning, 0, len(p.warnings))
	for _, f := range p.warnings {
		warnings = append(warnings, Warning{File: name, Key: f.key, Message: f.msg, Line: p.lineOf(f.path)})
	}
	sortWarnings(warnings)
	if len(p.problems) > 0 {
		problems := make([]Problem, 0, len(p.problems))
		for _, f := range p.problems {
			problems = append(problems, Problem{Key: f.key, Reason: f.msg, Line: p.lineOf(f.path)})
		}
		sortProblems(problems)
		return nil, warnings, &Error{File: name, Problems: problems}
	}
	return cfg, warnings, nil
}

// decodeRaw parses TOML into generic tables. A syntax error becomes a
// Problem with the line the parser reports.
func decodeRaw(text string) (raw map[string]any, problem *Problem) {
	defer func() {
		// The parser is fuzzed upstream; this keeps a bug there from taking
		// the daemon down with a stack trace instead of a message.
		if r := recover(); r != nil {
			raw, problem = nil, &Problem{Reason: fmt.Sprintf("cannot parse TOML: internal parser error: %v", r)}
		}
	}()
	raw = map[string]any{}
	_, err := toml.Decode(text, &raw)
	if err == nil {
		return raw, nil
	}
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return nil, &Problem{Reason: "invalid TOML: " + pe.Message, Line: pe.Position.Line}
	}
	return nil, &Problem{Reason: "invalid TOML: " + strings.TrimPrefix(err.Error(), "toml: ")}
}

// sectionEnabled says whether a section's values matter: an unset variable
// in a disabled section is not worth a warning, and its secret files are not
// read. Sections not listed are always enabled.
var sectionEnabled = map[string]func(*Config) bool{
	"wecom": func(c *Config) bool { return c.WeCom.Enabled },
	"voice": func(c *Config) bool { return c.Voice.Enabled },
}

func matters(c *Config, path []string) bool {
	if len(path) == 0 {
		return true
	}
	// An empty voice token is fine on a loopback listener and a Problem
	// anywhere else (validation says so), so the warning would only repeat
	// or mislead.
	if len(path) == 2 && path[0] == "voice" && path[1] == "token" {
		return false
	}
	if f, ok := sectionEnabled[path[0]]; ok {
		return f(c)
	}
	return true
}

// finish fills what depends on the environment, on other keys or on the
// file's location: $STATE_DIRECTORY, secret files, unset-variable warnings,
// provider presets, the admin socket and absolute paths.
func (p *parser) finish(c *Config) {
	p.readSecrets(c)
	for _, u := range p.unset {
		if !matters(c, u.path) {
			continue
		}
		hint := ""
		if isSecretKey(u.path) {
			hint = fmt.Sprintf(" (or set %s_FILE to a file holding it)", u.name)
		}
		p.warn(u.path, u.key, "environment variable %s is not set; using \"\"%s", u.name, hint)
	}

	// LLM: an unset or empty base_url takes the provider's preset; an unset
	// or empty model is gpt-4o for openai and required otherwise.
	if !p.present["llm.base_url"] || c.LLM.BaseURL == "" {
		c.LLM.BaseURL = providerBaseURLs[c.LLM.Provider]
	}
	if !p.present["llm.model"] || c.LLM.Model == "" {
		c.LLM.Model = ""
		if c.LLM.Provider == ProviderOpenAI {
			c.LLM.Model = defaultOpenAIModel
		}
	}
	if c.LLM.APIKey == "" && hostedProviders[c.LLM.Provider] && !p.warnedAbout("llm.api_key") && !p.isBad("llm.api_key") {
		p.warn([]string{"llm", "api_key"}, "", "is empty; provider %q will refuse requests without an API key", c.LLM.Provider)
	}

	// The default embedding model follows the office's language: bge-small
	// English cannot tell Chinese sentences apart (its vocabulary has
	// single characters only).
	if !p.present["embedding.model_dir"] && c.ASR.Language == "zh" {
		c.Embedding.ModelDir = defaultEmbeddingModelDirZH
	}

	p.resolvePaths(c)
}

func (p *parser) warnedAbout(key string) bool {
	for _, w := range p.warnings {
		if w.key == key {
			return true
		}
	}
	return false
}

// readSecrets reads the files of *_file keys and of VAR_FILE variables, for
// sections that are enabled.
func (p *parser) readSecrets(c *Config) {
	for _, s := range p.pending {
		if !matters(c, s.path) {
			continue
		}
		file := s.file
		if file == "" {
			p.problem(s.path, s.shown, "empty file name")
			p.markBad(s.secret)
			continue
		}
		if !filepath.IsAbs(file) {
			file = filepath.Join(p.baseDir, file)
		}
		data, err := readLimited(file, maxSecretSize)
		if err != nil {
			from := ""
			if s.source != "" {
				from = " (named by $" + s.source + ")"
			}
			p.problem(s.path, s.shown, "cannot read secret file %q%s: %v", file, from, err)
			p.markBad(s.secret)
			continue
		}
		v := strings.TrimRight(string(data), " \t\r\n")
		if v == "" {
			p.warn(s.path, s.shown, "secret file %q is empty", file)
		}
		setString(reflect.ValueOf(c).Elem(), s.secret, v)
	}
}

// resolvePaths makes path values absolute against the config's directory and
// applies $STATE_DIRECTORY.
//
// Under systemd, StateDirectory= sets $STATE_DIRECTORY and it replaces
// agent.state_dir. An admin_socket that was given inside the configured
// state_dir (such as "var/agent.sock" with state_dir "var") moves along with
// it; one elsewhere stays where it was given. An unset or empty admin_socket
// is <state_dir>/agent.sock.
func (p *parser) resolvePaths(c *Config) {
	abs := func(s string) string {
		if s == "" {
			return ""
		}
		if filepath.IsAbs(s) {
			return filepath.Clean(s)
		}
		return filepath.Join(p.baseDir, s)
	}
	state := abs(c.Agent.StateDir)
	f := &c.Fleet
	f.CredentialsFile, f.TLSCAFile, f.TLSCertFile, f.TLSKeyFile = abs(f.CredentialsFile), abs(f.TLSCAFile), abs(f.TLSCertFile), abs(f.TLSKeyFile)
	socket := ""
	if p.present["server.admin_socket"] {
		socket = abs(c.Server.AdminSocket)
	}
	if sd := firstPath(p.env, "STATE_DIRECTORY"); sd != "" {
		newState := abs(sd)
		if socket != "" && state != "" {
			if rel, err := filepath.Rel(state, socket); err == nil && filepath.IsLocal(rel) {
				socket = filepath.Join(newState, rel)
			}
		}
		state = newState
	}
	if socket == "" && state != "" {
		socket = filepath.Join(state, adminSocketName)
	}
	c.Agent.StateDir = state
	c.Server.AdminSocket = socket
	c.Agent.Workspace = abs(c.Agent.Workspace)
	c.Embedding.ModelDir = abs(c.Embedding.ModelDir)
	c.Embedding.OnnxruntimeLib = abs(c.Embedding.OnnxruntimeLib)
	c.ASR.Model = abs(c.ASR.Model)
	c.Voice.VADModel = abs(c.Voice.VADModel)
	c.Skills.BundledDir = abs(c.Skills.BundledDir)
	c.Skills.InstalledDir = abs(c.Skills.InstalledDir)
	if c.Skills.InstalledDir == "" && state != "" {
		c.Skills.InstalledDir = filepath.Join(state, "skills")
	}
	for name, e := range c.Skills.Entries {
		files := make(map[string]string, len(e.Files))
		for in, host := range e.Files {
			files[in] = abs(host)
		}
		e.Files = files
		c.Skills.Entries[name] = e
	}
}
