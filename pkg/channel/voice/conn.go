package voice

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"agent/pkg/asr"
	"agent/pkg/audio"
	"agent/pkg/turn"
)

// Channel is the conversation channel of voice turns.
const Channel = "voice"

// Profiles a hello may ask for.
const (
	ProfileVoice    = "voice"
	ProfileHardware = "hardware"
)

// maxHello bounds the hello frame; maxName a user or device name.
const (
	maxHello = 8 << 10
	maxName  = 128
)

// errGone: the frame was not sent (the connection or the turn is over).
var errGone = errors.New("voice: connection closed or turn cancelled")

// conn is one client connection.
type conn struct {
	s      *Server
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	wsMu       sync.Mutex
	ws         *websocket.Conn
	principals []string // set once the hello is accepted (guarded by wsMu)

	// consoleID is the console session of the upgrade request ("" for a
	// device), set before serve; token is the hello's token, checked again
	// before each turn (voice.token may change on reload).
	consoleID string
	token     string

	out        chan outFrame // frames for writeLoop
	writerDone chan struct{}
	credits    chan struct{} // audio frames queued or being written (speak)
	jobs       sync.WaitGroup

	// Set by the hello, read-only afterwards.
	in       turn.Message
	session  string
	rate     int
	maxBytes int    // PCM bytes per utterance
	tts      bool   // spoken replies (hello "tts", default voice.tts)
	ttsVoice string // espeak-ng voice for them
	partials bool   // partial transcripts (hello "partials", default voice.partial_transcripts)
	encoded  bool   // hello "format" names a compressed format: utterances are decoded by ffmpeg at end

	// Owned by the reading goroutine.
	pcm       []byte // the utterance so far, an even number of bytes
	carry     []byte // the odd byte of a frame, completed by the next one
	vad       detector
	overflow  bool // the utterance went over the limit: audio is dropped until it ends
	vadEnded  bool // the last utterance was ended by voice activity
	busyNoted bool // the client was told busy for audio during this turn
	partialAt int  // len(pcm) at the last partial transcription started

	mu        sync.Mutex // job state
	gen       uint64     // bumped by each job and by cancel: stale jobs' frames are dropped
	busy      bool
	jobCancel context.CancelFunc
	turnIn    *turn.Message // the conversation turn in flight, for Cancel

	utt           uint64             // bumped when an utterance ends or is dropped: stale partials are not sent
	partialCancel context.CancelFunc // the partial transcription in flight, or nil
}

