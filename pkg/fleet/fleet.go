// Package fleet joins the boxes of one office over NATS JetStream, so that
// one WeCom app (one callback URL) serves users whose memory lives on
// different boxes.
//
// The box that receives a WeCom message (the ingress) persists it to the
// stream AGENT_INBOX, on the subject of its conversation
// (agent.inbox.<channel>.<conversation>), with the message's own key as
// JetStream's Nats-Msg-Id (a WeCom retry within the stream's duplicate
// window is dropped by the server), and only then acknowledges WeCom.
//
// Each conversation (a user, or a group chat) is homed on one box in the KV
// bucket agent_homes. Every box reads the whole stream in order with its
// own durable consumer, one message at a time (MaxAckPending 1), and takes
// the messages of the conversations homed on it into its local inbox;
// it acknowledges a message only after the local commit (the local inbox
// drops a redelivered one by the same key): exactly once into the inbox,
// in order. A box that was down finds its messages waiting.
//
// Ownership is by stream sequence: a home entry says which box answers
// from which sequence on (Since) and which box answered before (From), so
// moving a conversation is a point in its subject's sequence and no
// message can slip between the two boxes. While a move is in progress
// (Moving) both boxes hold the conversation's newer messages; the old box
// finishes the older ones, snapshots the memory and sessions into the
// object store agent_moves, the new box restores them, and the entry's
// Moving flag clears (the commit point; on failure the old entry is put
// back).
//
// Boxes heartbeat into the KV bucket agent_boxes. Boxes talk to each other
// by NATS request/reply on agent.ctl.<box>.<op>. Whoever holds credentials
// of the fleet's NATS account is inside the fleet: the account must be the
// fleet's alone.
package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"agent/pkg/clock"
)

// Names in the fleet's NATS account.
const (
	StreamName   = "AGENT_INBOX"
	SubjectRoot  = "agent.inbox"
	HomesBucket  = "agent_homes"
	BoxesBucket  = "agent_boxes"
	MovesBucket  = "agent_moves"
	ctlRoot      = "agent.ctl"
	headerIngres = "Agent-Ingress"
	headerHome   = "Agent-Home" // the home the ingress gives a conversation seen first
	// headerVia names the channel that takes a message on its home box
	// when it is not the conversation's own (the AI Bot's messages of a
	// WeCom user: the user's home and order are the app's).
	headerVia = "Agent-Via"
)

// Defaults of Config.
const (
	DefaultMaxAge    = 7 * 24 * time.Hour
	DefaultDedup     = 30 * time.Minute
	DefaultHeartbeat = 10 * time.Second
	DefaultAckWait   = 30 * time.Second
)

// ErrUnavailable means the fleet's NATS is not reachable (or not set up
// yet): the ingress refuses rather than acknowledge what it cannot persist.
var ErrUnavailable = errors.New("fleet: NATS JetStream is not reachable")

// ErrBadName is returned for a box or conversation name the fleet cannot
// carry.
var ErrBadName = errors.New("fleet: invalid name")

// Config configures a box's fleet link.
type Config struct {
	URL         string // NATS server URLs, comma-separated
	Box         string // this box's name
	Ingress     bool   // this box takes WeCom's callbacks for the fleet
	DefaultHome string // box of conversations seen first ("": the ingress box)
	Replicas    int    // stream and bucket replicas (1; 3 on a 3-node cluster)
	Version     string // heartbeat: this binary's version
	Options     []nats.Option
	MaxAge      time.Duration // how long the stream keeps a message (DefaultMaxAge)
	Dedup       time.Duration // JetStream's duplicate window (DefaultDedup)
	Heartbeat   time.Duration // DefaultHeartbeat
	AckWait     time.Duration // DefaultAckWait
	Logger      *slog.Logger
	Clock       clock.Clock
}

// Handler takes a message of its channel from conversation conv (as its
// subject says: the handler checks that the payload agrees) into the
// box's local inbox. It must be idempotent (the payload carries its own key): a message is
// redelivered when the box stopped before acknowledging it.
type Handler func(ctx context.Context, conv string, payload []byte) error

