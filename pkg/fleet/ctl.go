package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
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
	Files   string `json:"files,omitempty"`  // import: the files' object ("": none)
	Undo    bool   `json:"undo,omitempty"`   // purge: of an undone move's import (only what it brought)
}

type ctlReply struct {
	Object    string `json:"object,omitempty"`
	Bytes     int    `json:"bytes,omitempty"`
	Files     string `json:"files,omitempty"`
	FileBytes uint64 `json:"file_bytes,omitempty"`
	Error     string `json:"error,omitempty"`
}

// Timeouts of a move's steps.
const (
	settleTimeout = time.Minute     // the old box reads up to the switch
	drainTimeout  = 3 * time.Minute // its turns of the conversation finish
	ctlTimeout    = drainTimeout + settleTimeout + time.Minute
)

// onCtl takes a request in the order NATS delivered it: the requests of
// one conversation run one after another in that order (the purge of an
// undone move after the import it undoes), others in parallel.
func (f *Fleet) onCtl(ctx context.Context, m *nats.Msg) {
	var req ctlRequest
	json.Unmarshal(m.Data, &req)
	key := HomeKey(req.Channel, req.Conv)
	done := make(chan struct{})
	f.ctlMu.Lock()
	prev := f.ctlTail[key]
	f.ctlTail[key] = done
	f.ctlMu.Unlock()
	go func() {
		defer func() {
			close(done)
			f.ctlMu.Lock()
			if f.ctlTail[key] == done {
				delete(f.ctlTail, key)
			}
			f.ctlMu.Unlock()
		}()
		if prev != nil {
			<-prev
		}
		f.serveCtl(ctx, m)
	}()
}

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
		rep := ctlReply{Object: name, Bytes: len(snap)}
		if lf, ok := local.(LocalFiles); ok {
			rep.Files = name + ".files"
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(lf.ExportFiles(ctx, req.Channel, req.Conv, pw)) }()
			info, err := f.moves.Put(ctx, jetstream.ObjectMeta{Name: rep.Files}, pr)
			pr.CloseWithError(errors.New("the object store stopped reading")) // ends the writer if Put did not read to the end
			if err != nil {
				f.moves.Delete(context.WithoutCancel(ctx), name)
				return ctlReply{}, fmt.Errorf("store the files: %w", err)
			}
			rep.FileBytes = info.Size
		}
		return rep, nil
	case "import":
		hk := HomeKey(req.Channel, req.Conv)
		if lm, ok := local.(LocalMoves); ok {
			holds, err := lm.Holds(ctx, req.Channel, req.Conv)
			if err != nil {
				return ctlReply{}, err
			}
			f.ctlMu.Lock()
			if _, again := f.fresh[hk]; !again || holds {
				f.fresh[hk] = !holds // an import tried again keeps the first answer
			}
			f.ctlMu.Unlock()
		}
		snap, err := f.moves.GetBytes(ctx, req.Object)
		if err != nil {
			return ctlReply{}, fmt.Errorf("read the snapshot %s: %w", req.Object, err)
		}
		if err := local.Import(ctx, req.Channel, req.Conv, snap); err != nil {
			return ctlReply{}, err
		}
		if lf, ok := local.(LocalFiles); ok && req.Files != "" {
			obj, err := f.moves.Get(ctx, req.Files)
			if err != nil {
				return ctlReply{}, fmt.Errorf("read the files %s: %w", req.Files, err)
			}
			err = lf.ImportFiles(ctx, req.Channel, req.Conv, obj)
			obj.Close()
			if err != nil {
				return ctlReply{}, err
			}
		}
		return ctlReply{Bytes: len(snap)}, nil
	case "purge":
		hk := HomeKey(req.Channel, req.Conv)
		f.ctlMu.Lock()
		fresh := f.fresh[hk]
		delete(f.fresh, hk)
		f.ctlMu.Unlock()
		if _, tells := local.(LocalMoves); !tells {
			fresh = true // a box that cannot say what it held: the import's copy goes
		}
		if req.Undo && !fresh {
			// This box held the conversation before the move (or cannot
			// tell: it restarted since): what the import merged stays,
			// and nothing that was here is lost.
			f.log.Warn("fleet: an undone move's copy kept: this box held the conversation before", "conversation", hk)
			return ctlReply{}, nil
		}
		return ctlReply{}, local.Purge(ctx, req.Channel, req.Conv)
	case "release":
		f.ctlMu.Lock()
		delete(f.fresh, HomeKey(req.Channel, req.Conv))
		f.ctlMu.Unlock()
		if lm, ok := local.(LocalMoves); ok {
			return ctlReply{}, lm.Release(ctx, req.Channel, req.Conv)
		}
		return ctlReply{}, nil
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
	Files    uint64 // the size of the files' stream
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
	if cur.Moving || cur.Switching != "" {
		return MoveResult{}, fmt.Errorf("%s %s is being moved or rehomed already (agentctl fleet home repairs an interrupted one after %s)", channel, conv, staleAfter)
	}
	if cur.Box == to {
		return MoveResult{From: to, To: to}, nil
	}
	if err := f.alive(ctx, cur.Box); err != nil {
		return MoveResult{}, fmt.Errorf("the conversation's box: %w", err)
	}
	var last uint64
	next := func(l uint64) Home {
		last = l
		return Home{Box: to, Since: l + 1, From: cur.Box, Moving: true}
	}
	rev2, err := f.switchHome(ctx, hk, cur, rev, to, next)
	if err != nil {
		return MoveResult{}, err
	}
	moving := next(last)
	res := MoveResult{From: cur.Box, To: to, Since: last + 1}
	imported, exported := false, false
	// While it works, the entry's time is refreshed: a box that finds it
	// older than staleAfter takes the coordinator for dead and undoes it.
	var revMu sync.Mutex
	stopAlive := make(chan struct{})
	aliveDone := make(chan struct{})
	go func() {
		defer close(aliveDone)
		for {
			select {
			case <-stopAlive:
				return
			case <-f.clk.After(keepAlive):
			}
			revMu.Lock()
			m := moving
			m.At = f.clk.Now().UTC()
			raw, _ := json.Marshal(m)
			if r, err := f.homes.Update(context.WithoutCancel(ctx), hk, raw, rev2); err == nil {
				rev2 = r
			}
			revMu.Unlock()
		}
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			close(stopAlive)
			<-aliveDone
		}
	}
	defer stop()
	req := ctlRequest{Channel: channel, Conv: conv, Upto: last}
	undo := func(cause error) (MoveResult, error) {
		stop()
		if imported {
			// The import may have happened (a lost reply): the new box
			// must not keep a copy of what stays on the old one (unless
			// it held the conversation before: it keeps what it had).
			if _, err := f.request(context.WithoutCancel(ctx), to, "purge", ctlRequest{Channel: channel, Conv: conv, Undo: true}); err != nil {
				f.log.Warn("fleet: a box may keep a copy after an undone move", "conversation", hk, "box", to, "err", err)
			}
		}
		if exported {
			// The old box held the conversation's jobs at its export:
			// they run there again.
			if _, err := f.request(context.WithoutCancel(ctx), cur.Box, "release", ctlRequest{Channel: channel, Conv: conv}); err != nil {
				f.log.Warn("fleet: an undone move's jobs stay held on the old box until its heartbeat releases them", "conversation", hk, "box", cur.Box, "err", err)
			}
		}
		for _, o := range []string{req.Object, req.Files} {
			if o != "" {
				f.moves.Delete(context.WithoutCancel(ctx), o)
			}
		}
		old, _ := json.Marshal(cur)
		if _, err := f.homes.Update(context.WithoutCancel(ctx), hk, old, rev2); err != nil {
			return res, fmt.Errorf("%w; and putting the old home back failed: %v (agentctl fleet home %s %s)", cause, err, conv, cur.Box)
		}
		return res, fmt.Errorf("move of %s to %s undone: %w", conv, to, cause)
	}
	exported = true // it may have held the jobs, even if its reply is lost
	exp, err := f.request(ctx, cur.Box, "export", req)
	if err != nil {
		return undo(err)
	}
	res.Bytes, res.Files = exp.Bytes, exp.FileBytes
	req.Object, req.Files = exp.Object, exp.Files
	imported = true
	if _, err := f.request(ctx, to, "import", req); err != nil {
		return undo(err)
	}
	stop()
	moving.Moving = false
	moving.At = f.clk.Now().UTC()
	raw, _ := json.Marshal(moving)
	if _, err := f.homes.Update(context.WithoutCancel(ctx), hk, raw, rev2); err != nil {
		return undo(fmt.Errorf("commit the home: %w", err))
	}
	// Committed: the new box's jobs run from now, and the old box's
	// copy goes (in that order: a slot in between fires once, on the new
	// box; the old box held its jobs at the export).
	if _, err := f.request(context.WithoutCancel(ctx), to, "release", req); err != nil {
		f.log.Warn("fleet: the moved conversation's jobs stay held on the new box until its heartbeat releases them", "conversation", hk, "box", to, "err", err)
	}
	if _, err := f.request(context.WithoutCancel(ctx), cur.Box, "purge", req); err != nil {
		res.PurgeErr = err.Error()
		f.log.Warn("fleet: the old box kept its copy of a moved conversation", "conversation", hk, "box", cur.Box, "err", err)
	}
	f.moves.Delete(context.WithoutCancel(ctx), exp.Object)
	if exp.Files != "" {
		f.moves.Delete(context.WithoutCancel(ctx), exp.Files)
	}
	res.Took = f.clk.Now().Sub(start)
	f.log.Info("fleet: conversation moved", "conversation", hk, "from", cur.Box, "to", to, "since", res.Since, "bytes", res.Bytes, "took", res.Took)
	return res, nil
}