func newConn(s *Server) *conn {
	c := &conn{s: s, log: s.logger, carry: make([]byte, 0, 1)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// shutdown ends the connection from the server side (Server.Close).
func (c *conn) shutdown() { c.closeWith(websocket.CloseGoingAway, "agent stopping") }

// closeWith ends the connection from the server side with a close frame
// (its turn in flight is cancelled with it).
func (c *conn) closeWith(code int, reason string) {
	c.wsMu.Lock()
	ws := c.ws
	c.wsMu.Unlock()
	if ws != nil {
		// Before the cancel: the writer closes the socket when it sees it.
		// (WriteControl may run beside the writer's frames.)
		ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
	}
	c.cancel()
	if ws != nil {
		ws.NetConn().Close()
	}
}

// is reports whether the connection's device or user is principal
// ("voice:ID"); false before its hello was accepted.
func (c *conn) is(principal string) bool {
	c.wsMu.Lock()
	defer c.wsMu.Unlock()
	return slices.Contains(c.principals, principal)
}

func (c *conn) serve(ws *websocket.Conn, remote string) {
	defer ws.Close()
	defer c.cancel()
	c.wsMu.Lock()
	c.ws = ws
	c.wsMu.Unlock()
	if c.ctx.Err() != nil { // Close raced the upgrade
		return
	}
	c.log = c.log.With("remote", remote)
	if !c.hello() || !c.s.helloDone(c) { // helloDone: prehello.go
		return
	}
	c.log = c.log.With("session", c.session, "profile", c.in.Profile)
	c.log.Info("voice client connected", "rate", c.rate)
	c.out = make(chan outFrame, c.s.lim.SendQueue)
	c.writerDone = make(chan struct{})
	c.credits = make(chan struct{}, audioCredits)
	go c.writeLoop()
	c.send(readyMsg{Type: "ready", Session: c.session, Protocol: Protocol})
	c.readLoop()
	c.cancel()
	c.jobs.Wait()
	<-c.writerDone
	c.log.Info("voice client disconnected")
}

// hello reads and checks the first frame; on failure the client gets a
// fatal error frame and the connection closes.
func (c *conn) hello() bool {
	ws := c.ws
	ws.SetReadLimit(maxHello)
	ws.SetReadDeadline(time.Now().Add(c.s.lim.HelloTimeout))
	typ, data, err := ws.ReadMessage()
	if err != nil {
		c.log.Debug("no hello", "err", err)
		return false
	}
	var m clientMsg
	if typ != websocket.TextMessage || json.Unmarshal(data, &m) != nil || m.Type != typeHello {
		return c.reject(CodeBadHello, "the first frame must be a hello: {\"type\":\"hello\",\"token\":...}", websocket.CloseProtocolError)
	}
	// The console is the operator with its session cookie and that
	// session's key; a cookie without the key (another port of this host
	// was sent it) is nothing, and the hello needs the token.
	operator := c.consoleID != "" && c.s.cfg.Sessions != nil && c.s.cfg.Sessions.Verify(c.consoleID, m.ConsoleKey)
	if !operator {
		c.consoleID = ""
	}
	if !operator && !c.s.authorized(m.Token) {
		c.log.Warn("voice hello with a bad token and no console session", "device", clip(m.Device))
		return c.reject(CodeUnauthorized, "bad or missing token (voice.token); the web console signs in with a link from `agentctl console` on the box", websocket.ClosePolicyViolation)
	}
	if m.Protocol != "" && m.Protocol != Protocol {
		return c.reject(CodeBadHello, fmt.Sprintf("protocol %q is not supported; this server speaks %s", clip(m.Protocol), Protocol), websocket.CloseProtocolError)
	}
	profile := m.Profile
	if profile == "" {
		profile = ProfileVoice
	}
	if profile != ProfileVoice && profile != ProfileHardware {
		return c.reject(CodeBadHello, fmt.Sprintf("profile %q: want %s or %s", clip(profile), ProfileVoice, ProfileHardware), websocket.CloseProtocolError)
	}
	rate := m.SampleRate
	if rate == 0 {
		rate = asr.SampleRate
	}
	switch {
	case m.Format == "" || m.Format == FormatPCM:
	case slices.Contains(EncodedFormats, m.Format):
		c.encoded, rate = true, asr.SampleRate // the container carries its own rate
	default:
		return c.reject(CodeBadHello, fmt.Sprintf("format %q: want %s (default) or one of %v", clip(m.Format), FormatPCM, EncodedFormats), websocket.CloseUnsupportedData)
	}
	if !supportedRate(rate) {
		return c.reject(CodeBadAudio, fmt.Sprintf("sample_rate %d is not supported; use one of %v (16000 preferred)", rate, SampleRates), websocket.CloseUnsupportedData)
	}
	sender := m.User
	if sender == "" {
		sender = m.Device
	}
	if (sender == "" && !operator) || len(sender) > maxName || !utf8.ValidString(sender) {
		return c.reject(CodeBadHello, fmt.Sprintf("the hello needs a user or device name of 1 to %d bytes", maxName), websocket.CloseProtocolError)
	}
	def := c.s.cfg.Defaults()
	ttsVoice := cmp.Or(m.Voice, def.TTSVoice, defaultTTSVoice)
	if !validVoice(ttsVoice) {
		return c.reject(CodeBadHello, fmt.Sprintf("voice %q: want an espeak-ng voice name such as en or cmn", clip(m.Voice)), websocket.CloseProtocolError)
	}
	c.tts, c.ttsVoice, c.partials = def.TTS, ttsVoice, def.Partials
	if m.TTS != nil {
		c.tts = *m.TTS
	}
	if m.Partials != nil {
		c.partials = *m.Partials
	}
	if len(m.Device) > maxName || !utf8.ValidString(m.Device) {
		return c.reject(CodeBadHello, fmt.Sprintf("the device name must be at most %d bytes of UTF-8", maxName), websocket.CloseProtocolError)
	}
	// A name is one id: "voice:boss" as a user name would be checked as
	// "voice:voice:boss" but keyed (and given a folder and memory) as
	// voice:boss. No ':' and no control characters, then.
	// Nor a name that reads as another: spaces around it ("boss\u00a0") or
	// invisible formatting characters (U+200B, U+202E) inside it.
	for _, name := range []string{m.User, m.Device} {
		if strings.ContainsRune(name, ':') || strings.IndexFunc(name, badNameRune) >= 0 || strings.TrimFunc(name, unicode.IsSpace) != name {
			return c.reject(CodeBadHello, fmt.Sprintf("name %q: user and device names may not contain ':', control or invisible formatting characters, nor begin or end with a space", clip(name)), websocket.CloseProtocolError)
		}
	}
	// A device speaks as its user or device name and is put to the DM
	// policy; the console session is the operator, whatever the hello
	// names (it proved admin-socket access to get its session).
	in := turn.Message{Channel: Channel, Profile: profile, Fast: true, Sender: sender, Device: m.Device}
	who := principals(m.Device, m.User)
	if operator {
		op := c.s.cfg.Operator
		in.Channel, in.Sender = op.Channel, op.User
		who = []string{op.Principal()}
	}
	key, err := c.key(in)
	if err != nil {
		return c.reject(CodeBadHello, "unusable user or device name: "+err.Error(), websocket.CloseProtocolError)
	}
	if !operator {
		if r := c.decide(c.ctx, who); r != nil {
			return c.reject(r.code, r.msg, r.close)
		}
	}
	c.wsMu.Lock()
	c.principals = who
	c.wsMu.Unlock()
	c.token = m.Token
	if operator {
		c.log = c.log.With("operator", true)
	}
	c.in, c.session, c.rate = in, string(key), rate
	c.maxBytes = int(int64(rate)*int64(c.s.lim.MaxUtterance)/int64(time.Second)) * 2
	c.vad = newDetector(c.s.cfg.VAD, rate, c.log)
	if _, ok := c.vad.(*sileroVAD); ok {
		c.s.silero.Add(1)
	}
	ws.SetReadLimit(c.s.lim.MaxMessage)
	return true
}

// key is the conversation's name for in ("voice:boss"): the pipeline's,
// which refuses names it cannot key; without one, channel:sender.
func (c *conn) key(in turn.Message) (string, error) {
	if t := c.s.cfg.Turns; t != nil {
		return t.Key(in)
	}
	return in.Channel + ":" + in.Sender, nil
}

// refusal is why a client may not (or may no longer) talk: an error code,
// its message and the close code that ends the connection.
type refusal struct {
	code, msg string
	close     int
}

// decide applies the DM policy (Config.Admit) to a device's principals;
// nil: admitted.
func (c *conn) decide(ctx context.Context, principals []string) *refusal {
	if c.s.cfg.Admit == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.s.lim.HelloTimeout)
	defer cancel()
	a, err := c.s.cfg.Admit(ctx, principals)
	switch {
	case err != nil:
		c.log.Error("voice: the DM policy could not be checked", "err", err)
		return &refusal{CodeInternal, "the server could not check this device's access; try again", websocket.CloseInternalServerErr}
	case a.Allowed:
		return nil
	case a.Code != "":
		c.log.Info("voice device waiting for approval", "principals", principals, "code", a.Code)
		return &refusal{CodeNotPaired, fmt.Sprintf("this device is not approved yet; its pairing code is %s (the operator runs: agentctl pair approve %s)", a.Code, a.Code), websocket.ClosePolicyViolation}
	default:
		c.log.Warn("voice client refused by the DM policy", "principals", principals)
		msg := "this device or user may not talk to the agent (security.dm_policy / allow_from)"
		if a.Reason != "" {
			msg = a.Reason
		}
		return &refusal{CodeForbidden, msg, websocket.ClosePolicyViolation}
	}
}

// recheck applies the connection's access again before a turn, as the
// configuration and the pairings are now: a console session must still be
// valid; a device must still hold voice.token and pass the DM policy. A
// refused client gets a fatal error frame and the connection closes.
func (c *conn) recheck(ctx context.Context) bool {
	var r *refusal
	switch {
	case c.consoleID != "":
		if c.s.cfg.Sessions == nil || !c.s.cfg.Sessions.Valid(c.consoleID) {
			c.log.Info("console session ended; closing its voice connection")
			r = &refusal{CodeUnauthorized, "the console session has expired or was ended; run `agentctl console` on the box for a new sign-in link", websocket.ClosePolicyViolation}
		}
	case !c.s.authorized(c.token):
		c.log.Warn("voice.token changed; closing a device connection that said hello with the old one")
		r = &refusal{CodeUnauthorized, "the voice token has changed (voice.token); reconnect with the new one", websocket.ClosePolicyViolation}
	default:
		r = c.decide(ctx, c.principals)
	}
	if r == nil {
		return true
	}
	b, _ := json.Marshal(errorMsg{Type: "error", Code: r.code, Message: r.msg, Fatal: true})
	c.enqueue(outFrame{b: b, closeCode: r.close, closeReason: r.code})
	return false
}

// principals are the DM-policy names of a client: "voice:DEVICE" and/or
// "voice:USER".
func principals(device, user string) []string {
	var out []string
	for _, id := range []string{device, user} {
		if id != "" {
			out = append(out, Channel+":"+id)
		}
	}
	return out
}

// reject sends a fatal error frame and a close frame.
func (c *conn) reject(code, msg string, closeCode int) bool {
	b, _ := json.Marshal(errorMsg{Type: "error", Code: code, Message: msg, Fatal: true})
	deadline := time.Now().Add(c.s.lim.WriteTimeout)
	c.ws.SetWriteDeadline(deadline)
	if c.ws.WriteMessage(websocket.TextMessage, b) == nil {
		c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(closeCode, code), deadline)
	}
	return false
}

