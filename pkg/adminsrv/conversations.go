package adminsrv

import (
	"context"
	"errors"
	"fmt"

	"agent/pkg/admin"
	"agent/pkg/conversation"
	"agent/pkg/memory"
)

// The operator's view of the conversations: agentctl send, sessions and
// memory. The operator sees every user's data.

// Send is agentctl send: one message through the same pipeline a WeCom or
// voice message takes, as user req.To on the admin channel.
func (b *Backend) Send(ctx context.Context, req admin.SendRequest) (admin.SendResult, error) {
	if err := b.ready(); err != nil {
		return admin.SendResult{}, err
	}
	if req.Channel == "" {
		req.Channel = "admin"
	}
	if req.Channel != "admin" {
		return admin.SendResult{}, fmt.Errorf("channel %q: only the admin channel can be driven from agentctl", req.Channel)
	}
	if req.To == "" || req.Text == "" {
		return admin.SendResult{}, errors.New("send needs a user (--to) and a text")
	}
	replies, err := b.Assistant.Ask(ctx, conversation.Inbound{Channel: req.Channel, Sender: req.To, Text: req.Text})
	res := admin.SendResult{Replies: replies}
	if err != nil && (len(replies) == 0 || ctx.Err() != nil) {
		return res, err
	}
	return res, nil // with replies the user was told (queue full)
}

// Sessions lists every conversation session.
func (b *Backend) Sessions(ctx context.Context) ([]admin.Session, error) {
	ss, err := b.Assistant.Sessions()
	if err != nil {
		return nil, err
	}
	list, err := ss.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]admin.Session, 0, len(list))
	for _, s := range list {
		out = append(out, admin.Session{ID: s.ID, Key: string(s.Key), Messages: s.Messages,
			CreatedAt: s.CreatedAt, LastActivity: s.LastActivity, Open: s.Open()})
	}
	return out, nil
}

func adminFact(f memory.Fact, score float64) admin.Fact {
	return admin.Fact{ID: f.ID, Scope: f.Scope, Text: f.Text, Keywords: f.Keywords, Persons: f.Persons,
		Topic: f.Topic, Time: f.TimeText, Source: f.Source, Created: f.Created, Updated: f.Updated,
		Seen: f.Seen, SupersededBy: f.SupersededBy, Score: score}
}

// MemoryList implements admin.MemoryBackend.
func (b *Backend) MemoryList(ctx context.Context, q admin.MemoryQuery) ([]admin.Fact, error) {
	m, err := b.Assistant.Memory()
	if err != nil {
		return nil, err
	}
	facts, err := m.List(ctx, memory.Filter{Scope: q.Scope, History: q.History, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]admin.Fact, len(facts))
	for i, f := range facts {
		out[i] = adminFact(f, 0)
	}
	return out, nil
}

// MemorySearch implements admin.MemoryBackend.
func (b *Backend) MemorySearch(ctx context.Context, q admin.MemoryQuery) ([]admin.Fact, error) {
	m, err := b.Assistant.Memory()
	if err != nil {
		return nil, err
	}
	k := q.Limit
	if k <= 0 {
		k = 10
	}
	var hits []memory.Hit
	if q.Scope == "" {
		hits, err = m.SearchAllScopes(ctx, q.Query, k)
	} else {
		hits, err = m.Search(ctx, q.Scope, q.Query, k)
	}
	if err != nil {
		return nil, err
	}
	out := make([]admin.Fact, len(hits))
	for i, h := range hits {
		out[i] = adminFact(h.Fact, h.Score)
	}
	return out, nil
}

// MemoryForget implements admin.MemoryBackend.
func (b *Backend) MemoryForget(ctx context.Context, id int64) (admin.Fact, error) {
	m, err := b.Assistant.Memory()
	if err != nil {
		return admin.Fact{}, err
	}
	f, err := m.Forget(ctx, "", id)
	if errors.Is(err, memory.ErrNotFound) {
		return admin.Fact{}, fmt.Errorf("%w: no fact #%d", admin.ErrNotFound, id)
	}
	if err != nil {
		return admin.Fact{}, err
	}
	b.logger().Info("fact forgotten by the operator", "id", f.ID, "scope", f.Scope)
	return adminFact(f, 0), nil
}
