package wecom

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"agent/pkg/clip"
	"agent/pkg/clock"
	wx "agent/pkg/wecom"
)

// DefaultMaxSkew bounds how far a callback's timestamp may be from the
// local clock. WeCom retries within seconds; a larger gap is a replay (or a
// badly wrong clock, which the log names).
const DefaultMaxSkew = 5 * time.Minute

// persistTimeout bounds storing one message; WeCom gives up after 5 s.
const persistTimeout = 3 * time.Second

// Handler serves GET and POST /wecom/callback.
type Handler struct {
	Crypto  *wx.Crypto
	Inbox   *Inbox
	Clock   clock.Clock   // the wall clock when nil
	MaxSkew time.Duration // DefaultMaxSkew when zero
	Logger  *slog.Logger  // discarded when nil
	// Stored is called after a new message is persisted (wakes the
	// processor). It must not block.
	Stored func()
	// Fleet, on the ingress box of a fleet, persists each message to
	// the fleet's stream instead of the local inbox (pkg/fleet): the
	// conversation's home box takes it from there.
	Fleet Publisher
	// NotIngress: a box of a fleet that is not its ingress refuses
	// callbacks (WeCom's one callback URL belongs to the ingress).
	NotIngress bool
}

// Publisher persists a message to the fleet (*fleet.Fleet).
type Publisher interface {
	Publish(ctx context.Context, channel, conv, key string, payload []byte) (bool, error)
}

// FleetConversation is the fleet conversation a message belongs to: its
// group chat, or its sender.
func FleetConversation(m *wx.Message) string {
	if m.ChatID != "" {
		return GroupPrefix + m.ChatID
	}
	return m.FromUserName
}

// GroupPrefix marks a fleet conversation that is a group chat (as
// assistant.GroupPrefix).
const GroupPrefix = "group:"

func (h *Handler) clock() clock.Clock { return clock.Or(h.Clock) }

func (h *Handler) maxSkew() time.Duration {
	if h.MaxSkew > 0 {
		return h.MaxSkew
	}
	return DefaultMaxSkew
}