func (c *conn) readLoop() {
	ws := c.ws
	timeout := c.s.lim.ReadTimeout
	ws.SetPongHandler(func(string) error { return ws.SetReadDeadline(time.Now().Add(timeout)) })
	for {
		ws.SetReadDeadline(time.Now().Add(timeout))
		typ, data, err := ws.ReadMessage()
		if err != nil {
			if !websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) && c.ctx.Err() == nil {
				c.log.Debug("voice read ended", "err", err)
			}
			return
		}
		switch typ {
		case websocket.BinaryMessage:
			c.audio(data)
		case websocket.TextMessage:
			c.command(data)
		}
	}
}

func (c *conn) writeLoop() {
	defer close(c.writerDone)
	ws := c.ws
	lim := c.s.lim
	tick := time.NewTicker(lim.PingInterval)
	defer tick.Stop()
	fail := func(what string, err error) {
		c.log.Debug("voice write failed, closing", "what", what, "err", err)
		c.cancel()
		ws.NetConn().Close() // ends the read loop too
	}
	for {
		select {
		case f := <-c.out:
			typ := websocket.TextMessage
			if f.binary {
				typ = websocket.BinaryMessage
			}
			ws.SetWriteDeadline(time.Now().Add(lim.WriteTimeout))
			if err := ws.WriteMessage(typ, f.b); err != nil {
				fail("frame", err)
				return
			}
			if f.binary {
				<-c.credits
			}
			if f.closeCode != 0 { // a fatal error frame: the connection ends with it
				ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(f.closeCode, f.closeReason), time.Now().Add(lim.WriteTimeout))
				c.cancel()
				ws.NetConn().Close()
				return
			}
		case <-tick.C:
			if err := ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(lim.WriteTimeout)); err != nil {
				fail("ping", err)
				return
			}
		case <-c.ctx.Done():
			ws.NetConn().Close()
			return
		}
	}
}