// Local is what a box offers the fleet: its part of a move and its
// heartbeat.
type Local interface {
	// Drained reports whether the conversation has nothing pending in
	// the local inbox (no turn waiting or running).
	Drained(ctx context.Context, channel, conv string) (bool, error)
	// Export snapshots the conversation's memory and sessions.
	Export(ctx context.Context, channel, conv string) ([]byte, error)
	// Import restores a snapshot.
	Import(ctx context.Context, channel, conv string, snap []byte) error
	// Purge deletes the conversation's memory and sessions.
	Purge(ctx context.Context, channel, conv string) error
	// Beat is the box's state for its heartbeat.
	Beat(ctx context.Context) Beat
}

// LocalMoves is what a box may also offer a move beyond its snapshot.
type LocalMoves interface {
	// Holds reports whether the box holds anything of the conversation
	// (an undone move deletes what it imported only when the box held
	// nothing before).
	Holds(ctx context.Context, channel, conv string) (bool, error)
	// Release lets what the export held (scheduled jobs) run again: on
	// the new box when the move commits, on the old one when it is
	// undone.
	Release(ctx context.Context, channel, conv string) error
	// Held are the conversations with something held by a move
	// (released by the heartbeat once the move has ended here, should
	// its coordinator have died before it released them).
	Held(ctx context.Context) ([]Conversation, error)
}

// Conversation names a conversation of a channel.
type Conversation struct{ Channel, Conv string }

// LocalFiles is what a box may also offer a move: the conversation's
// files, streamed (they may be far larger than its memory). A snapshot's
// files go through the object store beside it.
type LocalFiles interface {
	// ExportFiles writes the conversation's files to w.
	ExportFiles(ctx context.Context, channel, conv string, w io.Writer) error
	// ImportFiles restores what ExportFiles wrote.
	ImportFiles(ctx context.Context, channel, conv string, r io.Reader) error
}

// Home is a conversation's entry in agent_homes.
type Home struct {
	Box    string `json:"box"`
	Since  uint64 `json:"since,omitempty"` // stream sequence from which Box answers
	From   string `json:"from,omitempty"`  // the box that answers before Since
	Moving bool   `json:"moving,omitempty"`
	// Switching names the box a change of home is being prepared for:
	// until the entry changes again, the conversation's messages not yet
	// settled wait (every box that may answer them holds them).
	Switching string    `json:"switching,omitempty"`
	At        time.Time `json:"at"`
}

// involves reports whether box may answer a message of the conversation
// while its entry is being switched or moved (otherwise it can pass it by).
func (h Home) involves(box string) bool {
	return box == h.Box || box == h.From || box == h.Switching
}

// Owner is the box that answers the message at stream sequence seq.
func (h Home) Owner(seq uint64) string {
	if seq < h.Since && h.From != "" {
		return h.From
	}
	return h.Box
}

// Beat is a box's heartbeat in agent_boxes.
type Beat struct {
	Box        string    `json:"box"`
	Version    string    `json:"version"`
	Healthy    bool      `json:"healthy"`
	Ingress    bool      `json:"ingress"`
	RSSBytes   int64     `json:"rss_bytes"`
	QueueDepth int       `json:"queue_depth"` // local inbox messages waiting
	Lag        uint64    `json:"lag"`         // stream messages this box has not read
	At         time.Time `json:"at"`
}

// Fleet is a box's link to the fleet.
type Fleet struct {
	cfg    Config
	log    *slog.Logger
	clk    clock.Clock
	nc     *nats.Conn
	js     jetstream.JetStream
	ready  atomic.Bool
	setup  sync.Mutex // serialises ensure
	homes  jetstream.KeyValue
	boxes  jetstream.KeyValue
	moves  jetstream.ObjectStore
	stream jetstream.Stream

	mu       sync.Mutex
	handlers map[string]Handler
	local    Local
	known    map[string]bool // home keys known to exist
	cons     jetstream.Consumer

	ctlMu   sync.Mutex
	ctlTail map[string]chan struct{} // home key -> the last request of it taken (ctl.go)
	fresh   map[string]bool          // home key -> imported here by a move in progress onto a box that held nothing of it

	lastSeq   atomic.Uint64 // the last stream sequence this box settled
	lag       atomic.Uint64
	consuming atomic.Bool // the durable consumer is set up and read

	holdMu    sync.Mutex
	holding   string    // the conversation whose message the consumer waits on
	holdWhy   string    // why it waits
	holdSince time.Time // since when

	betweenReads func() // tests: runs between settledUpTo's consumer and heartbeat reads
}

