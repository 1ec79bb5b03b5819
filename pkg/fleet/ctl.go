package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ctlRequest is a request of one box to another (agent.ctl.<box>.<op>).
type ctlRequest struct {
	Channel string `json:"channel"`
	Conv    string `json:"conv"`
	Upto    uint64 `json:"upto,omitempty"`   // export: settle the stream up to here first
	Object  string `json:"object,omitempty"` // import: the snapshot's name
}

type ctlReply struct {
	Object string `json:"object,omitempty"`
	Bytes  int    `json:"bytes,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Timeouts of a move's steps.
const (
	settleTimeout = time.Minute     // the old box reads up to the switch
	drainTimeout  = 3 * time.Minute // its turns of the conversation finish
	ctlTimeout    = drainTimeout + settleTimeout + time.Minute
)

func (f *Fleet) serveCtl(ctx context.Context, m *nats.Msg) {
	op := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	var req ctlRequest
	var rep ctlReply
	err := json.Unmarshal(m.Data, &req)
	if err == nil {
		if _, err = Subject(req.Channel, req.Conv); err == nil {
			rctx, cancel := context.WithTimeout(ctx, ctlTimeout)
			rep, err = f.ctl(rctx, op, req)
			cancel()
		}
	}
	if err != nil {
		rep.Error = err.Error()
		f.log.Warn("fleet: request failed", "op", op, "conversation", req.Conv, "err", err)
	}
	b, _ := json.Marshal(rep)
	m.Respond(b)
}

func (f *Fleet) ctl(ctx context.Context, op string, req ctlRequest) (ctlReply, error) {
	f.mu.Lock()
	local := f.local
	f.mu.Unlock()
	if local == nil {
		return ctlReply{}, errors.New("box not ready")
	}
	switch op {
	case "export":
		if err := f.waitSettled(ctx, req.Upto); err != nil {
			return ctlReply{}, err
		}
		if err := waitFor(ctx, f, drainTimeout, func() (bool, error) { return local.Drained(ctx, req.Channel, req.Conv) }); err != nil {
			return ctlReply{}, fmt.Errorf("the conversation's turns did not finish: %w", err)
		}
		snap, err := local.Export(ctx, req.Channel, req.Conv)
		if err != nil {
			return ctlReply{}, err
		}
		name := fmt.Sprintf("%s.%d", HomeKey(req.Channel, req.Conv), req.Upto)
		if _, err := f.moves.PutBytes(ctx, name, snap); err != nil {
			return ctlReply{}, fmt.Errorf("store the snapshot: %w", err)
		}
		return ctlReply{Object: name, Bytes: len(snap)}, nil
	case "import":
		snap, err := f.moves.GetBytes(ctx, req.Object)
		if err != nil {
			return ctlReply{}, fmt.Errorf("read the snapshot %s: %w", req.Object, err)
		}
		if err := local.Import(ctx, req.Channel, req.Conv, snap); err != nil {
			return ctlReply{}, err
		}
		return ctlReply{Bytes: len(snap)}, nil
	case "purge":
		return ctlReply{}, local.Purge(ctx, req.Channel, req.Conv)
	}
	return ctlReply{}, fmt.Errorf("unknown request %q", op)
}

// waitSettled waits until this box has settled every stream message up
// to seq.
func (f *Fleet) waitSettled(ctx context.Context, seq uint64) error {
	return waitFor(ctx, f, settleTimeout, func() (bool, error) {
		if f.lastSeq.Load() >= seq {
			return true, nil
		}
		f.mu.Lock()
		cons := f.cons
		f.mu.Unlock()
		if cons != nil {
			if info, err := cons.Info(ctx); err == nil {
				f.settled(info.AckFloor.Stream)
			}
		}
		return f.lastSeq.Load() >= seq, nil
	})
}

func waitFor(ctx context.Context, f *Fleet, limit time.Duration, done func() (bool, error)) error {
	deadline := f.clk.Now().Add(limit)
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if f.clk.Now().After(deadline) {
			return fmt.Errorf("not done within %s", limit)
		}
		if !sleep(ctx, f.clk, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// request asks box to do op and waits for its reply.
func (f *Fleet) request(ctx context.Context, box, op string, req ctlRequest) (ctlReply, error) {
	b, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(ctx, ctlTimeout)
	defer cancel()
	m, err := f.nc.RequestWithContext(ctx, ctlRoot+"."+box+"."+op, b)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return ctlReply{}, fmt.Errorf("box %s does not answer (is it running and connected?)", box)
		}
		return ctlReply{}, fmt.Errorf("box %s: %s: %w", box, op, err)
	}
	var rep ctlReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return ctlReply{}, fmt.Errorf("box %s: %s: bad reply: %w", box, op, err)
	}
	if rep.Error != "" {
		return rep, fmt.Errorf("box %s: %s: %s", box, op, rep.Error)
	}
	return rep, nil
}

// MoveResult says what a move did.
type MoveResult struct {
	From, To string
	Since    uint64 // the stream sequence from which To answers
	Bytes    int    // the snapshot's size
	Took     time.Duration
	PurgeErr string `json:",omitempty"` // the old box kept its copy (why)
}

// Move moves a conversation of channel to box: the old box finishes its
// messages, its memory and sessions go to the new box through the object
// store, and the home entry switches. Messages that arrive meanwhile wait
// and are answered by the new box, in order.
func (f *Fleet) Move(ctx context.Context, channel, conv, to string) (MoveResult, error) {
	start := f.clk.Now()
	if !ValidBox(to) {
		return MoveResult{}, fmt.Errorf("%w: box %q", ErrBadName, to)
	}
	if _, err := Subject(channel, conv); err != nil {
		return MoveResult{}, err
	}
	if err := f.ensure(ctx); err != nil {
		return MoveResult{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if err := f.alive(ctx, to); err != nil {
		return MoveResult{}, err
	}
	hk := HomeKey(channel, conv)
	cur, rev, ok, err := f.home(ctx, hk)
	if err != nil {
		return MoveResult{}, err
	}
	if !ok {
		return MoveResult{}, fmt.Errorf("%s %s has no home yet (set one with agentctl fleet home)", channel, conv)
	}
	if cur.Moving {
		return MoveResult{}, fmt.Errorf("%s %s is being moved to %s already", channel, conv, cur.Box)
	}
	if cur.Box == to {
		return MoveResult{From: to, To: to}, nil
	}
	if err := f.alive(ctx, cur.Box); err != nil {
		return MoveResult{}, fmt.Errorf("the conversation's box: %w", err)
	}
	info, err := f.stream.Info(ctx)
	if err != nil {
		return MoveResult{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	last := info.State.LastSeq
	next := Home{Box: to, Since: last + 1, From: cur.Box, Moving: true, At: f.clk.Now().UTC()}
	raw, _ := json.Marshal(next)
	rev2, err := f.homes.Update(ctx, hk, raw, rev)
	if err != nil {
		return MoveResult{}, fmt.Errorf("switch the home of %s (changed meanwhile?): %w", hk, err)
	}
	res := MoveResult{From: cur.Box, To: to, Since: last + 1}
	undo := func(cause error) (MoveResult, error) {
		old, _ := json.Marshal(cur)
		if _, err := f.homes.Update(context.WithoutCancel(ctx), hk, old, rev2); err != nil {
			return res, fmt.Errorf("%w; and putting the old home back failed: %v (agentctl fleet home %s %s)", cause, err, conv, cur.Box)
		}
		return res, fmt.Errorf("move of %s to %s undone: %w", conv, to, cause)
	}
	req := ctlRequest{Channel: channel, Conv: conv, Upto: last}
	exp, err := f.request(ctx, cur.Box, "export", req)
	if err != nil {
		return undo(err)
	}
	res.Bytes = exp.Bytes
	req.Object = exp.Object
	if _, err := f.request(ctx, to, "import", req); err != nil {
		return undo(err)
	}
	next.Moving = false
	raw, _ = json.Marshal(next)
	if _, err := f.homes.Update(context.WithoutCancel(ctx), hk, raw, rev2); err != nil {
		return undo(fmt.Errorf("commit the home: %w", err))
	}
	// Committed: the old box's copy goes.
	if _, err := f.request(context.WithoutCancel(ctx), cur.Box, "purge", req); err != nil {
		res.PurgeErr = err.Error()
		f.log.Warn("fleet: the old box kept its copy of a moved conversation", "conversation", hk, "box", cur.Box, "err", err)
	}
	f.moves.Delete(context.WithoutCancel(ctx), exp.Object)
	res.Took = f.clk.Now().Sub(start)
	f.log.Info("fleet: conversation moved", "conversation", hk, "from", cur.Box, "to", to, "since", res.Since, "bytes", res.Bytes, "took", res.Took)
	return res, nil
}

// alive checks that box has a heartbeat younger than three periods.
func (f *Fleet) alive(ctx context.Context, box string) error {
	e, err := f.boxes.Get(ctx, box)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("no box %s in the fleet (never seen)", box)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	var b Beat
	json.Unmarshal(e.Value(), &b)
	if age := f.clk.Now().Sub(b.At); age > 3*f.cfg.Heartbeat {
		return fmt.Errorf("box %s is not up (last heartbeat %s ago)", box, age.Round(time.Second))
	}
	return nil
}

// SetHome homes a conversation on box without moving anything: from the
// next message on, box answers it (a conversation not seen yet, or one
// whose data may stay where it is; Move takes the memory along).
func (f *Fleet) SetHome(ctx context.Context, channel, conv, box string) (Home, error) {
	if !ValidBox(box) {
		return Home{}, fmt.Errorf("%w: box %q", ErrBadName, box)
	}
	if _, err := Subject(channel, conv); err != nil {
		return Home{}, err
	}
	if err := f.ensure(ctx); err != nil {
		return Home{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	hk := HomeKey(channel, conv)
	cur, rev, ok, err := f.home(ctx, hk)
	if err != nil {
		return Home{}, err
	}
	h := Home{Box: box, At: f.clk.Now().UTC()}
	if !ok {
		raw, _ := json.Marshal(h)
		if _, err := f.homes.Create(ctx, hk, raw); err != nil {
			return Home{}, fmt.Errorf("home of %s: %w", hk, err)
		}
		return h, nil
	}
	if cur.Moving {
		return Home{}, fmt.Errorf("%s %s is being moved; try again when the move ends", channel, conv)
	}
	info, err := f.stream.Info(ctx)
	if err != nil {
		return Home{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	h.Since, h.From = info.State.LastSeq+1, cur.Box
	raw, _ := json.Marshal(h)
	if _, err := f.homes.Update(ctx, hk, raw, rev); err != nil {
		return Home{}, fmt.Errorf("home of %s (changed meanwhile?): %w", hk, err)
	}
	return h, nil
}

// HomeEntry is one conversation's home, for Status.
type HomeEntry struct {
	Channel string `json:"channel"`
	Conv    string `json:"conv"`
	Home
}

// View is the fleet as one box sees it.
type View struct {
	Box       string      `json:"box"`
	Connected bool        `json:"connected"`
	Boxes     []Beat      `json:"boxes"`
	Homes     []HomeEntry `json:"homes"`
	More      bool        `json:"more,omitempty"` // homes left out (over maxHomes)
}

const maxHomes = 1000

// Status lists the boxes (by their heartbeats) and the homes.
func (f *Fleet) Status(ctx context.Context) (View, error) {
	v := View{Box: f.cfg.Box}
	if err := f.ensure(ctx); err != nil {
		return v, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	v.Connected = f.Connected()
	keys, err := f.boxes.Keys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return v, err
	}
	for _, k := range keys {
		e, err := f.boxes.Get(ctx, k)
		if err != nil {
			continue
		}
		var b Beat
		if json.Unmarshal(e.Value(), &b) == nil {
			v.Boxes = append(v.Boxes, b)
		}
	}
	slices.SortFunc(v.Boxes, func(a, b Beat) int { return strings.Compare(a.Box, b.Box) })
	lister, err := f.homes.ListKeys(ctx)
	if err != nil {
		return v, err
	}
	defer lister.Stop()
	for k := range lister.Keys() {
		if len(v.Homes) >= maxHomes {
			v.More = true
			break
		}
		ch, conv, err := ParseHomeKey(k)
		if err != nil {
			continue
		}
		h, _, ok, err := f.home(ctx, k)
		if err != nil || !ok {
			continue
		}
		v.Homes = append(v.Homes, HomeEntry{Channel: ch, Conv: conv, Home: h})
	}
	slices.SortFunc(v.Homes, func(a, b HomeEntry) int { return strings.Compare(a.Conv, b.Conv) })
	return v, nil
}