// send queues a frame. A client that lets SendQueue frames pile up is not
// reading: it is disconnected rather than buffered without bound.
func (c *conn) send(v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		c.log.Error("voice frame not encodable", "err", err)
		return false
	}
	return c.enqueue(outFrame{b: b})
}

// enqueue queues an encoded frame (see send).
func (c *conn) enqueue(f outFrame) bool {
	select {
	case c.out <- f:
		return true
	case <-c.ctx.Done():
		return false
	default:
		c.log.Warn("voice client is not reading its frames; disconnecting", "queued", len(c.out))
		c.cancel()
		return false
	}
}

// sendJob sends a frame of job gen unless the job was cancelled or
// superseded (checked under the lock cancel takes, so no frame of a
// cancelled job follows the cancel).
func (c *conn) sendJob(gen uint64, v any) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return false
	}
	return c.send(v)
}

// sendLast enqueues a job's last frame and ends its turn in the same step,
// so a client that answers the frame at once is not told busy.
func (c *conn) sendLast(gen uint64, v any) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return false
	}
	c.busy, c.jobCancel, c.turnIn = false, nil, nil
	return c.send(v)
}

func (c *conn) fail(code, msg string) { c.send(errorFrame(code, msg)) }

func (c *conn) command(data []byte) {
	var m clientMsg
	if err := json.Unmarshal(data, &m); err != nil {
		c.fail(CodeBadRequest, "text frames must be JSON objects with a type: "+err.Error())
		return
	}
	switch m.Type {
	case typeEnd:
		c.endUtterance(false)
	case typeText:
		text := strings.TrimSpace(m.Text)
		switch {
		case text == "":
			c.fail(CodeBadRequest, "empty text")
		case len(m.Text) > c.s.lim.MaxText:
			c.fail(CodeBadRequest, fmt.Sprintf("text over %d bytes", c.s.lim.MaxText))
		case !c.start(func(ctx context.Context, gen uint64) { c.turn(ctx, gen, text) }):
			c.fail(CodeBusy, "a turn is in flight on this connection: wait for its final reply or send cancel")
		}
	case typeCancel:
		c.cancelAll()
	case typeHello:
		c.fail(CodeBadRequest, "hello was already received")
	default:
		c.fail(CodeBadRequest, fmt.Sprintf("unknown frame type %q", clip(m.Type)))
	}
}

