package sandbox

import "agent/pkg/config"

// FromConfig is c with the limits, network switch, interpreter and
// concurrency config.toml's [sandbox] sets.
func FromConfig(s config.Sandbox, c Config) Config {
	c.Limits = Limits{
		Timeout:    s.Timeout.Duration,
		CPUSeconds: s.CPUSeconds,
		MemoryMB:   s.MemoryMB,
		MaxProcs:   s.MaxProcesses,
		FileMB:     s.MaxFileMB,
		OutputKB:   s.MaxOutputKB,
	}
	c.Network = s.Network == config.NetworkOn
	c.Python = s.Python
	c.MaxRuns = s.MaxRuns
	return c
}