func (h *Handler) log() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.NotIngress {
		h.refuse(w, r, http.StatusServiceUnavailable, "this box is not the fleet's ingress (fleet.ingress = false): point WeCom's callback URL at the ingress box", nil)
		return
	}
	switch r.Method {
	case http.MethodGet:
		h.verify(w, r)
	case http.MethodPost:
		h.receive(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// verify answers WeCom's URL verification with the bare decrypted echostr.
// Like a POST, it is refused (403) when the signature is wrong or the
// timestamp is outside the skew window: a recorded verification cannot be
// replayed later to probe the key.
func (h *Handler) verify(w http.ResponseWriter, r *http.Request) {
	q, err := wx.ParseQuery(r.URL.RawQuery)
	if err != nil || q.MsgSignature == "" || q.EchoStr == "" {
		h.log().Warn("wecom url verification: bad query", "remote", r.RemoteAddr)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	plain, err := h.Crypto.VerifyURL(q.MsgSignature, q.Timestamp, q.Nonce, q.EchoStr)
	if err != nil {
		code := status(err)
		h.log().Warn("wecom url verification refused", "remote", r.RemoteAddr, "code", code, "err", err)
		http.Error(w, http.StatusText(code), code)
		return
	}
	// Checked after the signature (so a forged request is named as such),
	// before anything is answered.
	if err := wx.CheckTimestamp(q.Timestamp, h.clock().Now(), h.maxSkew()); err != nil {
		h.log().Warn("wecom url verification refused: timestamp out of range (replay, or is the clock wrong?)",
			"remote", r.RemoteAddr, "code", http.StatusForbidden, "err", err)
		http.Error(w, http.StatusText(http.StatusForbidden), http.StatusForbidden)
		return
	}
	h.log().Info("wecom url verification answered", "remote", r.RemoteAddr)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write(plain)
}

// receive checks, decrypts and persists a message, then acknowledges it.
func (h *Handler) receive(w http.ResponseWriter, r *http.Request) {
	q, err := wx.ParseQuery(r.URL.RawQuery)
	if err != nil || q.MsgSignature == "" {
		h.refuse(w, r, http.StatusBadRequest, "bad query", err)
		return
	}
	body, err := wx.ReadBody(http.MaxBytesReader(w, r.Body, wx.MaxBodyBytes+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.Is(err, wx.ErrTooLarge) || errors.As(err, &mbe) {
			h.refuse(w, r, http.StatusRequestEntityTooLarge, "body too large", err)
			return
		}
		h.refuse(w, r, http.StatusBadRequest, "read body", err)
		return
	}
	env, err := wx.ParseEnvelope(body)
	if err != nil {
		h.refuse(w, r, status(err), "bad envelope", err)
		return
	}
	// The signature before anything else, then the timestamp, then the
	// decryption (which checks the signature again; it is cheap).
	want := h.Crypto.Signature(q.Timestamp, q.Nonce, env.Encrypt)
	if subtle.ConstantTimeCompare([]byte(strings.ToLower(q.MsgSignature)), []byte(want)) != 1 {
		h.refuse(w, r, http.StatusForbidden, "bad signature", wx.ErrSignature)
		return
	}
	if err := wx.CheckTimestamp(q.Timestamp, h.clock().Now(), h.maxSkew()); err != nil {
		h.refuse(w, r, http.StatusForbidden, "timestamp out of range (replay, or is the clock wrong?)", err)
		return
	}
	m, err := h.Crypto.DecryptMessage(q.MsgSignature, q.Timestamp, q.Nonce, body)
	if err != nil {
		h.refuse(w, r, status(err), "cannot decrypt", err)
		return
	}
	if !Known(m.MsgType) {
		h.log().Warn("wecom message of unknown type ignored", "type", clip.String(m.MsgType, 32), "from", m.FromUserName)
		ack(w)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), persistTimeout)
	defer cancel()
	if h.Fleet != nil {
		h.publish(ctx, w, m)
		return
	}
	fresh, err := h.Inbox.Put(ctx, m)
	if err != nil {
		// No acknowledgement: WeCom retries, and the retry may succeed.
		h.log().Error("wecom message not stored; WeCom will retry", "key", m.DedupKey(), "err", err)
		http.Error(w, "temporarily unavailable", http.StatusServiceUnavailable)
		return
	}
	if !fresh {
		h.log().Debug("wecom duplicate acknowledged", "key", m.DedupKey())
		ack(w)
		return
	}
	h.log().Debug("wecom message stored", "key", m.DedupKey(), "type", m.MsgType, "from", m.FromUserName)
	ack(w)
	if h.Stored != nil {
		h.Stored()
	}
}

// publish persists m to the fleet's stream, then acknowledges it; when
// it cannot, WeCom is not acknowledged and retries (the ingress never
// answers a message it could not persist, and does not fall back to
// answering it here: its home may be another box).
func (h *Handler) publish(ctx context.Context, w http.ResponseWriter, m *wx.Message) {
	raw, err := json.Marshal(m)
	if err == nil {
		var fresh bool
		fresh, err = h.Fleet.Publish(ctx, Channel, FleetConversation(m), m.DedupKey(), raw)
		if err == nil {
			h.log().Debug("wecom message persisted to the fleet", "key", m.DedupKey(), "fresh", fresh)
			ack(w)
			return
		}
	}
	h.log().Error("wecom message not persisted to the fleet; WeCom will retry", "key", m.DedupKey(), "err", err)
	http.Error(w, "temporarily unavailable", http.StatusServiceUnavailable)
}

func ack(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("success"))
}

func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, code int, what string, err error) {
	h.log().Warn("wecom callback refused", "remote", r.RemoteAddr, "code", code, "reason", what, "err", err)
	http.Error(w, http.StatusText(code), code)
}

// status maps a protocol error to an HTTP status.
func status(err error) int {
	switch {
	case errors.Is(err, wx.ErrSignature), errors.Is(err, wx.ErrTimestamp):
		return http.StatusForbidden
	case errors.Is(err, wx.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}
