package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// channelName is what a [channels.NAME] may be called: the channel part of
// its users' names ("NAME:sender"), of session keys and folder names.
var channelName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// ReservedChannels are the names a [channels.NAME] plugin may not take:
// the built-in channels (those of today and those planned), the voice
// profiles, and the words session keys and group scopes start with
// ("group:wecom:CHAT").
var ReservedChannels = []string{
	"admin", "console", "dingtalk", "feishu", "fleet", "group", "hardware",
	"p2p", "qq", "thread", "voice", "wecom", "wecom_bot",
}

// defaultPath is where a plugin's command is looked up when the
// environment has no PATH (systemd's default).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// validateChannels checks every [channels.NAME] and makes its command the
// absolute path of the executable it names.
func (p *parser) validateChannels(c *Config) {
	for _, name := range slices.Sorted(maps.Keys(c.Channels)) {
		ch := c.Channels[name]
		path := []string{"channels", name}
		switch {
		case !channelName.MatchString(name):
			p.problem(path, "", "invalid channel name (want a lower-case letter, then up to 31 lower-case letters, digits and '_')")
		case slices.Contains(ReservedChannels, name):
			p.problem(path, "", "%q is a built-in channel's name or a reserved word; choose another name", name)
		}
		if p.isBad(dotted(path)) {
			continue
		}
		cmdPath := sub(path, "command")
		if !p.isBad(dotted(cmdPath)) {
			if strings.TrimSpace(ch.Command) == "" {
				p.problem(cmdPath, "", "required: the plugin's executable (an absolute path, a path relative to the config file, or a name on PATH)")
			} else if abs, err := p.resolveCommand(ch.Command); err != nil {
				p.problem(cmdPath, "", "%v", err)
			} else {
				ch.Command = abs
			}
		}
		for i, a := range ch.Args {
			if strings.ContainsRune(a, 0) {
				p.problem(sub(path, "args"), fmt.Sprintf("%s[%d]", shown(sub(path, "args")), i), "must not contain a NUL byte")
			}
		}
		for _, k := range sortedKeys(ch.Env) {
			if !envNameRE.MatchString(k) {
				p.problem(sub(path, "env"), "", "invalid variable name %q (want letters, digits and '_', not starting with a digit)", k)
			}
			if strings.ContainsRune(ch.Env[k], 0) {
				p.problem(sub(path, "env"), "", "the value of %s must not contain a NUL byte", k)
			}
		}
		c.Channels[name] = ch
	}
}

// resolveCommand finds the executable cmd names: an absolute path, a path
// relative to the config file's directory when it holds a '/', else a
// name on PATH (the environment's, else defaultPath).
func (p *parser) resolveCommand(cmd string) (string, error) {
	if strings.ContainsRune(cmd, '/') {
		if !filepath.IsAbs(cmd) {
			cmd = filepath.Join(p.baseDir, cmd)
		}
		cmd = filepath.Clean(cmd)
		if err := executable(cmd); err != nil {
			return "", fmt.Errorf("%s: %w", cmd, err)
		}
		return cmd, nil
	}
	dirs, ok := lookupEnv(p.env, "PATH")
	if !ok || dirs == "" {
		dirs = defaultPath
	}
	for _, dir := range filepath.SplitList(dirs) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // the daemon's working directory is no place to find a program
		}
		full := filepath.Join(dir, cmd)
		if executable(full) == nil {
			return full, nil
		}
	}
	return "", fmt.Errorf("%q is not an executable found on PATH (%s); give its absolute path", cmd, dirs)
}

// executable reports why path is not an executable regular file (nil when
// it is one).
func executable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("no such file")
	case err != nil:
		return describeFSError(err)
	case fi.IsDir():
		return errors.New("is a directory, not an executable")
	case !fi.Mode().IsRegular():
		return errors.New("is not a regular file")
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("is not executable (mode %04o; chmod +x it)", fi.Mode().Perm())
	}
	return nil
}

// channelsEqual reports whether two [channels] tables are the same.
func channelsEqual(a, b map[string]ChannelPlugin) bool {
	return maps.EqualFunc(a, b, func(x, y ChannelPlugin) bool {
		return x.Command == y.Command && slices.Equal(x.Args, y.Args) && maps.Equal(x.Env, y.Env)
	})
}