// audio takes one binary frame: PCM s16le mono at the hello's rate, any
// length (an odd byte waits for the next frame).
func (c *conn) audio(data []byte) {
	if c.encoded {
		c.encodedAudio(data)
		return
	}
	if len(c.carry) == 1 && len(data) > 0 {
		data = append([]byte{c.carry[0]}, data...)
		c.carry = c.carry[:0]
	}
	if len(data)%2 == 1 {
		c.carry = append(c.carry, data[len(data)-1])
		data = data[:len(data)-1]
	}
	if len(data) == 0 {
		return
	}
	if c.isBusy() {
		// Dropped: one turn at a time. Someone speaking over it is told.
		c.vad.feed(data)
		if !c.busyNoted && c.vad.heard() {
			c.busyNoted = true
			c.fail(CodeBusy, "a turn is in flight on this connection: audio is ignored until its final reply (or send cancel)")
		}
		return
	}
	if c.busyNoted {
		c.busyNoted = false
		c.vad.reset()
	}
	if c.overflow {
		if c.vad.feed(data) { // the over-long utterance ended in silence
			c.overflow = false
			c.vad.reset()
		}
		return
	}
	if len(c.pcm)+len(data) > c.maxBytes {
		c.pcm, c.overflow = nil, true
		c.vad.reset()
		c.dropPartial()
		c.fail(CodeTooLong, fmt.Sprintf("utterance longer than %v: dropped (pause or send end, then speak again)", c.s.lim.MaxUtterance))
		return
	}
	c.pcm = append(c.pcm, data...)
	ended := c.vad.feed(data)
	if c.vad.heard() { // a new utterance, not the tail of one voice activity ended
		c.vadEnded = false
	}
	if ended {
		c.endUtterance(true)
		return
	}
	c.maybePartial()
}

// Partial transcripts: while an utterance is spoken, every partialStep of
// new audio (once speech is heard, up to partialMax) the audio so far is
// transcribed on an idle speech worker and sent as final:false. Never more
// than one per connection at a time; a partial still running when the
// utterance ends is cancelled (the final one takes its place), and the
// recogniser preempts partials for other speakers' final transcriptions.
const (
	partialStep = time.Second
	partialMax  = 20 * time.Second
)

// partialRecognizer is a Recognizer that can transcribe an utterance still
// being spoken (*asr.Recognizer).
type partialRecognizer interface {
	TranscribePartial(ctx context.Context, samples []float32) (asr.Result, error)
}