// staleAfter is when an entry left Switching or Moving (its coordinator
// died) counts as abandoned: a box it holds undoes it, agentctl fleet home
// may replace it. A move's coordinator refreshes the entry every
// keepAlive while it works.
const (
	staleAfter = time.Minute
	keepAlive  = 15 * time.Second
)

// repairStale undoes an abandoned switch or move of hk: a switch never
// took effect (the entry without Switching), a move never committed (the
// old box, which still holds the data, again). Compare-and-set: a live
// coordinator's refresh wins.
func (f *Fleet) repairStale(ctx context.Context, hk string) {
	h, rev, ok, err := f.home(ctx, hk)
	if err != nil || !ok || (h.Switching == "" && !h.Moving) || f.clk.Now().Sub(h.At) <= staleAfter {
		return
	}
	fix := h
	fix.Switching = ""
	if h.Moving {
		fix = Home{Box: h.From}
	}
	fix.At = f.clk.Now().UTC()
	raw, _ := json.Marshal(fix)
	if _, err := f.homes.Update(ctx, hk, raw, rev); err == nil {
		f.log.Warn("fleet: an abandoned move or rehoming undone", "conversation", hk, "was", h, "now", fix)
	}
}

// settledUpTo reports whether box's consumer has settled every stream
// message up to seq.
func (f *Fleet) settledUpTo(ctx context.Context, box string, seq uint64) (bool, error) {
	if box == f.cfg.Box && f.lastSeq.Load() >= seq {
		return true, nil
	}
	c, err := f.js.Consumer(ctx, StreamName, "box_"+box)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		if f.betweenReads != nil {
			f.betweenReads()
		}
		if _, err := f.boxes.Get(ctx, box); err != nil {
			return false, nil // never started yet: it will read them
		}
		// A box creates its consumer before its first heartbeat, so one
		// that started between the two reads has its consumer now (read
		// again: its messages are not given up under it).
		c, err = f.js.Consumer(ctx, StreamName, "box_"+box)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			// A box that ran and has no consumer was retired (nats
			// consumer rm AGENT_INBOX box_NAME): what it never read is
			// given up.
			f.log.Warn("fleet: a retired box's unread messages are given up", "box", box, "up_to", seq)
			return true, nil
		}
	}
	if err != nil {
		return false, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return false, err
	}
	return info.AckFloor.Stream >= seq, nil
}

