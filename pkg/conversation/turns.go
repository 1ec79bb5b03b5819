package conversation

import (
	"context"
	"errors"

	"agent/pkg/channel"
	"agent/pkg/turn"
)

// Handler runs turns (*Service).
type Handler interface {
	Handle(ctx context.Context, in Inbound, reply Reply) (done <-chan struct{}, err error)
}

// ErrUnavailable is a turn refused because the pipeline is not running.
var ErrUnavailable = errors.New("the conversation pipeline is unavailable")

// Turns is h as channels see it (channel.Turns): each message becomes an
// Inbound (FromTurn). cancel stops the turn running on a routing key (the
// runner's Cancel; nil: a cancelled turn runs on). unavailable says why
// the pipeline is not running (nil, or returning nil: it is); h may then
// be nil.
func Turns(h Handler, cancel func(key string), unavailable func() error) channel.Turns {
	return turns{h: h, cancel: cancel, unavailable: unavailable}
}

type turns struct {
	h           Handler
	cancel      func(key string)
	unavailable func() error
}

func (t turns) Handle(ctx context.Context, m turn.Message, out turn.Sink) (<-chan struct{}, error) {
	if err := t.Err(); err != nil {
		return nil, err
	}
	if out.Reply == nil {
		return nil, errors.New("conversation: a turn needs a reply")
	}
	return t.h.Handle(ctx, FromTurn(m, out), out.Reply)
}

func (t turns) Cancel(m turn.Message) {
	if t.cancel == nil {
		return
	}
	if key, err := Key(FromTurn(m, turn.Sink{})); err == nil {
		t.cancel(string(key))
	}
}

func (t turns) Key(m turn.Message) (string, error) {
	k, err := Key(FromTurn(m, turn.Sink{}))
	return string(k), err
}

func (t turns) Err() error {
	if t.unavailable != nil {
		if err := t.unavailable(); err != nil {
			return err
		}
	}
	if t.h == nil {
		return ErrUnavailable
	}
	return nil
}
