// Package voice is the agent.voice.v1 WebSocket channel: a device (a
// kitchen panel, a hardware button box) says hello with its token, streams
// 16-bit PCM, and gets back the transcript and the agent's streamed reply.
// The protocol is in ../shared/INTERFACE.md.
//
// Access: the token makes a client a device, put to the DM policy; the web
// console's session cookie (from `agentctl console`) makes it the
// operator. Nothing else does — not a loopback address, not an empty
// token. Both are checked again before every turn.
//
// One connection has one turn in flight at a time (recognition, then the
// conversation turn); audio and text that arrive meanwhile get a busy
// error. An utterance ends with an `end` frame or when the energy-based
// voice-activity detector hears trailing silence. Limits: MaxUtterance of
// audio per utterance, MaxMessage bytes per frame, MaxConns connections
// past their hello, a write deadline and a bounded send queue (a client
// that does not read is disconnected), ping/pong keepalive. Connections
// that have not said hello yet have slots of their own, counted per client
// address (MaxPending, MaxPendingPerClient) and held for HelloTimeout at
// most: sockets that never say hello cannot lock devices out.
package voice

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"agent/pkg/asr"
	"agent/pkg/channel"
	"agent/pkg/connlimit"
)

// Recognizer transcribes 16 kHz mono float32 audio (*asr.Recognizer).
type Recognizer interface {
	Transcribe(ctx context.Context, samples []float32) (asr.Result, error)
}

// Limits bound what one connection and the server may use. Zero fields
// take the defaults.
type Limits struct {
	MaxConns     int           // connections past their hello at once; default 16
	MaxUtterance time.Duration // audio per utterance; default asr.MaxAudio (60 s)
	MaxMessage   int64         // bytes per frame; default 256 KiB
	MaxText      int           // bytes of a text turn; default 4 KiB
	HelloTimeout time.Duration // from upgrade to hello; default 5 s
	WriteTimeout time.Duration // per frame written; default 10 s
	PingInterval time.Duration // keepalive pings; default 20 s
	ReadTimeout  time.Duration // silence (no frame, no pong) that ends a connection; default 60 s
	SendQueue    int           // frames queued for a slow client before it is dropped; default 256
	MaxEncoded   int           // bytes of one compressed utterance (hello "format"); default 8 MiB
	// MaxPending bounds the connections that have not said hello yet,
	// MaxPendingPerClient those of one client address (connlimit.Client).
	// When either is full the newcomer takes the place of the oldest such
	// connection of its own address, or of the address with the most of
	// them (closed with 1013, try again later); a device says hello within
	// milliseconds of connecting, an idle socket does not. Defaults 64
	// and 8.
	MaxPending          int
	MaxPendingPerClient int
}

func (l Limits) withDefaults() Limits {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if l.MaxConns <= 0 {
		l.MaxConns = 16
	}
	if l.MaxPending <= 0 {
		l.MaxPending = 64
	}
	if l.MaxPendingPerClient <= 0 || l.MaxPendingPerClient > l.MaxPending {
		l.MaxPendingPerClient = min(8, l.MaxPending)
	}
	def(&l.MaxUtterance, asr.MaxAudio)
	if l.MaxMessage <= 0 {
		l.MaxMessage = 256 << 10
	}
	if l.MaxText <= 0 {
		l.MaxText = 4 << 10
	}
	def(&l.HelloTimeout, 5*time.Second)
	def(&l.WriteTimeout, 10*time.Second)
	def(&l.PingInterval, 20*time.Second)
	def(&l.ReadTimeout, 60*time.Second)
	if l.SendQueue <= 0 {
		l.SendQueue = 256
	}
	if l.MaxEncoded <= 0 {
		l.MaxEncoded = 8 << 20
	}
	return l
}