// maybePartial starts a partial transcription when one is due.
func (c *conn) maybePartial() {
	if !c.partials || !c.vad.heard() {
		return
	}
	step := c.rate * 2 * int(partialStep/time.Second)
	if len(c.pcm)-c.partialAt < step || len(c.pcm) > c.rate*2*int(partialMax/time.Second) {
		return
	}
	rec, ok := c.s.cfg.ASR().(partialRecognizer)
	if !ok {
		return
	}
	c.mu.Lock()
	if c.partialCancel != nil || c.busy || c.ctx.Err() != nil {
		c.mu.Unlock()
		return
	}
	c.partialAt = len(c.pcm)
	utt := c.utt
	ctx, cancel := context.WithCancel(c.ctx)
	c.partialCancel = cancel
	c.jobs.Add(1)
	c.mu.Unlock()
	// The utterance's bytes so far are never written again (appends go
	// past them; an ended utterance gets a new buffer), so the goroutine
	// may read them while the reader appends.
	pcm := c.pcm[:len(c.pcm):len(c.pcm)]
	go func() {
		defer c.jobs.Done()
		defer cancel()
		text := c.partial(ctx, rec, pcm)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.utt == utt {
			c.partialCancel = nil
			if text != "" && !c.busy && c.send(transcript(text, false)) {
				c.s.partials.Add(1)
			}
		}
	}()
}

// partial transcribes pcm; "" when it could not (busy workers, preempted,
// cancelled: a preview is simply skipped).
func (c *conn) partial(ctx context.Context, rec partialRecognizer, pcm []byte) string {
	samples, err := audio.PCM16ToFloat32(pcm)
	if err != nil {
		return ""
	}
	if c.rate != asr.SampleRate {
		samples = audio.Resample(samples, c.rate, asr.SampleRate)
	}
	res, err := rec.TranscribePartial(ctx, samples)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, asr.ErrBusy) && !errors.Is(err, asr.ErrPreempted) {
			c.log.Debug("partial transcription failed", "err", err)
		}
		return ""
	}
	return strings.TrimSpace(res.Text)
}

// dropPartial forgets the utterance's partial transcription: one in
// flight is cancelled and its text never sent.
func (c *conn) dropPartial() {
	c.partialAt = 0
	c.mu.Lock()
	c.utt++
	if c.partialCancel != nil {
		c.partialCancel()
		c.partialCancel = nil
	}
	c.mu.Unlock()
}

// endUtterance hands the buffered utterance to recognition.
func (c *conn) endUtterance(byVAD bool) {
	if c.encoded {
		c.endEncoded()
		return
	}
	c.carry = c.carry[:0] // a stray last byte is not a sample
	if c.overflow {       // already answered with too_long
		c.overflow = false
		c.vad.reset()
		return
	}
	pcm, heard := c.pcm, c.vad.heard()
	if heard {
		pcm = c.trimSilence(pcm)
	}
	c.pcm = nil
	c.vad.reset()
	c.dropPartial()
	if len(pcm) == 0 && !byVAD {
		if c.vadEnded || c.isBusy() { // the `end` after voice activity ended it
			c.vadEnded = false
			return
		}
		c.send(transcript("", true))
		return
	}
	if !byVAD && !heard && c.vadEnded { // trailing silence of a VAD-ended utterance, then its end
		c.vadEnded = false
		return
	}
	c.vadEnded = byVAD
	if !heard { // silence: nothing to recognise
		c.send(transcript("", true))
		return
	}
	if !c.start(func(ctx context.Context, gen uint64) { c.recognize(ctx, gen, pcm) }) {
		c.fail(CodeBusy, "a turn is in flight on this connection: the utterance was dropped")
		return
	}
	c.s.utterances.Add(1)
}

func (c *conn) isBusy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busy
}

// start runs job as the connection's turn unless one is in flight.
func (c *conn) start(job func(ctx context.Context, gen uint64)) bool {
	c.mu.Lock()
	if c.busy || c.ctx.Err() != nil {
		c.mu.Unlock()
		return false
	}
	c.busy = true
	c.gen++
	gen := c.gen
	ctx, cancel := context.WithCancel(c.ctx)
	c.jobCancel = cancel
	c.jobs.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.jobs.Done()
		defer cancel()
		if c.recheck(ctx) { // every turn, not just the hello
			job(ctx, gen)
		}
		c.mu.Lock()
		if c.gen == gen {
			c.busy, c.jobCancel, c.turnIn = false, nil, nil
		}
		c.mu.Unlock()
	}()
	return true
}

