package fleet

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go"
)

// Calls between boxes: a channel's service on one box that the others
// use (the AI Bot's connection, which only the ingress box holds, sends
// the replies of turns run on the users' home boxes). A call is a NATS
// request on agent.call.<box>.<service> (that box) or agent.svc.<service>
// (whichever box serves it). Calls are not durable: the caller retries
// (a reply queued in its outbox is sent again).

const (
	callRoot   = "agent.call"
	svcRoot    = "agent.svc"
	headerErr  = "Agent-Error"
	headerPerm = "Agent-Error-Permanent"
	// maxCalls bounds the calls a box serves at once; more are refused
	// (the callers retry) rather than queued without bound.
	maxCalls = 64
	// callTimeout bounds a call whose context has no deadline.
	callTimeout = 30 * time.Second
)

// serviceName is a service's name: one subject token.
var serviceName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// CallError is a call's failure as the serving box reported it.
type CallError struct {
	Box       string // the box that answered ("" when unknown)
	Msg       string
	Permanent bool // trying again cannot succeed
}

func (e *CallError) Error() string { return "fleet call: " + e.Msg }

// ServeFunc answers one call. A returned error that wraps ErrPermanent is
// reported as permanent.
type ServeFunc func(ctx context.Context, data []byte) ([]byte, error)

// ErrPermanent marks a served call's error that a retry cannot fix.
var ErrPermanent = errors.New("permanent")

// Serve answers service on this box until ctx ends (each call in its own
// goroutine, at most maxCalls at once, bounded by callTimeout); shared
// also answers calls to whichever box serves it. It may be called before
// Run: NATS replays the subscriptions when it connects.
func (f *Fleet) Serve(ctx context.Context, service string, shared bool, fn ServeFunc) error {
	if !serviceName.MatchString(service) {
		return fmt.Errorf("%w: service %q", ErrBadName, service)
	}
	slots := make(chan struct{}, maxCalls)
	handle := func(m *nats.Msg) {
		if m.Reply == "" {
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			respond(m, f.cfg.Box, nil, errors.New("the box is busy: too many calls at once"))
			return
		}
		go func() {
			defer func() { <-slots }()
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			data, err := fn(cctx, m.Data)
			respond(m, f.cfg.Box, data, err)
		}()
	}
	subs := make([]*nats.Subscription, 0, 2)
	sub, err := f.nc.Subscribe(callRoot+"."+f.cfg.Box+"."+service, handle)
	if err != nil {
		return fmt.Errorf("fleet: serve %s: %w", service, err)
	}
	subs = append(subs, sub)
	if shared {
		if sub, err = f.nc.QueueSubscribe(svcRoot+"."+service, "agent", handle); err != nil {
			subs[0].Unsubscribe()
			return fmt.Errorf("fleet: serve %s: %w", service, err)
		}
		subs = append(subs, sub)
	}
	context.AfterFunc(ctx, func() {
		for _, s := range subs {
			s.Unsubscribe()
		}
	})
	// Served once this returns: the server has the subscriptions before a
	// caller's first request (without the round trip a request sent right
	// after found no responder). Best effort, and not while NATS is down
	// (the subscriptions are sent on reconnection; start-up does not wait).
	if f.nc.IsConnected() {
		_ = f.nc.FlushTimeout(5 * time.Second)
	}
	return nil
}

func respond(m *nats.Msg, box string, data []byte, err error) {
	r := nats.NewMsg(m.Reply)
	r.Header.Set(headerIngres, box)
	if err != nil {
		r.Header.Set(headerErr, err.Error())
		if errors.Is(err, ErrPermanent) {
			r.Header.Set(headerPerm, "1")
		}
	} else {
		r.Data = data
	}
	m.RespondMsg(r)
}

// Call asks box's service (box "": whichever box serves it) and returns
// its answer. It returns ErrUnavailable (wrapped) when no box answers (NATS
// down, nobody serving, a timeout), and a *CallError when the box
// answered with an error.
func (f *Fleet) Call(ctx context.Context, box, service string, data []byte) ([]byte, error) {
	if !serviceName.MatchString(service) || (box != "" && !ValidBox(box)) {
		return nil, fmt.Errorf("%w: call %q on %q", ErrBadName, service, box)
	}
	subj := svcRoot + "." + service
	if box != "" {
		subj = callRoot + "." + box + "." + service
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, callTimeout)
		defer cancel()
	}
	msg := nats.NewMsg(subj)
	msg.Data = data
	r, err := f.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, fmt.Errorf("%w: no box serves %s", ErrUnavailable, subj)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, subj, err)
	}
	if e := r.Header.Get(headerErr); e != "" {
		return nil, &CallError{Box: r.Header.Get(headerIngres), Msg: e, Permanent: r.Header.Get(headerPerm) == "1"}
	}
	return r.Data, nil
}
