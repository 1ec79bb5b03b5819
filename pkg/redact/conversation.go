package redact

import (
	"context"
	"sync"
	"time"
)

// A conversation's requests share one Map: the placeholder a command was
// given, and that came back in its output, means the same value in the
// next request of the turn and in later turns. The caller names the
// conversation of a request in its context (WithConversation); maps are
// the caller's (Conversations), bounded, and dropped when idle.

type conversationKey struct{}

// WithConversation says that requests made with ctx belong to the
// conversation key (a session's routing key): a Client with Conversations
// gives them that conversation's map.
func WithConversation(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, conversationKey{}, key)
}

// conversationOf is the conversation WithConversation named ("" for none).
func conversationOf(ctx context.Context) string {
	key, _ := ctx.Value(conversationKey{}).(string)
	return key
}

// ConversationsConfig bounds Conversations. Zero fields take the
// defaults noted.
type ConversationsConfig struct {
	Max       int           // conversations kept; the least recently used goes first; 1024
	MaxValues int           // values one map holds before it starts over; 4096
	Idle      time.Duration // a map unused this long is dropped; 6h
	Now       func() time.Time
}

// Conversations keeps one Map per conversation. When a map is dropped
// (idle, evicted, full) the conversation starts a new one: the
// placeholders of the old one left in its history are then literal text
// to it (reserved, never put back), which loses nothing but their
// meaning.
type Conversations struct {
	cfg  ConversationsConfig
	mu   sync.Mutex
	maps map[string]*conversation
}

type conversation struct {
	m    *Map
	used time.Time
}

// NewConversations returns an empty set of conversation maps.
func NewConversations(cfg ConversationsConfig) *Conversations {
	if cfg.Max <= 0 {
		cfg.Max = 1024
	}
	if cfg.MaxValues <= 0 {
		cfg.MaxValues = 4096
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 6 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Conversations{cfg: cfg, maps: map[string]*conversation{}}
}

// Map returns the map of conversation key, detecting kinds from now on.
func (cs *Conversations) Map(key string, kinds []Kind) *Map {
	now := cs.cfg.Now()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var oldest string
	for k, c := range cs.maps {
		if now.Sub(c.used) >= cs.cfg.Idle {
			delete(cs.maps, k)
			continue
		}
		if k != key && (oldest == "" || c.used.Before(cs.maps[oldest].used)) {
			oldest = k
		}
	}
	c := cs.maps[key]
	if c == nil || c.m.Len() >= cs.cfg.MaxValues {
		if c == nil && len(cs.maps) >= cs.cfg.Max && oldest != "" {
			delete(cs.maps, oldest)
		}
		c = &conversation{m: NewMap(kinds)}
		cs.maps[key] = c
	}
	c.used = now
	c.m.setKinds(kinds)
	return c.m
}

// Len is how many conversations have a map.
func (cs *Conversations) Len() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return len(cs.maps)
}
