// Package wecomtest is a fake WeCom API server and callback builder for
// tests: gettoken, message/send, media/upload and media/get behave like the
// real endpoints (error codes included), and faults can be queued.
//
// message/send implements WeCom's duplicate check as documented for
// "send application message" (enable_duplicate_check,
// duplicate_check_interval): with enable_duplicate_check=1, a request whose
// JSON is the same as one accepted within duplicate_check_interval seconds
// (default 1800, at most 4 hours) is not delivered again. The documentation
// compares the request JSON, so the fake compares the whole body (decoded
// and re-encoded, so key order and spacing do not matter), check fields
// included. It does not say what such a request is answered; the fake
// answers errcode 0 "ok" with the first delivery's msgid, and records the
// request in Dropped instead of Messages.
package wecomtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"agent/pkg/wecom"
)

// Endpoints, for FailNext and FailStatusNext.
const (
	EndpointToken  = "gettoken"
	EndpointSend   = "message/send"
	EndpointUpload = "media/upload"
	EndpointGet    = "media/get"
)

// Error codes the fake answers with, as the real API does.
const (
	CodeInvalidCredential = 40001
	CodeInvalidMediaType  = 40004
	CodeInvalidFileSize   = 40006
	CodeInvalidMediaID    = 40007
	CodeInvalidMsgType    = 40008
	CodeInvalidImageSize  = 40009
	CodeInvalidVoiceSize  = 40010
	CodeInvalidVideoSize  = 40011
	CodeInvalidCorpID     = 40013
	CodeInvalidToken      = 40014
	CodeInvalidAgentID    = 40056
	CodeInvalidParameter  = 40058
	CodeMissingToken      = 41001
	CodeTokenExpired      = 42001
	CodeEmptyMedia        = 44001
	CodeEmptyContent      = 44004
	CodeContentTooLong    = 45002
	CodeFreqLimit         = 45009
	CodeTooConcurrent     = 45033
	CodeInvalidUser       = 81013
)

// Sent is one message the fake accepted, in arrival order.
type Sent struct {
	ToUser      string
	MsgType     string
	AgentID     int64
	Content     string // text and markdown
	MediaID     string // image, voice, video, file
	Title       string // video
	Description string // video
	Articles    []wecom.Article
	Raw         json.RawMessage
}

// Media is stored media.
type Media struct {
	Kind        string
	Filename    string
	ContentType string
	Data        []byte
}

type fault struct {
	code, status int
	msg          string
}

// Duplicate check bounds (documented).
const (
	DefaultDuplicateCheckInterval = 1800 * time.Second
	MaxDuplicateCheckInterval     = 4 * time.Hour
)

// accepted is a delivered request, for the duplicate check.
type accepted struct {
	at    time.Time
	msgID string
}

// Delivery names what a user sees: the recipient, the type and the content
// (text and markdown: the text; image, voice, video, file: the media id;
// news: each article's title and url).
type Delivery struct {
	ToUser, MsgType, Content string
}

// Delivery is what the user sees of m.
func (m Sent) Delivery() Delivery {
	d := Delivery{ToUser: m.ToUser, MsgType: m.MsgType, Content: m.Content}
	switch {
	case m.MediaID != "":
		d.Content = m.MediaID
	case len(m.Articles) > 0:
		var b strings.Builder
		for _, a := range m.Articles {
			b.WriteString(a.Title + "\n" + a.URL + "\n")
		}
		d.Content = b.String()
	}
	return d
}

// Server is a fake WeCom API. Create it with NewServer, Close it when done.
type Server struct {
	URL        string
	CorpID     string
	CorpSecret string
	AgentID    int64

	srv *httptest.Server

	mu         sync.Mutex
	expiresIn  int
	tokens     map[string]bool // token -> expired
	tokenCalls int
	faults     map[string][]fault
	sent       []Sent
	dropped    []Sent
	seen       map[string]accepted // canonical request JSON -> last delivery
	now        func() time.Time
	sendDelay  time.Duration
	loseAnswer int
	media      map[string]Media
	nextMedia  int
}

