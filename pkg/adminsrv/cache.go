package adminsrv

import (
	"context"

	"agent/pkg/cmdcache"
)

// CacheList lists the command cache (pkg/cmdcache).
func (b *Backend) CacheList(ctx context.Context) ([]cmdcache.Entry, error) {
	c, err := b.Assistant.CommandCache()
	if err != nil {
		return nil, err
	}
	return c.List(ctx)
}

// CacheClear deletes command cache entries (all when id is 0).
func (b *Backend) CacheClear(ctx context.Context, id int64) (int, error) {
	c, err := b.Assistant.CommandCache()
	if err != nil {
		return 0, err
	}
	return c.Clear(ctx, id)
}
