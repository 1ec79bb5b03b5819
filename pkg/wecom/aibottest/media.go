package aibottest

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"agent/pkg/wecom/aibot"
)

// mediaPath is where the server serves media, as WeCom's download
// servers do: each resource at its own URL, AES-encrypted with its own key.
const mediaPath = "/media/"

type served struct {
	data   []byte // encrypted
	name   string // Content-Disposition's filename, "" for none
	status int    // answer this instead (an expired URL)
	hits   int
}

// Serve makes plain downloadable at a new URL, encrypted with a new key
// (aibot.EncryptMedia), and returns both for a callback's resource. name,
// when set, is sent as the download's file name.
func (s *Server) Serve(plain []byte, name string) (url, aesKey string) {
	s.tb.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	aesKey = base64.StdEncoding.EncodeToString(key)
	enc, err := aibot.EncryptMedia(plain, aesKey)
	if err != nil {
		s.tb.Fatalf("aibottest: %v", err)
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	p := fmt.Sprintf("%s%x", mediaPath, id)
	s.mu.Lock()
	s.media[p] = &served{data: enc, name: name}
	s.mu.Unlock()
	return s.srv.URL + p, aesKey
}

// Expire makes url answer status from now on (WeCom's URLs last minutes).
func (s *Server) Expire(url string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.media[strings.TrimPrefix(url, s.srv.URL)]; m != nil {
		m.status = status
	}
}

// Downloads is how often url was fetched.
func (s *Server) Downloads(url string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.media[strings.TrimPrefix(url, s.srv.URL)]; m != nil {
		return m.hits
	}
	return 0
}

func (s *Server) serveMedia(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	m := s.media[r.URL.Path]
	if m != nil {
		m.hits++
	}
	var data []byte
	var name string
	status := http.StatusNotFound
	if m != nil {
		data, name, status = m.data, m.name, m.status
		if status == 0 {
			status = http.StatusOK
		}
	}
	s.mu.Unlock()
	if status != http.StatusOK {
		http.Error(w, http.StatusText(status), status)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if name != "" {
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	}
	_, _ = w.Write(data)
}

// Media sends a picture, file or video message (msgType image, file or
// video) whose resource is at url with aesKey, and returns its req_id.
func (s *Server) Media(msgID, user, chatType, chat, msgType, url, aesKey string) string {
	body := s.body(msgID, user, chatType, chat, msgType)
	body[msgType] = map[string]string{"url": url, "aeskey": aesKey}
	return s.Callback(aibot.CmdMsgCallback, body)
}

// Item is one part of a mixed message: Text, or a picture at URL.
type Item struct {
	Text        string
	URL, AESKey string
}

// Mixed sends a message of text and pictures and returns its req_id.
func (s *Server) Mixed(msgID, user, chatType, chat string, items ...Item) string {
	body := s.body(msgID, user, chatType, chat, "mixed")
	var list []map[string]any
	for _, it := range items {
		if it.URL != "" {
			list = append(list, map[string]any{"msgtype": "image", "image": map[string]string{"url": it.URL, "aeskey": it.AESKey}})
		} else {
			list = append(list, map[string]any{"msgtype": "text", "text": map[string]string{"content": it.Text}})
		}
	}
	body["mixed"] = map[string]any{"msg_item": list}
	return s.Callback(aibot.CmdMsgCallback, body)
}

func (s *Server) body(msgID, user, chatType, chat, msgType string) map[string]any {
	body := map[string]any{"msgid": msgID, "create_time": time.Now().Unix(), "aibotid": BotID, "chattype": chatType,
		"from": map[string]string{"userid": user}, "msgtype": msgType}
	if chat != "" {
		body["chatid"] = chat
	}
	return body
}