// NewServer starts a fake API that accepts corpID/corpSecret and messages
// for agentID (any agent when 0). Tokens live 7200 s unless changed.
func NewServer(corpID, corpSecret string, agentID int64) *Server {
	s := &Server{
		CorpID:     corpID,
		CorpSecret: corpSecret,
		AgentID:    agentID,
		expiresIn:  7200,
		tokens:     make(map[string]bool),
		faults:     make(map[string][]fault),
		seen:       make(map[string]accepted),
		now:        time.Now,
		media:      make(map[string]Media),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /cgi-bin/gettoken", s.getToken)
	mux.HandleFunc("POST /cgi-bin/message/send", s.authed(EndpointSend, s.send))
	mux.HandleFunc("POST /cgi-bin/media/upload", s.authed(EndpointUpload, s.upload))
	mux.HandleFunc("GET /cgi-bin/media/get", s.authed(EndpointGet, s.get))
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	return s
}

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

// HTTPClient is an HTTP client for the server.
func (s *Server) HTTPClient() *http.Client { return s.srv.Client() }

// NewClient returns a wecom.Client for this server that never sleeps
// between retries.
func (s *Server) NewClient() *wecom.Client {
	return &wecom.Client{
		BaseURL:    s.URL,
		CorpID:     s.CorpID,
		CorpSecret: s.CorpSecret,
		AgentID:    s.AgentID,
		HTTP:       s.HTTPClient(),
		Sleep:      func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	}
}

// SetExpiresIn sets expires_in (seconds) for tokens issued from now on.
func (s *Server) SetExpiresIn(sec int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expiresIn = sec
}

// ExpireTokens expires every token issued so far; using one answers 42001.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t := range s.tokens {
		s.tokens[t] = true
	}
}

// FailNext makes the next n calls to endpoint answer errcode code (after
// the token check, for endpoints that need one).
func (s *Server) FailNext(endpoint string, code, n int) {
	s.queue(endpoint, fault{code: code}, n)
}

// FailStatusNext makes the next n calls to endpoint answer HTTP status.
func (s *Server) FailStatusNext(endpoint string, status, n int) {
	s.queue(endpoint, fault{status: status}, n)
}

// FailNextWith is FailNext with errmsg as the answer's errmsg (an API that
// echoes a secret, say).
func (s *Server) FailNextWith(endpoint string, code int, errmsg string, n int) {
	s.queue(endpoint, fault{code: code, msg: errmsg}, n)
}

// SetClock sets the clock the duplicate check reads (time.Now by default).
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// SetSendDelay makes message/send hold its answer for d after it has
// accepted (delivered) a message: a slow API, with sends in flight that
// already reached the user. The wait ends early when the caller goes away.
func (s *Server) SetSendDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sendDelay = d
}

// LoseAnswerNext makes the next n message/send calls that deliver a message
// answer HTTP 502 instead of the result: the message reached the user, the
// caller cannot know it (a gateway timeout, a connection cut).
func (s *Server) LoseAnswerNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loseAnswer += n
}

// Dropped returns the requests the duplicate check did not deliver, in
// order.
func (s *Server) Dropped() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.dropped...)
}

// Deliveries counts the accepted messages by what the user sees; a count
// above 1 is a message the user received more than once.
func (s *Server) Deliveries() map[Delivery]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Delivery]int)
	for _, m := range s.sent {
		out[m.Delivery()]++
	}
	return out
}

// Delivered counts the text or markdown messages toUser received with
// exactly content.
func (s *Server) Delivered(toUser, content string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.sent {
		if m.ToUser == toUser && m.Content == content && (m.MsgType == "text" || m.MsgType == "markdown") {
			n++
		}
	}
	return n
}

func (s *Server) queue(endpoint string, f fault, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults[endpoint] = append(s.faults[endpoint], f)
	}
}

// Messages returns the accepted messages in order.
func (s *Server) Messages() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.sent...)
}

// TokenRequests counts gettoken calls, failed ones included.
func (s *Server) TokenRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokenCalls
}

// PutMedia preloads media that media/get serves and message/send accepts.
func (s *Server) PutMedia(id string, m Media) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.Data = append([]byte(nil), m.Data...)
	s.media[id] = m
}

// Media returns stored (uploaded or preloaded) media.
func (s *Server) Media(id string) (Media, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.media[id]
	return m, ok
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, map[string]any{"errcode": code, "errmsg": msg})
}