// Why a box's queue waits on a message (Holding).
const (
	HoldMoving    = "moving"     // the conversation is being moved or rehomed
	HoldNoChannel = "no_channel" // its channel does not run on this box
)

// hold records that the consumer waits on a message of hk, and why ("":
// it does not).
func (f *Fleet) hold(hk, why string) {
	f.holdMu.Lock()
	defer f.holdMu.Unlock()
	if hk == f.holding && why == f.holdWhy {
		return
	}
	f.holding, f.holdWhy = hk, why
	f.holdSince = f.clk.Now()
}

// Holding is the conversation whose message this box's queue waits on,
// why (HoldMoving, HoldNoChannel) and since when; "" when it waits on
// none.
func (f *Fleet) Holding() (hk, why string, since time.Time) {
	f.holdMu.Lock()
	defer f.holdMu.Unlock()
	return f.holding, f.holdWhy, f.holdSince
}

// New connects to NATS (in the background while it is down: the box
// starts anyway, and the ingress refuses until it is up).
func New(cfg Config) (*Fleet, error) {
	if !ValidBox(cfg.Box) {
		return nil, fmt.Errorf("%w: box %q (letters, digits, _ and -, at most 32)", ErrBadName, cfg.Box)
	}
	if cfg.DefaultHome != "" && !ValidBox(cfg.DefaultHome) {
		return nil, fmt.Errorf("%w: default home %q", ErrBadName, cfg.DefaultHome)
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.Dedup <= 0 {
		cfg.Dedup = DefaultDedup
	}
	cfg.Dedup = min(cfg.Dedup, cfg.MaxAge)
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = DefaultAckWait
	}
	f := &Fleet{cfg: cfg, log: cfg.Logger, clk: clock.Or(cfg.Clock), handlers: map[string]Handler{}, known: map[string]bool{}, ctlTail: map[string]chan struct{}{}, fresh: map[string]bool{}}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	opts := append([]nats.Option{
		nats.Name("agent " + cfg.Box),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				f.log.Warn("fleet: NATS disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { f.log.Info("fleet: NATS reconnected", "server", c.ConnectedUrlRedacted()) }),
	}, cfg.Options...)
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		// nats.go's errors quote the URL it could not parse.
		return nil, fmt.Errorf("fleet: connect %s: %s", redactURL(cfg.URL), scrubURLs(err.Error(), cfg.URL))
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(5*time.Second))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("fleet: %w", err)
	}
	f.nc, f.js = nc, js
	return f, nil
}

// Auth is how a box logs in to the fleet's NATS: a .creds file or a
// token, and for tls:// servers the CA to trust and a client certificate
// (all optional).
type Auth struct {
	CredentialsFile, Token             string
	TLSCAFile, TLSCertFile, TLSKeyFile string
}

// Options are a's nats.go options (the daemon's and doctor's).
func (a Auth) Options() []nats.Option {
	var opts []nats.Option
	if a.CredentialsFile != "" {
		opts = append(opts, nats.UserCredentials(a.CredentialsFile))
	}
	if a.Token != "" {
		opts = append(opts, nats.Token(a.Token))
	}
	if a.TLSCAFile != "" {
		opts = append(opts, nats.RootCAs(a.TLSCAFile))
	}
	if a.TLSCertFile != "" {
		opts = append(opts, nats.ClientCert(a.TLSCertFile, a.TLSKeyFile))
	}
	return opts
}

// Box is this box's name.
func (f *Fleet) Box() string { return f.cfg.Box }

// Ingress reports whether this box takes WeCom's callbacks for the fleet.
func (f *Fleet) Ingress() bool { return f.cfg.Ingress }

// Connected reports whether NATS is connected and the fleet's stream and
// buckets are set up.
func (f *Fleet) Connected() bool { return f.ready.Load() && f.nc.IsConnected() }