// Config of a Server.
type Config struct {
	// Token returns the configured voice.token (it may change on reload;
	// open connections are held to the new one from their next turn). An
	// empty token admits no device.
	Token func() string
	// Sessions authenticates the web console by its session cookie, checked
	// on the upgrade request (console.Sessions). A connection with a valid
	// session needs no token and is Operator. nil: every client needs the
	// token. Nothing else — a loopback address, an empty token — makes a
	// client the operator.
	Sessions Sessions
	// Operator is who a console-session connection speaks as; default
	// {Channel: "admin", User: "console"}: the operator's own channel, the
	// one agentctl drives over the admin socket (its access proves the
	// same thing). Its turns are not put to the DM policy.
	Operator Identity
	// ASR returns the recogniser, or nil while none is loaded.
	ASR func() Recognizer
	// Turns runs turns, and cancels the one in flight for a routing key;
	// nil or unavailable (Err): turns get llm_unavailable.
	Turns channel.Turns
	// Admit applies security.dm_policy to a device that passed the token
	// check: principals are "voice:DEVICE" and/or "voice:USER", every one
	// of which must be admitted (the names are claims: whoever holds the
	// token can say them). It is asked at the hello and again before every
	// turn (text or utterance), so a revocation or a policy change applies
	// to the next turn. nil admits every client with the token.
	Admit func(ctx context.Context, principals []string) (Admission, error)
	// Defaults returns what a hello that does not say gets (it follows
	// configuration reloads); nil: no partials, no spoken replies, voice en.
	Defaults func() Defaults
	Limits   Limits
	VAD      VADConfig
	// FFmpeg is the ffmpeg binary that decodes compressed utterances;
	// default "ffmpeg" on PATH.
	FFmpeg string
	// TTS: how spoken replies are synthesised.
	TTS    TTSConfig
	Logger *slog.Logger
}

// Defaults are a connection's settings when its hello does not name them.
type Defaults struct {
	// Partials: partial transcripts (final:false) while an utterance is
	// spoken, when the recogniser has an idle worker (hello "partials").
	Partials bool
	// TTS: each final reply is also spoken (hello "tts"), in TTSVoice, an
	// espeak-ng voice (hello "voice"; "" = en).
	TTS      bool
	TTSVoice string
}

// Sessions is what authenticates console connections (*console.Sessions).
type Sessions interface {
	// Session returns the id of the valid console session r carries, or "".
	Session(r *http.Request) string
	// Valid reports whether session id is still valid (checked before
	// each turn: it expires, or the operator ends it).
	Valid(id string) bool
	// Verify reports whether key (the hello's "console_key", which the
	// page got in the sign-in fragment) belongs to session id: the cookie
	// alone, which every port of the host is sent, is not enough.
	Verify(id, key string) bool
}

// Identity is who a connection's turns come from: conversation channel and
// user.
type Identity struct {
	Channel, User string
}

// Principal is "channel:user".
func (i Identity) Principal() string { return i.Channel + ":" + i.User }

// Admission is Config.Admit's decision.
type Admission struct {
	Allowed bool
	// Code is the pairing code of a device that is not yet approved; the
	// client is told it (pairing_required) and the operator approves it
	// with `agentctl pair approve CODE`. Empty: refused (forbidden).
	Code string
	// Reason, when set, is the forbidden message instead of the default.
	Reason string
}

// Server serves agent.voice.v1 connections. Safe for concurrent use.
type Server struct {
	cfg      Config
	lim      Limits
	logger   *slog.Logger
	upgrader websocket.Upgrader

	// chunkHook, when set (tests), runs before each audio frame of a
	// spoken reply is queued.
	chunkHook func(ctx context.Context, i int)

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup
	// Pre-hello and authenticated connections (prehello.go); created on
	// first use, guarded by mu.
	pending    map[*conn]pendingSlot
	pendingPer map[string]int
	authed     map[*conn]struct{}
	pendingSeq uint64
	evicted    int64

	utterances, partials, silero atomic.Int64 // see Stats
	trimmed                      atomic.Int64 // PCM bytes of silence cut before recognition
}