// takeFault pops the next queued fault for endpoint and answers it.
func (s *Server) takeFault(w http.ResponseWriter, endpoint string) bool {
	s.mu.Lock()
	q := s.faults[endpoint]
	if len(q) == 0 {
		s.mu.Unlock()
		return false
	}
	f := q[0]
	s.faults[endpoint] = q[1:]
	s.mu.Unlock()
	if f.status != 0 {
		http.Error(w, http.StatusText(f.status), f.status)
		return true
	}
	msg := f.msg
	if msg == "" {
		msg = fmt.Sprintf("injected fault %d", f.code)
	}
	writeErr(w, f.code, msg)
	return true
}

func (s *Server) getToken(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.tokenCalls++
	s.mu.Unlock()
	if s.takeFault(w, EndpointToken) {
		return
	}
	q := r.URL.Query()
	if q.Get("corpid") != s.CorpID {
		writeErr(w, CodeInvalidCorpID, "invalid corpid")
		return
	}
	if q.Get("corpsecret") != s.CorpSecret {
		writeErr(w, CodeInvalidCredential, "invalid credential")
		return
	}
	b := make([]byte, 24)
	rand.Read(b)
	tok := hex.EncodeToString(b)
	s.mu.Lock()
	s.tokens[tok] = false
	exp := s.expiresIn
	s.mu.Unlock()
	writeJSON(w, map[string]any{"errcode": 0, "errmsg": "ok", "access_token": tok, "expires_in": exp})
}

func (s *Server) authed(endpoint string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok := r.URL.Query().Get("access_token")
		if tok == "" {
			writeErr(w, CodeMissingToken, "access_token missing")
			return
		}
		s.mu.Lock()
		expired, ok := s.tokens[tok]
		s.mu.Unlock()
		switch {
		case !ok:
			writeErr(w, CodeInvalidToken, "invalid access_token")
			return
		case expired:
			writeErr(w, CodeTokenExpired, "access_token expired")
			return
		}
		if s.takeFault(w, endpoint) {
			return
		}
		h(w, r)
	}
}

type sendBody struct {
	ToUser                 string                    `json:"touser"`
	MsgType                string                    `json:"msgtype"`
	AgentID                int64                     `json:"agentid"`
	EnableDuplicateCheck   int                       `json:"enable_duplicate_check"`
	DuplicateCheckInterval int64                     `json:"duplicate_check_interval"`
	Text                   *struct{ Content string } `json:"text"`
	Markdown               *struct{ Content string } `json:"markdown"`
	Image                  *mediaRef                 `json:"image"`
	Voice                  *mediaRef                 `json:"voice"`
	Video                  *mediaRef                 `json:"video"`
	File                   *mediaRef                 `json:"file"`
	News                   *struct {
		Articles []wecom.Article `json:"articles"`
	} `json:"news"`
}

type mediaRef struct {
	MediaID     string `json:"media_id"`
	Title       string `json:"title"`
	Description string `json:"description"`
}