// Consuming reports whether this box reads its messages (its durable
// consumer is set up): false while NATS is down, or when the server
// refuses the consumer.
func (f *Fleet) Consuming() bool { return f.consuming.Load() && f.Connected() }

// Lag is how many stream messages this box has not read yet (as of the
// last heartbeat).
func (f *Fleet) Lag() uint64 { return f.lag.Load() }

// Close disconnects.
func (f *Fleet) Close() { f.nc.Close() }

// Handle registers the delivery of a channel's messages into this box's
// inbox, before Run: a message for this box of a channel without a
// handler waits (logged).
func (f *Fleet) Handle(channel string, h Handler) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers[channel] = h
}

func (f *Fleet) handler(channel string) Handler {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.handlers[channel]
}

// ensure creates (or updates) the stream and the buckets.
func (f *Fleet) ensure(ctx context.Context) error {
	f.setup.Lock()
	defer f.setup.Unlock()
	if f.ready.Load() {
		return nil
	}
	// Looked up first and created only when missing, never updated: on
	// a cluster, an update racing another box's creation of the same
	// stream stalls for many seconds (and the settings are the fleet's,
	// the same on every box).
	st, err := lookupOrCreate(ctx, func(ctx context.Context) (jetstream.Stream, error) { return f.js.Stream(ctx, StreamName) },
		func(ctx context.Context) (jetstream.Stream, error) {
			return f.js.CreateStream(ctx, jetstream.StreamConfig{
				Name:        StreamName,
				Description: "agent fleet: WeCom messages by conversation",
				Subjects:    []string{SubjectRoot + ".>"},
				Retention:   jetstream.LimitsPolicy,
				Storage:     jetstream.FileStorage,
				Replicas:    f.cfg.Replicas,
				MaxAge:      f.cfg.MaxAge,
				Duplicates:  f.cfg.Dedup,
			})
		})
	if err != nil {
		return fmt.Errorf("fleet: stream %s: %w", StreamName, err)
	}
	kv := func(bucket, desc string, history uint8) (jetstream.KeyValue, error) {
		return lookupOrCreate(ctx, func(ctx context.Context) (jetstream.KeyValue, error) { return f.js.KeyValue(ctx, bucket) },
			func(ctx context.Context) (jetstream.KeyValue, error) {
				return f.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Description: desc,
					History: history, Storage: jetstream.FileStorage, Replicas: f.cfg.Replicas})
			})
	}
	homes, err := kv(HomesBucket, "agent fleet: conversation -> box", 5)
	if err != nil {
		return fmt.Errorf("fleet: bucket %s: %w", HomesBucket, err)
	}
	boxes, err := kv(BoxesBucket, "agent fleet: heartbeats", 1)
	if err != nil {
		return fmt.Errorf("fleet: bucket %s: %w", BoxesBucket, err)
	}
	moves, err := lookupOrCreate(ctx, func(ctx context.Context) (jetstream.ObjectStore, error) { return f.js.ObjectStore(ctx, MovesBucket) },
		func(ctx context.Context) (jetstream.ObjectStore, error) {
			return f.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: MovesBucket, Description: "agent fleet: snapshots of moving conversations",
				Storage: jetstream.FileStorage, Replicas: f.cfg.Replicas, TTL: 24 * time.Hour})
		})
	if err != nil {
		return fmt.Errorf("fleet: object store %s: %w", MovesBucket, err)
	}
	f.stream, f.homes, f.boxes, f.moves = st, homes, boxes, moves
	f.ready.Store(true)
	return nil
}

// lookupOrCreate returns what lookup finds, or what create makes; when
// another box created it meanwhile, what lookup then finds.
func lookupOrCreate[T any](ctx context.Context, lookup, create func(context.Context) (T, error)) (T, error) {
	v, err := lookup(ctx)
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return v, err
	}
	if v, err = create(ctx); err == nil {
		return v, nil
	}
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) || errors.Is(err, jetstream.ErrBucketExists) {
		return lookup(ctx)
	}
	return v, err
}

// Publish persists a message of channel from conversation conv (the
// ingress's part) under key, its identity within the channel. It reports
// whether the message was new (not a duplicate within the window). It
// returns ErrUnavailable (wrapped) when it cannot persist.
func (f *Fleet) Publish(ctx context.Context, channel, conv, key string, payload []byte) (bool, error) {
	return f.PublishVia(ctx, channel, channel, conv, key, payload)
}

