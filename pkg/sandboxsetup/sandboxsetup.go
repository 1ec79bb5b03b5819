// Package sandboxsetup derives a daemon's sandbox from its config: where
// the sandbox keeps its own files, the account it runs as and the folders
// its runs bind. The daemon and doctor both build theirs with For, so that
// doctor's probe is the daemon's, with the same verdict.
package sandboxsetup

import (
	"path/filepath"

	"agent/pkg/config"
	"agent/pkg/sandbox"
	"agent/pkg/workspace"
)

// Setup is a daemon's sandbox before it is built.
type Setup struct {
	// Config is base with [sandbox]'s settings, the account (As) and the
	// temp dir chosen for it.
	Config sandbox.Config
	// Folders are what the runs bind, for ProbeFolders.
	Folders sandbox.Folders
	// Moved says why the temp dir is not the state dir's sandbox/ (the
	// account cannot reach it); nil when it is.
	Moved error
}

// For is the sandbox of a daemon with cfg running as host. It makes the
// temp dir when it falls back to one outside the state dir (Host.TempDir).
func For(cfg *config.Config, host sandbox.Host, base sandbox.Config) (Setup, error) {
	c := sandbox.FromConfig(cfg.Sandbox, base)
	c.As = host.As
	// No run takes the last agent.disk_reserve_mb of the disks it writes.
	c.MinFreeMB = cfg.Agent.DiskReserveMB
	if c.MinFreeMB == 0 {
		c.MinFreeMB = -1 // 0 in config.toml: no reserve
	}
	dir, moved, err := host.TempDir(cfg.Agent.StateDir)
	if err != nil {
		return Setup{}, err
	}
	c.TempDir = dir
	ws := cfg.Agent.Workspace
	if abs, err := filepath.Abs(ws); err == nil {
		ws = abs
	}
	return Setup{
		Config: c,
		Folders: sandbox.Folders{
			Within: filepath.Join(ws, workspace.FilesDir),
			Read:   []string{filepath.Join(ws, workspace.SharedDir), filepath.Join(ws, workspace.SkillsDir)},
			Keys:   "agent.workspace and agent.state_dir",
		},
		Moved: moved,
	}, nil
}
