package plugin

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"agent/pkg/channel"
	"agent/pkg/channelhost"
	"agent/pkg/clock"
	"agent/pkg/config"
	"agent/pkg/store/storetest"
)

// Build makes one channel per [channels.NAME] section, in name order,
// each working in its own state directory, whatever the pipeline's state.
func TestBuildOneChannelPerSection(t *testing.T) {
	cfg := config.Default()
	cfg.Agent.StateDir = t.TempDir()
	cfg.Channels = map[string]config.ChannelPlugin{
		"zulip":  {Command: "/usr/bin/zulip-bridge"},
		"matrix": {Command: "/usr/bin/matrix-bridge", Args: []string{"-v"}, Env: map[string]string{"TOKEN": "x"}},
	}
	env := channelhost.Env{
		Host:   channel.Host{Logger: slog.New(slog.DiscardHandler), Clock: clock.Real()},
		Config: func() *config.Config { return cfg },
		DB:     storetest.DB(t),
	}
	list, err := Build(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name() != "matrix" || list[1].Name() != "zulip" {
		t.Fatalf("channels %v", list)
	}
	m := list[0].(*Channel)
	if m.d.Command != "/usr/bin/matrix-bridge" || m.d.Args[0] != "-v" || m.d.Env["TOKEN"] != "x" ||
		m.d.Dir != filepath.Join(cfg.Agent.StateDir, "channels", "matrix") || m.d.Ask != nil || m.proc != nil {
		t.Fatalf("deps %+v", m.d)
	}
	if c, err := BuildOne(context.Background(), env, "absent"); c != nil || err != nil {
		t.Fatalf("absent section: %v %v", c, err)
	}
}
