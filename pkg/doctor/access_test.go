package doctor

import (
	"context"
	"strings"
	"testing"

	"agent/pkg/config"
)

func TestAccessCheck(t *testing.T) {
	wecom := config.WeCom{Enabled: true, CorpID: "wx1", CorpSecret: "s", AgentID: 1, Token: "t", EncodingAESKey: "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"}
	tests := []struct {
		name  string
		edit  func(c *config.Config)
		level Level
		want  []string
	}{
		{"token set, loopback", func(c *config.Config) { c.Voice.Token = "0123456789abcdef0123" }, OK,
			[]string{"loopback", "agent.example.com", "agentctl console"}},
		{"empty voice token", func(c *config.Config) { c.Voice.Token = "" }, Warn,
			[]string{"voice.token is empty", "agentctl console"}},
		{"voice disabled, no token", func(c *config.Config) { c.Voice.Enabled, c.Voice.Token = false, "" }, OK, []string{"voice disabled"}},
		{"wecom behind a tunnel, no allowed_hosts", func(c *config.Config) {
			c.Voice.Token, c.WeCom, c.Server.AllowedHosts = "0123456789abcdef0123", wecom, nil
		}, Warn, []string{"server.allowed_hosts", "421"}},
		{"a voice owner", func(c *config.Config) {
			c.Voice.Token, c.Agent.Owners = "0123456789abcdef0123", []string{"wecom:zhangsan", "voice:boss-phone"}
		}, Warn, []string{"voice:boss-phone", "agentctl console"}},
		{"wecom with allowed_hosts", func(c *config.Config) { c.Voice.Token, c.WeCom = "0123456789abcdef0123", wecom }, OK, nil},
		{"wildcard listen, no allowed_hosts", func(c *config.Config) {
			c.Voice.Token, c.Server.Listen, c.Server.AllowedHosts = "0123456789abcdef0123", ":8080", nil
		}, Warn, []string{"every interface", "LAN"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := baseEnv(t, "", nil)
			e.Config.Server.AllowedHosts = []string{"agent.example.com"}
			tt.edit(e.Config)
			r := e.checkAccess(context.Background())
			if r.Level != tt.level {
				t.Fatalf("level %s (%s); want %s", r.Level, r.Detail, tt.level)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.Detail+" "+r.Fix, w) {
					t.Errorf("%q lacks %q", r.Detail+" fix: "+r.Fix, w)
				}
			}
			if r.Level == Warn && r.Fix == "" {
				t.Error("a warning without a fix")
			}
		})
	}
}