// Stats counts what the server did since it started.
type Stats struct {
	Connections int   // open now
	Pending     int   // of them, not past their hello yet
	Evicted     int64 // connections closed before their hello to make room for newer ones
	Utterances  int64 // utterances handed to recognition
	Partials    int64 // partial transcripts sent
	Silero      int64 // connections that ended utterances with the Silero VAD
	// TrimmedBytes is the silence (16-bit PCM at each connection's rate)
	// cut from utterances before recognition.
	TrimmedBytes int64
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	pending, evicted := len(s.pending), s.evicted
	s.mu.Unlock()
	return Stats{Connections: s.Active(), Pending: pending, Evicted: evicted, Utterances: s.utterances.Load(), Partials: s.partials.Load(), Silero: s.silero.Load(), TrimmedBytes: s.trimmed.Load()}
}

// New returns a Server.
func New(cfg Config) *Server {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Token == nil {
		cfg.Token = func() string { return "" }
	}
	if cfg.ASR == nil {
		cfg.ASR = func() Recognizer { return nil }
	}
	if cfg.Defaults == nil {
		cfg.Defaults = func() Defaults { return Defaults{} }
	}
	if cfg.Operator.Channel == "" || cfg.Operator.User == "" {
		cfg.Operator = Identity{Channel: "admin", User: "console"}
	}
	cfg.VAD = cfg.VAD.withDefaults()
	cfg.TTS = cfg.TTS.withDefaults()
	return &Server{
		cfg:    cfg,
		lim:    cfg.Limits.withDefaults(),
		logger: logger,
		conns:  map[*conn]struct{}{},
		upgrader: websocket.Upgrader{
			HandshakeTimeout: 10 * time.Second,
			Subprotocols:     []string{Protocol},
			// The default origin check stays: a web page on another
			// site must not drive the box through the visitor's
			// browser with the operator's session cookie. (A page on a
			// rebound name is same-origin to the browser: the daemon's
			// Host allowlist stops that one.)
		},
	}
}

// Active returns the number of open connections.
func (s *Server) Active() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// ServeHTTP upgrades GET /voice to a WebSocket and runs the connection
// until either side closes it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := newConn(s)
	victims, refused := s.enter(c, connlimit.Client(r.RemoteAddr))
	for _, v := range victims {
		go v.evict()
	}
	if refused != "" {
		c.cancel()
		w.Header().Set("Retry-After", "5")
		http.Error(w, refused, http.StatusServiceUnavailable)
		return
	}
	defer s.leave(c)

	ws, err := s.upgrader.Upgrade(w, r, nil) // answers the client itself on failure
	if err != nil {
		s.logger.Debug("upgrade failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	if !c.upgraded(ws) { // evicted while upgrading (prehello.go)
		return
	}
	c.consoleID = s.consoleSession(r)
	c.serve(ws, r.RemoteAddr)
}

// Disconnect closes the connections whose device or user is principal
// ("voice:ID"), as when the operator revokes it, and returns how many. The
// client sees close code 1008 (policy violation) with reason "revoked".
func (s *Server) Disconnect(principal string) int {
	s.mu.Lock()
	var hit []*conn
	for c := range s.conns {
		if c.is(principal) {
			hit = append(hit, c)
		}
	}
	s.mu.Unlock()
	for _, c := range hit {
		go c.closeWith(websocket.ClosePolicyViolation, "revoked")
	}
	return len(hit)
}

// Close disconnects every client (turns in flight are cancelled) and
// waits for their goroutines or ctx. New connections are refused.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		go c.shutdown() // each may wait up to a second for its close frame
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// consoleSession is the id of the valid console session the upgrade
// request r carries (its cookie), or "".
func (s *Server) consoleSession(r *http.Request) string {
	if s.cfg.Sessions == nil {
		return ""
	}
	return s.cfg.Sessions.Session(r)
}

// authorized compares the hello token with the configured one in constant
// time (both are hashed first, so their lengths leak nothing either). An
// empty configured token authorizes nobody.
func (s *Server) authorized(got string) bool {
	want := s.cfg.Token()
	if want == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}