// PublishVia is Publish for a message of conversation conv of channel
// (its home and its order are channel's) that channel via takes into the
// home box's inbox (the handler registered for via); key is its identity
// within via.
func (f *Fleet) PublishVia(ctx context.Context, via, channel, conv, key string, payload []byte) (bool, error) {
	if !ValidBox(via) {
		return false, fmt.Errorf("%w: channel %q", ErrBadName, via)
	}
	// Run sets the fleet up (and again after NATS comes back); a callback
	// waits for that no longer than its own deadline.
	for !f.ready.Load() {
		if !sleep(ctx, f.clk, 20*time.Millisecond) {
			return false, fmt.Errorf("%w: not set up yet", ErrUnavailable)
		}
	}
	subj, err := Subject(channel, conv)
	if err != nil {
		return false, err
	}
	hk := HomeKey(channel, conv)
	if err := f.ensureHome(ctx, hk); err != nil {
		return false, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	msg := nats.NewMsg(subj)
	msg.Data = payload
	msg.Header.Set(headerIngres, f.cfg.Box)
	msg.Header.Set(headerHome, f.defaultHome())
	if via != channel {
		msg.Header.Set(headerVia, via)
	}
	ack, err := f.js.PublishMsg(ctx, msg, jetstream.WithMsgID(via+":"+key), jetstream.WithExpectStream(StreamName))
	if err != nil {
		return false, fmt.Errorf("%w: publish: %v", ErrUnavailable, err)
	}
	return !ack.Duplicate, nil
}

// ensureHome gives a conversation seen for the first time its home.
func (f *Fleet) ensureHome(ctx context.Context, hk string) error {
	f.mu.Lock()
	known := f.known[hk]
	f.mu.Unlock()
	if known {
		return nil
	}
	b, _ := json.Marshal(Home{Box: f.defaultHome(), At: f.clk.Now().UTC()})
	if _, err := f.homes.Create(ctx, hk, b); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("home of %s: %w", hk, err)
	}
	f.mu.Lock()
	if len(f.known) > 100_000 {
		clear(f.known)
	}
	f.known[hk] = true
	f.mu.Unlock()
	return nil
}

// defaultHome is the home of a conversation seen first (the ingress's
// rule, which only the ingress's configuration sets).
func (f *Fleet) defaultHome() string {
	if f.cfg.DefaultHome != "" {
		return f.cfg.DefaultHome
	}
	return f.cfg.Box
}

// home reads a conversation's entry; ok is false when it has none.
func (f *Fleet) home(ctx context.Context, hk string) (Home, uint64, bool, error) {
	value, rev, found, err := f.readHome(ctx, hk)
	if err != nil || !found {
		return Home{}, 0, false, err
	}
	var h Home
	if err := json.Unmarshal(value, &h); err != nil || !ValidBox(h.Box) || (h.From != "" && !ValidBox(h.From)) ||
		(h.Switching != "" && !ValidBox(h.Switching)) {
		// Not the fleet's writing: as if there were none (the ingress's
		// rule), rather than hold the conversation (and the box) forever.
		return Home{}, rev, false, fmt.Errorf("%w: the home of %s is not valid (%.64q); agentctl fleet home sets it again", errBadHome, hk, value)
	}
	return h, rev, true, nil
}