// cancelAll drops the utterance being received and the turn in flight.
func (c *conn) cancelAll() {
	c.pcm, c.carry, c.overflow, c.vadEnded = nil, c.carry[:0], false, false
	c.vad.reset()
	c.dropPartial()
	c.mu.Lock()
	var in *turn.Message
	if c.busy {
		c.gen++
		c.busy = false
		c.jobCancel()
		c.jobCancel = nil
		in, c.turnIn = c.turnIn, nil
	}
	c.mu.Unlock()
	if in != nil && c.s.cfg.Turns != nil {
		c.s.cfg.Turns.Cancel(*in)
	}
	c.log.Debug("voice turn cancelled", "in_turn", in != nil)
}

// speechPad is the audio kept around Silero's speech bounds: whisper
// hears a word's onset and decay, and the bounds are 32 ms windows.
const speechPad = 200 * time.Millisecond

// trimSilence cuts the silence before and after the speech Silero found
// (less audio to decode, a smaller audio context for whisper). It cuts
// only when the detector analysed exactly this audio: audio it saw while
// a turn was in flight, or missed, would shift its bounds.
func (c *conn) trimSilence(pcm []byte) []byte {
	start, end, fed, ok := c.vad.speechSpan()
	if !ok || c.rate <= 0 {
		return pcm
	}
	have := time.Duration(len(pcm)/2) * time.Second / time.Duration(c.rate)
	if d := have - fed; d < -vadSlack || d > vadSlack {
		return pcm
	}
	at := func(t time.Duration) int { return int(int64(t)*int64(c.rate)/int64(time.Second)) * 2 }
	from := max(0, at(start-speechPad))
	to := min(len(pcm), at(end+speechPad))
	if from >= to {
		return pcm
	}
	c.s.trimmed.Add(int64(len(pcm) - (to - from)))
	return pcm[from:to]
}

// vadSlack is how far the detector's count of the audio may be from the
// buffer's (a partial window, resampling) for its bounds to be used.
const vadSlack = 64 * time.Millisecond

// recognize transcribes an utterance and runs its turn.
func (c *conn) recognize(ctx context.Context, gen uint64, pcm []byte) {
	rec := c.s.cfg.ASR()
	if rec == nil {
		c.sendLast(gen, errorFrame(CodeASRUnavailable, "speech recognition is not available (asr.model not loaded: agentctl doctor); text turns still work"))
		return
	}
	samples, err := audio.PCM16ToFloat32(pcm)
	if err != nil { // cannot happen: pcm is even
		c.sendLast(gen, errorFrame(CodeBadAudio, err.Error()))
		return
	}
	if c.rate != asr.SampleRate {
		samples = audio.Resample(samples, c.rate, asr.SampleRate)
	}
	c.transcribe(ctx, gen, rec, samples)
}

// transcribe recognises 16 kHz samples and runs the transcript's turn.
func (c *conn) transcribe(ctx context.Context, gen uint64, rec Recognizer, samples []float32) {
	res, err := rec.Transcribe(ctx, samples)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		code := CodeASRFailed
		switch {
		case errors.Is(err, asr.ErrBadAudio):
			code = CodeBadAudio
		case errors.Is(err, asr.ErrClosed), errors.Is(err, asr.ErrNotBuilt):
			code = CodeASRUnavailable
		}
		c.log.Warn("voice recognition failed", "err", err)
		c.sendLast(gen, errorFrame(code, err.Error()))
		return
	}
	text := strings.TrimSpace(res.Text)
	c.log.Debug("voice transcript", "audio", res.AudioDuration, "elapsed", res.Elapsed, "chars", len(text))
	if text == "" {
		c.sendLast(gen, transcript(text, true))
		return
	}
	if !c.sendJob(gen, transcript(text, true)) {
		return
	}
	c.turn(ctx, gen, text)
}

