package config

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestSkillsSection(t *testing.T) {
	cfg, _, dir := mustParse(t, `[skills]
installed_dir = "extra/skills"
index_bytes = 2048
[skills.entries.weather]
env = { WEATHER_KEY = "${WEATHER_KEY}", UNITS = "metric" }
files = { "/secrets/weather.key" = "keys/weather.key" }
users = ["wecom:alice"]
`, map[string]string{"WEATHER_KEY": "wk-secret-123"})
	s := cfg.Skills
	if s.BundledDir != DefaultBundledSkills || s.InstalledDir != filepath.Join(dir, "extra", "skills") || s.IndexBytes != 2048 {
		t.Fatalf("skills: %+v", s)
	}
	e := s.Entries["weather"]
	if e.Env["WEATHER_KEY"] != "wk-secret-123" || e.Files["/secrets/weather.key"] != filepath.Join(dir, "keys", "weather.key") || e.Users[0] != "wecom:alice" {
		t.Fatalf("entry: %+v", e)
	}
	if red := cfg.Redacted(); strings.Contains(red, "wk-secret-123") || strings.Contains(red, "metric") {
		t.Fatalf("skill env values are secrets; redacted dump shows them:\n%s", red)
	}
	for text, want := range map[string]string{
		"[skills]\nindex_bytes = 10\n":                                     "between 256 and 65536",
		"[skills.entries.\"../x\"]\nusers = []\n":                          "invalid skill name",
		"[skills.entries.w]\nenv = { \"A=B\" = \"1\" }\n":                  "invalid variable name",
		"[skills.entries.w]\nfiles = { \"/etc/passwd\" = \"/tmp/x\" }\n":   "outside the system directories",
		"[skills.entries.w]\nfiles = { \"/work/.key\" = \"/tmp/x\" }\n":    "outside the system directories",
		"[skills.entries.w]\nfiles = { \"relative/key\" = \"/tmp/x\" }\n":  "must be absolute",
		"[skills.entries.w]\nfiles = { \"/skills/w/key\" = \"/tmp/x\" }\n": "/skills",
		"[skills.entries.w]\nusers = [\"alice\"]\n":                        "channel:id",
	} {
		if _, _, _, err := parseText(t, text, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}