// readHome reads hk's entry from the bucket stream's leader. A KV Get
// would be a direct get, which any replica of a replicated bucket may
// answer, and a replica that lags answers the entry before a switch: the
// box reading it would take a message the new home takes too. The
// leader has every committed change.
func (f *Fleet) readHome(ctx context.Context, hk string) (value []byte, rev uint64, found bool, err error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": "$KV." + HomesBucket + "." + hk})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := f.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+HomesBucket, req)
	if err != nil {
		return nil, 0, false, fmt.Errorf("home of %s: %w", hk, err)
	}
	var resp struct {
		Message *struct {
			Seq  uint64 `json:"seq"`
			Hdrs []byte `json:"hdrs"`
			Data []byte `json:"data"`
		} `json:"message"`
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, 0, false, fmt.Errorf("home of %s: %w", hk, err)
	}
	switch {
	case resp.Error != nil && resp.Error.Code == 404:
		return nil, 0, false, nil // no message (JSMessageNotFound), or no bucket yet
	case resp.Error != nil:
		return nil, 0, false, fmt.Errorf("home of %s: %s (%d)", hk, resp.Error.Description, resp.Error.ErrCode)
	case resp.Message == nil:
		return nil, 0, false, fmt.Errorf("home of %s: an empty answer", hk)
	}
	if len(resp.Message.Hdrs) > 0 {
		if h, err := nats.DecodeHeadersMsg(resp.Message.Hdrs); err == nil && h.Get("KV-Operation") != "" {
			return nil, 0, false, nil // deleted or purged
		}
	}
	return resp.Message.Data, resp.Message.Seq, true, nil
}

// Run sets the fleet up (retrying while NATS is down), answers the other
// boxes' requests, heartbeats and consumes this box's messages until ctx
// ends.
func (f *Fleet) Run(ctx context.Context, local Local) error {
	f.mu.Lock()
	f.local = local
	f.mu.Unlock()
	for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
		err := f.ensure(ctx)
		if err == nil {
			break
		}
		f.log.Warn("fleet: NATS JetStream not reachable; retrying", "err", err, "in", wait)
		if !sleep(ctx, f.clk, wait) {
			return nil
		}
	}
	sub, err := f.nc.Subscribe(ctlRoot+"."+f.cfg.Box+".*", func(m *nats.Msg) { f.onCtl(ctx, m) })
	if err != nil {
		return fmt.Errorf("fleet: control subscription: %w", err)
	}
	defer sub.Unsubscribe()
	// The consumer exists before the first heartbeat: a box with a
	// heartbeat and no consumer counts as retired (settledUpTo), and its
	// unread messages would be given up.
	for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
		_, err := f.js.CreateOrUpdateConsumer(ctx, StreamName, f.consumerConfig())
		if err == nil {
			break
		}
		f.log.Warn("fleet: consumer not set up; retrying", "err", err, "in", wait)
		if !sleep(ctx, f.clk, wait) {
			return nil
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.heartbeat(ctx)
	}()
	defer wg.Wait()
	for wait := time.Second; ctx.Err() == nil; wait = min(2*wait, 30*time.Second) {
		err := f.consume(ctx)
		if ctx.Err() != nil {
			return nil
		}
		f.log.Warn("fleet: consumer stopped; restarting", "err", err, "in", wait)
		if !sleep(ctx, f.clk, wait) {
			return nil
		}
	}
	return nil
}

// consumerName is this box's durable consumer.
func (f *Fleet) consumerName() string { return "box_" + f.cfg.Box }

func (f *Fleet) consumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       f.consumerName(),
		Description:   "agent fleet: box " + f.cfg.Box,
		FilterSubject: SubjectRoot + ".>",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       f.cfg.AckWait,
		MaxAckPending: 1, // in order: the next message only after this one is settled
		DeliverPolicy: jetstream.DeliverAllPolicy,
		// Replicas 0: the stream's (whatever replicas the box that
		// created it had).
	}
}

func (f *Fleet) consume(ctx context.Context) error {
	cons, err := f.js.CreateOrUpdateConsumer(ctx, StreamName, f.consumerConfig())
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	f.mu.Lock()
	f.cons = cons
	f.mu.Unlock()
	f.log.Debug("fleet: consuming", "consumer", f.consumerName())
	if info, err := cons.Info(ctx); err == nil {
		f.settled(info.AckFloor.Stream)
	}
	f.consuming.Store(true)
	defer f.consuming.Store(false)
	// Short pulls with heartbeats: after a NATS node is lost (or the
	// consumer's leader moved) the pull is renewed within seconds.
	it, err := cons.Messages(jetstream.PullMaxMessages(1), jetstream.PullExpiry(5*time.Second), jetstream.PullHeartbeat(time.Second))
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		msg, err := it.Next()
		if err != nil {
			return err
		}
		f.handle(ctx, msg)
	}
}