// switchHome changes a conversation's home from cur (at revision rev) to
// what next makes of the stream's last sequence. First the entry says
// Switching (every box that may answer holds the conversation's messages
// it has not settled), then the last sequence is read, then the new entry
// is written: a message stored before the read belongs to the old home,
// one after it to the new, and no box can have taken one under the other
// entry. It returns the new revision.
func (f *Fleet) switchHome(ctx context.Context, hk string, cur Home, rev uint64, to string, next func(last uint64) Home) (uint64, error) {
	// The box that answered before cur.Since must have finished: the new
	// entry will not remember it.
	if cur.From != "" && cur.Since > 0 {
		ok, err := f.settledUpTo(ctx, cur.From, cur.Since-1)
		if err != nil {
			return 0, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		if !ok {
			return 0, fmt.Errorf("box %s has not yet taken this conversation's messages up to #%d (is it down?); try again when it has, or retire the box (nats consumer rm %s box_%s) to give them up", cur.From, cur.Since-1, StreamName, cur.From)
		}
	}
	hold := cur
	hold.Switching, hold.At = to, f.clk.Now().UTC()
	raw, _ := json.Marshal(hold)
	rev1, err := f.homes.Update(ctx, hk, raw, rev)
	if err != nil {
		return 0, fmt.Errorf("switch the home of %s (changed meanwhile?): %w", hk, err)
	}
	restore := func(cause error) (uint64, error) {
		old, _ := json.Marshal(cur)
		if _, err := f.homes.Update(context.WithoutCancel(ctx), hk, old, rev1); err != nil {
			return 0, fmt.Errorf("%w; and putting the old home back failed: %v", cause, err)
		}
		return 0, cause
	}
	info, err := f.stream.Info(ctx)
	if err != nil {
		return restore(fmt.Errorf("%w: %v", ErrUnavailable, err))
	}
	n := next(info.State.LastSeq)
	n.At = f.clk.Now().UTC()
	raw, _ = json.Marshal(n)
	rev2, err := f.homes.Update(ctx, hk, raw, rev1)
	if err != nil {
		return restore(fmt.Errorf("switch the home of %s: %w", hk, err))
	}
	return rev2, nil
}

// knownBox checks that box has ever heartbeated into the fleet.
func (f *Fleet) knownBox(ctx context.Context, box string) error {
	_, err := f.boxes.Get(ctx, box)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("no box %s in the fleet (never seen; agentctl fleet status lists them)", box)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
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
	if err := f.knownBox(ctx, box); err != nil {
		return Home{}, err
	}
	hk := HomeKey(channel, conv)
	cur, rev, ok, err := f.home(ctx, hk)
	if errors.Is(err, errBadHome) {
		ok, err = false, nil // replaced below
	}
	if err != nil {
		return Home{}, err
	}
	h := Home{Box: box, At: f.clk.Now().UTC()}
	if !ok {
		raw, _ := json.Marshal(h)
		if rev == 0 {
			_, err = f.homes.Create(ctx, hk, raw)
		} else {
			_, err = f.homes.Update(ctx, hk, raw, rev) // a bad entry
		}
		if err != nil {
			return Home{}, fmt.Errorf("home of %s: %w", hk, err)
		}
		return h, nil
	}
	if cur.Moving || cur.Switching != "" {
		if f.clk.Now().Sub(cur.At) <= staleAfter {
			return Home{}, fmt.Errorf("%s %s is being moved or rehomed; try again when that ends", channel, conv)
		}
		// Its coordinator died. A stale switch never took effect: the
		// entry without it, then the switch asked for now. A stale move
		// keeps its split point: what came before stays the old box's,
		// what came after is box's.
		f.log.Warn("fleet: repairing an interrupted move or rehoming", "conversation", hk, "entry", cur)
		fix := cur
		fix.Switching, fix.Moving, fix.At = "", false, f.clk.Now().UTC()
		if cur.Moving {
			fix.Box = box
			if box == cur.From {
				fix = Home{Box: box, At: fix.At}
			}
		}
		raw, _ := json.Marshal(fix)
		r, err := f.homes.Update(ctx, hk, raw, rev)
		if err != nil {
			return Home{}, fmt.Errorf("home of %s: %w", hk, err)
		}
		if cur.Moving {
			return fix, nil
		}
		cur, rev = fix, r
	}
	if cur.Box == box {
		return cur, nil
	}
	var out Home
	_, err = f.switchHome(ctx, hk, cur, rev, box, func(last uint64) Home {
		out = Home{Box: box, Since: last + 1, From: cur.Box}
		return out
	})
	if err != nil {
		return Home{}, err
	}
	return out, nil
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

// boxKeys lists the boxes that have written a heartbeat, from the subjects
// of the bucket's stream: one request. A KV key listing is a watcher whose
// end-of-initial-values marker can come early while keys are rewritten under
// it (boxes beating during the listing), and a box would be missing from
// the view.
func (f *Fleet) boxKeys(ctx context.Context) ([]string, error) {
	st, err := f.js.Stream(ctx, "KV_"+BoxesBucket)
	if err != nil {
		return nil, err
	}
	prefix := "$KV." + BoxesBucket + "."
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		keys = append(keys, strings.TrimPrefix(subj, prefix))
	}
	return keys, nil
}

// Status lists the boxes (by their heartbeats) and the homes.
func (f *Fleet) Status(ctx context.Context) (View, error) {
	v := View{Box: f.cfg.Box}
	if err := f.ensure(ctx); err != nil {
		return v, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	v.Connected = f.Connected()
	keys, err := f.boxKeys(ctx)
	if err != nil {
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
