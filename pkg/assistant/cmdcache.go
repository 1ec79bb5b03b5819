package assistant

import (
	"context"
	"encoding/json"
	"sync/atomic"

	"agent/pkg/cmdcache"
	"agent/pkg/embed"
	"agent/pkg/tools"
)

// The command cache (pkg/cmdcache): repeated voice and hardware commands
// answered on the box. It embeds with the model memory uses (once loaded,
// SetEmbedder), runs tools through the registry as the asker, and reads
// voice.command_cache* per turn.

type cachePart struct {
	c   *cmdcache.Cache
	emb atomic.Pointer[embed.Embedder]
}

func (a *Assistant) newCommandCache() *cachePart {
	p := &cachePart{}
	p.c = cmdcache.New(cmdcache.Config{
		DB: a.d.Store.DB(),
		Embedder: func() cmdcache.Embedder {
			if e := p.emb.Load(); e != nil {
				return e
			}
			return nil
		},
		Enabled:   func() bool { return a.config().Voice.CommandCache },
		Threshold: func() float64 { return a.config().Voice.CommandCacheThreshold },
		TTL:       a.config().Voice.CommandCacheTTL.Duration,
		Kind:      a.toolKind,
		ToolSet: func(profile string) string {
			return cmdcache.ToolSetDigest(a.reg.Specs(profile), a.toolKind)
		},
		Run: func(ctx context.Context, r cmdcache.Request, tool, args string) (string, error) {
			return a.reg.Run(ctx, tool, tools.Call{Args: json.RawMessage(args), User: r.Sender, Channel: r.Channel, Profile: r.Profile, Session: r.Session})
		},
		Clock:  a.clock,
		Logger: a.logger.With("component", "command_cache"),
	})
	return p
}

// toolKind is what a registered tool promises about running it again.
func (a *Assistant) toolKind(name string) cmdcache.Kind {
	t, ok := a.reg.Get(name)
	switch {
	case !ok:
		return cmdcache.No
	case t.ReadOnly:
		return cmdcache.ReadOnly
	case t.Idempotent:
		return cmdcache.Idempotent
	}
	return cmdcache.No
}

// CommandCache is the cache, for the admin API (agentctl cache).
func (a *Assistant) CommandCache() (*cmdcache.Cache, error) {
	if err := a.unavailable(); err != nil {
		return nil, err
	}
	return a.cache.c, nil
}