func (f *Fleet) settled(seq uint64) {
	for {
		cur := f.lastSeq.Load()
		if seq <= cur || f.lastSeq.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// handle settles one message: this box's is delivered into the local
// inbox and then acknowledged, another box's is acknowledged; a message of
// a conversation being moved waits for the move to end. Nothing is
// acknowledged before it is settled: on any failure the message stays
// and is tried again.
func (f *Fleet) handle(ctx context.Context, msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		f.log.Error("fleet: message without metadata dropped", "subject", msg.Subject(), "err", err)
		msg.Term()
		return
	}
	seq := meta.Sequence.Stream
	f.log.Debug("fleet: message", "seq", seq, "subject", msg.Subject())
	channel, conv, err := ParseSubject(msg.Subject())
	if err != nil {
		f.log.Error("fleet: message on a subject the fleet does not use dropped", "subject", msg.Subject(), "seq", seq)
		msg.Term()
		f.settled(seq)
		return
	}
	hk := HomeKey(channel, conv)
	var owner string
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		h, _, ok, err := f.home(ctx, hk)
		if errors.Is(err, errBadHome) {
			f.log.Error("fleet: routing by the ingress's rule", "err", err)
			ok, err = false, nil
		}
		switch {
		case err != nil:
			f.log.Warn("fleet: cannot read a home; retrying", "conversation", hk, "err", err)
		case !ok:
			// Homed by the ingress before it published; an entry deleted
			// by hand: the home the ingress chose, as its message says
			// (every box reads the same; its own default_home means
			// nothing here).
			owner = msg.Headers().Get(headerHome)
			if !ValidBox(owner) {
				owner = msg.Headers().Get(headerIngres)
			}
			if !ValidBox(owner) {
				f.log.Error("fleet: message of a conversation without a home and ingress dropped", "conversation", hk, "seq", seq)
				msg.Term()
				f.settled(seq)
				return
			}
		case (h.Switching != "" || (h.Moving && seq >= h.Since)) && !h.involves(f.cfg.Box):
			owner = h.Box // another box's, whatever comes of the switch
		case h.Switching != "", h.Moving && seq >= h.Since:
			wait = 100 * time.Millisecond // a switch takes moments, a move seconds: look often
			if f.clk.Now().Sub(h.At) > staleAfter {
				// Its coordinator is gone (a move's coordinator refreshes
				// the entry while it works): undo it, as it would have.
				f.repairStale(ctx, hk)
			}
		default:
			owner = h.Owner(seq)
		}
		if owner != "" {
			break
		}
		f.hold(hk, HoldMoving)
		msg.InProgress()
		if !sleep(ctx, f.clk, wait) {
			return
		}
	}
	f.hold("", "")
	if owner != f.cfg.Box {
		msg.Ack()
		f.settled(seq)
		return
	}
	via := channel
	if v := msg.Headers().Get(headerVia); v != "" {
		via = v
	}
	if !ValidBox(via) {
		f.log.Error("fleet: message for a channel the fleet cannot name dropped", "channel", fmt.Sprintf("%.64q", via), "conversation", hk, "seq", seq)
		msg.Term()
		f.settled(seq)
		return
	}
	var h Handler
	for wait := time.Second; ; wait = min(2*wait, time.Minute) {
		if h = f.handler(via); h != nil {
			break
		}
		// Its users are homed here: they wait for the channel (a box
		// configured without it is told so on every try, and by its
		// health check after a minute).
		f.log.Error("fleet: a message for this box waits: the channel does not run here", "channel", via, "conversation", hk, "seq", seq)
		f.hold(hk, HoldNoChannel)
		msg.InProgress()
		if !sleep(ctx, f.clk, wait) {
			return
		}
	}
	f.hold("", "")
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 10*time.Second) {
		if err = h(ctx, conv, msg.Data()); err == nil {
			break
		} else if errors.Is(err, ErrRejected) {
			f.log.Error("fleet: message refused and dropped", "conversation", hk, "seq", seq, "err", err)
			msg.Term()
			f.settled(seq)
			return
		}
		f.log.Warn("fleet: message not taken into the inbox; retrying", "conversation", hk, "seq", seq, "err", err)
		msg.InProgress()
		if !sleep(ctx, f.clk, wait) {
			return // not acknowledged: redelivered
		}
	}
	if err := msg.DoubleAck(ctx); err != nil {
		// Redelivered later; the inbox drops the duplicate.
		f.log.Warn("fleet: acknowledgement not confirmed", "seq", seq, "err", err)
	}
	f.settled(seq)
}