// turn runs text through the conversation and streams the reply: text
// fragments and notices as final:false pieces, then the whole reply as
// the final one.
func (c *conn) turn(ctx context.Context, gen uint64, text string) {
	conv := c.s.cfg.Turns
	if conv == nil || conv.Err() != nil {
		c.sendLast(gen, errorFrame(CodeLLMUnavailable, "the conversation pipeline is not running (agentctl doctor)"))
		return
	}
	in := c.in
	in.Text = text
	var mu sync.Mutex
	var last string
	var have bool
	rep := func(_ context.Context, t string) error {
		mu.Lock()
		prev, had := last, have
		last, have = t, true
		mu.Unlock()
		if had && !c.sendJob(gen, reply(prev, false)) {
			return errGone
		}
		return nil
	}
	c.mu.Lock()
	if c.gen == gen {
		c.turnIn = &in
	}
	c.mu.Unlock()
	done, err := conv.Handle(ctx, in, turn.Sink{Reply: rep, Stream: func(fragment string) { c.sendJob(gen, reply(fragment, false)) }})
	if err == nil && !c.current(gen) {
		conv.Cancel(in) // cancelled while it was being submitted
	}
	mu.Lock()
	told := have
	mu.Unlock()
	switch {
	case err != nil && !told:
		c.log.Warn("voice turn not started", "err", err)
		c.sendLast(gen, errorFrame(CodeLLMUnavailable, "the turn could not start: "+err.Error()))
		return
	case err == nil:
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
	}
	mu.Lock()
	final := last
	mu.Unlock()
	if !c.tts || strings.TrimSpace(final) == "" {
		c.sendLast(gen, reply(final, true))
		return
	}
	// A spoken reply follows: the turn lasts until its audio is sent.
	if c.sendJob(gen, reply(final, true)) {
		c.speak(ctx, gen, final)
	}
}

func (c *conn) current(gen uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen == gen
}

// clip shortens client-supplied strings for messages and logs.
func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// encodedAudio collects a frame of a compressed utterance (hello "format").
func (c *conn) encodedAudio(data []byte) {
	if c.isBusy() {
		if !c.busyNoted {
			c.busyNoted = true
			c.fail(CodeBusy, "a turn is in flight on this connection: audio is ignored until its final reply (or send cancel)")
		}
		return
	}
	c.busyNoted = false
	if c.overflow {
		return
	}
	if len(c.pcm)+len(data) > c.s.lim.MaxEncoded {
		c.pcm, c.overflow = nil, true
		c.fail(CodeTooLong, fmt.Sprintf("utterance over %d bytes of %s: dropped (send end, then speak again)", c.s.lim.MaxEncoded, "encoded audio"))
		return
	}
	c.pcm = append(c.pcm, data...)
}

// endEncoded decodes the collected compressed utterance and recognises it.
func (c *conn) endEncoded() {
	data := c.pcm
	c.pcm = nil
	if c.overflow {
		c.overflow = false
		return
	}
	if len(data) == 0 {
		if !c.isBusy() {
			c.send(transcript("", true))
		}
		return
	}
	job := func(ctx context.Context, gen uint64) {
		rec := c.s.cfg.ASR()
		if rec == nil {
			c.sendLast(gen, errorFrame(CodeASRUnavailable, "speech recognition is not available (asr.model not loaded: agentctl doctor); text turns still work"))
			return
		}
		samples, err := audio.Decode(ctx, data, audio.DecodeConfig{Rate: asr.SampleRate, Max: c.s.lim.MaxUtterance, FFmpeg: c.s.cfg.FFmpeg})
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, audio.ErrUndecodable):
			c.sendLast(gen, errorFrame(CodeBadAudio, "the utterance could not be decoded as audio"))
			return
		case err != nil:
			c.log.Warn("voice audio not decoded", "err", err)
			c.sendLast(gen, errorFrame(CodeASRUnavailable, "compressed audio cannot be decoded here (ffmpeg); send pcm_s16le"))
			return
		}
		c.transcribe(ctx, gen, rec, samples)
	}
	if !c.start(job) {
		c.fail(CodeBusy, "a turn is in flight on this connection: the utterance was dropped")
		return
	}
	c.s.utterances.Add(1)
}

// badNameRune: a control or invisible formatting character (Cc, Cf).
func badNameRune(r rune) bool { return unicode.IsControl(r) || unicode.In(r, unicode.Cf) }
