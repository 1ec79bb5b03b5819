package skills

import (
	"path/filepath"

	"agent/pkg/config"
)

// StateFileName is the file in the state dir that keeps the disabled set.
const StateFileName = "skills.json"

// FromConfig is the Config of cfg's skills: [skills] bundled_dir and
// installed_dir, the workspace's skills/ folder, the disabled set in the
// state dir, and a skill's environment requirements met only by what
// [skills.entries.NAME] env gives it (never the daemon's own variables).
// Clock and Logger are left to the caller.
func FromConfig(cfg *config.Config) Config {
	entries := cfg.Skills.Entries
	return Config{
		Bundled:   cfg.Skills.BundledDir,
		Installed: cfg.Skills.InstalledDir,
		Workspace: filepath.Join(cfg.Agent.Workspace, "skills"),
		StateFile: filepath.Join(cfg.Agent.StateDir, StateFileName),
		HasEnv: func(skill, name string) bool {
			_, ok := entries[skill].Env[name]
			return ok
		},
		IndexBytes: cfg.Skills.IndexBytes,
	}
}