// releaseEnded releases what a move held here once the move has ended
// with the conversation homed here (its coordinator died before it
// released it): an abandoned move is undone first, as a box it holds
// does. A conversation homed elsewhere stays held (its jobs must not run
// on two boxes; the move's purge removes them).
func (f *Fleet) releaseEnded(ctx context.Context) {
	f.mu.Lock()
	lm, ok := f.local.(LocalMoves)
	f.mu.Unlock()
	if !ok || !f.Connected() {
		return
	}
	held, err := lm.Held(ctx)
	if err != nil {
		f.log.Warn("fleet: held conversations not read", "err", err)
		return
	}
	for _, c := range held {
		hk := HomeKey(c.Channel, c.Conv)
		h, _, found, err := f.home(ctx, hk)
		if err != nil || !found {
			continue
		}
		if h.Moving || h.Switching != "" {
			if f.clk.Now().Sub(h.At) > staleAfter {
				f.repairStale(ctx, hk)
			}
			continue
		}
		if h.Box != f.cfg.Box {
			continue
		}
		f.ctlMu.Lock()
		busy := f.ctlTail[hk] != nil // a move's request of it is running here
		f.ctlMu.Unlock()
		if busy {
			continue
		}
		if err := lm.Release(ctx, c.Channel, c.Conv); err != nil {
			f.log.Warn("fleet: held conversation not released", "conversation", hk, "err", err)
		} else {
			f.log.Info("fleet: what an ended move held is released", "conversation", hk)
		}
	}
}

// errBadHome is a home entry the fleet did not write.
var errBadHome = errors.New("fleet: bad home entry")

// ErrRejected is what a Handler returns (wrapped) for a message it can
// never take (malformed): it is dropped, not retried.
var ErrRejected = errors.New("fleet: message rejected")

func sleep(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// heartbeat writes this box's Beat every cfg.Heartbeat.
func (f *Fleet) heartbeat(ctx context.Context) {
	for {
		f.beat(ctx)
		f.releaseEnded(ctx)
		if !sleep(ctx, f.clk, f.cfg.Heartbeat) {
			return
		}
	}
}

func (f *Fleet) beat(ctx context.Context) {
	f.mu.Lock()
	local, cons := f.local, f.cons
	f.mu.Unlock()
	var b Beat
	if local != nil {
		b = local.Beat(ctx)
	}
	if cons != nil {
		if info, err := cons.Info(ctx); err == nil {
			f.lag.Store(info.NumPending + uint64(info.NumAckPending))
		}
	}
	b.Box, b.Version, b.Ingress, b.Lag, b.At = f.cfg.Box, f.cfg.Version, f.cfg.Ingress, f.lag.Load(), f.clk.Now().UTC()
	raw, _ := json.Marshal(b)
	if _, err := f.boxes.Put(ctx, f.cfg.Box, raw); err != nil && ctx.Err() == nil {
		f.log.Warn("fleet: heartbeat not written", "err", err)
	}
}

// scrubURLs replaces in msg each URL of urls, and the user information of
// each, by its redacted form.
func scrubURLs(msg, urls string) string {
	for _, u := range strings.Split(urls, ",") {
		u = strings.TrimSpace(u)
		if u == "" {
			continue
		}
		msg = strings.ReplaceAll(msg, u, redactURL(u))
		if s := strings.Index(u, "://"); s >= 0 {
			if at := strings.LastIndex(u, "@"); at > s+3 {
				msg = strings.ReplaceAll(msg, u[s+3:at], "***")
			}
		}
	}
	return msg
}

// redactURL hides passwords in NATS URLs for messages.
func redactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if at := strings.LastIndex(p, "@"); at >= 0 {
			if s := strings.Index(p, "://"); s >= 0 && s < at {
				parts[i] = p[:s+3] + "***" + p[at:]
			} else {
				parts[i] = "***" + p[at:]
			}
		}
	}
	return strings.Join(parts, ",")
}
