package config

// RestartKeys lists the settings that differ between a and b and take
// effect only after a restart (a reload reports them, never applies them).
func RestartKeys(a, b *Config) []string {
	var keys []string
	if a.Server.Listen != b.Server.Listen {
		keys = append(keys, "server.listen")
	}
	if a.Server.AdminSocket != b.Server.AdminSocket {
		keys = append(keys, "server.admin_socket")
	}
	if a.Agent.StateDir != b.Agent.StateDir {
		keys = append(keys, "agent.state_dir")
	}
	if a.Agent.Workspace != b.Agent.Workspace {
		keys = append(keys, "agent.workspace")
	}
	if a.LLM != b.LLM {
		keys = append(keys, "llm")
	}
	if a.Embedding != b.Embedding {
		keys = append(keys, "embedding")
	}
	if a.ASR != b.ASR {
		keys = append(keys, "asr")
	}
	aw, bw := a.WeCom, b.WeCom
	aw.ProgressAfter, bw.ProgressAfter = Duration{}, Duration{} // applies on reload
	if aw != bw {
		keys = append(keys, "wecom")
	}
	if a.Voice.Enabled != b.Voice.Enabled {
		keys = append(keys, "voice.enabled")
	}
	if a.Voice.VAD != b.Voice.VAD || a.Voice.VADModel != b.Voice.VADModel {
		keys = append(keys, "voice.vad")
	}
	if a.WeComBot != b.WeComBot {
		keys = append(keys, "wecom_bot")
	}
	if a.Sandbox != b.Sandbox {
		keys = append(keys, "sandbox")
	}
	if a.Skills.BundledDir != b.Skills.BundledDir || a.Skills.InstalledDir != b.Skills.InstalledDir {
		keys = append(keys, "skills.bundled_dir/installed_dir")
	}
	if !channelsEqual(a.Channels, b.Channels) {
		keys = append(keys, "channels")
	}
	return keys
}