func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeErr(w, CodeInvalidParameter, "read body")
		return
	}
	var b sendBody
	if err := json.Unmarshal(raw, &b); err != nil {
		writeErr(w, CodeInvalidParameter, "invalid json")
		return
	}
	if s.AgentID != 0 && b.AgentID != s.AgentID {
		writeErr(w, CodeInvalidAgentID, "invalid agentid")
		return
	}
	if b.ToUser == "" {
		writeErr(w, CodeInvalidUser, "all touser invalid")
		return
	}
	m := Sent{ToUser: b.ToUser, MsgType: b.MsgType, AgentID: b.AgentID, Raw: raw}
	var ref *mediaRef
	switch b.MsgType {
	case "text", "markdown":
		c := b.Text
		if b.MsgType == "markdown" {
			c = b.Markdown
		}
		if c == nil || c.Content == "" {
			writeErr(w, CodeEmptyContent, "empty content")
			return
		}
		if len(c.Content) > wecom.MaxTextBytes {
			writeErr(w, CodeContentTooLong, "content size out of limit")
			return
		}
		m.Content = c.Content
	case "image":
		ref = b.Image
	case "voice":
		ref = b.Voice
	case "video":
		ref = b.Video
	case "file":
		ref = b.File
	case "news":
		if b.News == nil || len(b.News.Articles) == 0 || len(b.News.Articles) > 8 {
			writeErr(w, CodeInvalidParameter, "invalid articles")
			return
		}
		m.Articles = b.News.Articles
	default:
		writeErr(w, CodeInvalidMsgType, "invalid message type")
		return
	}
	switch b.MsgType {
	case "image", "voice", "video", "file":
		if ref == nil {
			writeErr(w, CodeInvalidMediaID, "invalid media_id")
			return
		}
		if _, ok := s.Media(ref.MediaID); !ok {
			writeErr(w, CodeInvalidMediaID, "invalid media_id")
			return
		}
		m.MediaID, m.Title, m.Description = ref.MediaID, ref.Title, ref.Description
	}
	key := canonical(raw)
	s.mu.Lock()
	now := s.now()
	if b.EnableDuplicateCheck == 1 {
		interval := DefaultDuplicateCheckInterval
		if b.DuplicateCheckInterval > 0 {
			interval = min(time.Duration(b.DuplicateCheckInterval)*time.Second, MaxDuplicateCheckInterval)
		}
		if prev, ok := s.seen[key]; ok && now.Sub(prev.at) < interval {
			s.dropped = append(s.dropped, m)
			s.mu.Unlock()
			writeJSON(w, map[string]any{"errcode": 0, "errmsg": "ok", "invaliduser": "", "msgid": prev.msgID})
			return
		}
	}
	s.sent = append(s.sent, m)
	msgID := "MSG" + strconv.Itoa(len(s.sent))
	s.seen[key] = accepted{at: now, msgID: msgID}
	delay, lose := s.sendDelay, s.loseAnswer > 0
	if lose {
		s.loseAnswer--
	}
	s.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if lose {
		http.Error(w, http.StatusText(http.StatusBadGateway), http.StatusBadGateway)
		return
	}
	writeJSON(w, map[string]any{"errcode": 0, "errmsg": "ok", "invaliduser": "", "msgid": msgID})
}

// canonical re-encodes a JSON body with sorted keys and no spacing, so two
// requests with the same JSON compare equal as strings.
func canonical(raw []byte) string {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(b)
}

// uploadLimit mirrors WeCom's size limit per kind and the code a breach
// answers.
func uploadLimit(kind string) (max int64, code int, ok bool) {
	switch kind {
	case "image":
		return 10 << 20, CodeInvalidImageSize, true
	case "voice":
		return 2 << 20, CodeInvalidVoiceSize, true
	case "video":
		return 10 << 20, CodeInvalidVideoSize, true
	case "file":
		return 20 << 20, CodeInvalidFileSize, true
	}
	return 0, 0, false
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	kind := r.URL.Query().Get("type")
	limit, tooBig, ok := uploadLimit(kind)
	if !ok {
		writeErr(w, CodeInvalidMediaType, "invalid media type")
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		writeErr(w, CodeEmptyMedia, "empty media data")
		return
	}
	for {
		part, err := mr.NextPart()
		if err != nil {
			writeErr(w, CodeEmptyMedia, "empty media data")
			return
		}
		if part.FormName() != "media" {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(part, limit+1))
		if err != nil {
			writeErr(w, CodeEmptyMedia, "read media: "+err.Error())
			return
		}
		if int64(len(data)) > limit {
			writeErr(w, tooBig, "media size out of limit")
			return
		}
		if len(data) < wecom.MinMediaBytes {
			writeErr(w, CodeInvalidFileSize, "invalid file size")
			return
		}
		ct := mime.TypeByExtension(extOf(part.FileName()))
		if ct == "" {
			ct = "application/octet-stream"
		}
		s.mu.Lock()
		s.nextMedia++
		id := fmt.Sprintf("MEDIA_%s_%d", kind, s.nextMedia)
		s.media[id] = Media{Kind: kind, Filename: part.FileName(), ContentType: ct, Data: data}
		s.mu.Unlock()
		writeJSON(w, map[string]any{"errcode": 0, "errmsg": "ok", "type": kind, "media_id": id,
			"created_at": strconv.FormatInt(time.Now().Unix(), 10)})
		return
	}
}

func extOf(name string) string {
	for i := len(name) - 1; i >= 0 && name[i] != '/'; i-- {
		if name[i] == '.' {
			return name[i:]
		}
	}
	return ""
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	m, ok := s.Media(r.URL.Query().Get("media_id"))
	if !ok {
		writeErr(w, CodeInvalidMediaID, "invalid media_id")
		return
	}
	ct := m.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": m.Filename}))
	w.Header().Set("Content-Length", strconv.Itoa(len(m.Data)))
	w.Write(m.Data)
}
