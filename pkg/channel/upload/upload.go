// Package upload keeps what a user sends on a chat channel (pictures,
// voice messages, videos, files) in that user's own folder and says what
// the model is told about it. Both WeCom channels use it: the app callback
// downloads media by id, the AI Bot decrypts them from a URL; what happens
// to the bytes afterwards is the same, so a user gets the same answer on
// either.
package upload

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"agent/pkg/clip"
	"agent/pkg/turn"
	"agent/pkg/workspace"
)

// Kinds of inbound media (WeCom's msgtype values).
const (
	Image = "image"
	Voice = "voice"
	Video = "video"
	File  = "file"
)

// Limits on inbound media.
const (
	MaxImageBytes  = 10 << 20 // WeCom's picture limit
	MaxVisionBytes = 5 << 20  // larger pictures are kept but not shown to the model
	MaxVisionParts = 4        // pictures of one turn shown to the model
	MaxVoiceBytes  = 4 << 20  // WeCom voice is at most 60 s of AMR/speex (2 MB)
	MaxFileBytes   = 20 << 20 // files and videos
)

// Limit is the largest media of kind accepted.
func Limit(kind string) int64 {
	switch kind {
	case Image:
		return MaxImageBytes
	case Voice:
		return MaxVoiceBytes
	}
	return MaxFileBytes
}

// What names kind for a user.
func What(kind string) string {
	switch kind {
	case Image:
		return "picture"
	case Voice:
		return "voice message"
	case Video:
		return "video"
	}
	return "file"
}

// Store saves what a user sent in their own folder, within its quota
// (*workspace.Spaces).
type Store interface {
	SaveUpload(scope, name string, data []byte) (string, error)
}

// Result is what one inbound media contributes to a turn.
type Result struct {
	Text   string           // for the model; "" adds nothing
	Image  *turn.Attachment // a picture for a vision model (with its bytes)
	Notice string           // a reply to the user (a failure), sent before the turn's replies
	// Note marks text that is only context (a failure the user was told
	// about): it does not make a turn on its own.
	Note bool
	// Path is where the media was saved, as the user's tools know it
	// ("" when it was not).
	Path string
}

// Media describes one inbound media.
type Media struct {
	Kind     string
	MsgID    string    // the channel's message id ("" when none)
	Part     int       // which media of the message (a mixed one has several)
	Row      int64     // the inbox row (names the file when there is no message id)
	Received time.Time // dates the file name
	FileName string    // the sender's name for a file; only its extension is used
	Format   string    // a voice message's format (amr, speex)
}

// Keeper saves media and describes them.
type Keeper struct {
	Store Store
	// Vision reports whether pictures go to the model as image content
	// (llm.vision); nil means no.
	Vision func() bool
	Logger *slog.Logger
}

// Keep stores data as uploads/<date>-<msgid><ext> in scope's folder and
// says what the model is told: images is how many pictures the turn
// already shows. Neither the sender, the message id nor a file name
// chooses where it lands. A voice message is only saved (Path): the
// caller transcribes it.
func (k Keeper) Keep(scope string, m Media, data []byte, images int) Result {
	what := What(m.Kind)
	name := FileName(m, Ext(m.Kind, m.FileName, m.Format, data))
	rel, err := k.Store.SaveUpload(scope, name, data)
	if err != nil {
		if errors.Is(err, workspace.ErrQuota) {
			k.log().Warn("media not saved: the user's folder is full", "scope", scope, "type", m.Kind, "err", err)
			return Result{
				Text:   fmt.Sprintf("[The user sent a %s that could not be saved: their folder is full.]", what),
				Note:   true,
				Notice: fmt.Sprintf("I could not keep your %s: your folder is full (%s). Ask me to delete files you no longer need, then send it again.", what, err),
			}
		}
		k.log().Error("media not saved", "scope", scope, "type", m.Kind, "err", err)
		return Result{
			Text:   fmt.Sprintf("[The user sent a %s that could not be saved.]", what),
			Note:   true,
			Notice: fmt.Sprintf("I could not store your %s (a problem on my side); please send it again later.", what),
		}
	}
	switch m.Kind {
	case Image:
		res := Result{Text: fmt.Sprintf("[image saved to %s]", rel), Path: rel}
		if k.Vision != nil && k.Vision() && images < MaxVisionParts && len(data) <= MaxVisionBytes {
			res.Image = &turn.Attachment{Kind: Image, MIME: ImageMIME(data), Path: rel, Data: data, Size: int64(len(data))}
			res.Text = fmt.Sprintf("[The user sent a picture (attached); saved to %s]", rel)
		}
		return res
	case Voice:
		return Result{Path: rel}
	case Video:
		return Result{Path: rel, Text: fmt.Sprintf("[The user sent a video (%s), saved to %s; trim_video and add_bgm can edit it]", SizeText(len(data)), rel)}
	}
	return Result{Path: rel, Text: fmt.Sprintf("[The user sent a file %q (%s), saved to %s; read_document reads it (PDF, Word, Excel, PowerPoint, CSV, HTML, text)]",
		Clean(m.FileName, 128), SizeText(len(data)), rel)}
}

// NotDownloaded is the Result for media that could not be fetched;
// tooLarge says it was over Limit.
func NotDownloaded(kind string, tooLarge bool) Result {
	what := What(kind)
	reason := "the download failed"
	if tooLarge {
		reason = fmt.Sprintf("it is larger than the %d MB I accept", Limit(kind)>>20)
	}
	return Result{
		Text:   fmt.Sprintf("[The user sent a %s that could not be downloaded.]", what),
		Note:   true,
		Notice: fmt.Sprintf("I could not get your %s (%s); please send it again.", what, reason),
	}
}

func (k Keeper) log() *slog.Logger {
	if k.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return k.Logger
}

// FileName is an upload's name: <date>-<msgid><ext> (-<part> before the
// extension for a message's second media on), or row<N> for the id when
// the message has none. A message id that is not already a safe name
// (base64 ids have '+' and '/', long ones are cut) gets a hash of the
// whole id, so two messages never share a name.
func FileName(m Media, ext string) string {
	id := SafeName(m.MsgID)
	if id != m.MsgID {
		h := sha256.Sum256([]byte(m.MsgID))
		id = strings.TrimRight(clip.Bytes(id, 40), ".") + "-" + hex.EncodeToString(h[:6])
	}
	if m.MsgID == "" {
		id = fmt.Sprintf("row%d", m.Row)
	}
	if m.Part > 0 {
		id += fmt.Sprintf("-%d", m.Part)
	}
	return m.Received.Format("20060102") + "-" + id + ext
}

// SafeName maps s to a file name of [A-Za-z0-9_.@-], at most 64 bytes,
// never "", "." or "..".
func SafeName(s string) string {
	var b strings.Builder
	for _, c := range s {
		if b.Len() >= 64 {
			break
		}
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '@', c == '.':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	out := strings.TrimLeft(b.String(), ".")
	if out == "" {
		return "_"
	}
	return out
}

// Ext picks the saved file's extension: from the content for pictures,
// the voice format, and for files a short alphanumeric extension of the
// sender's file name (else one sniffed from the content).
func Ext(kind, fileName, format string, data []byte) string {
	switch kind {
	case Image:
		switch ImageMIME(data) {
		case "image/png":
			return ".png"
		case "image/gif":
			return ".gif"
		case "image/webp":
			return ".webp"
		}
		return ".jpg"
	case Voice:
		if strings.EqualFold(format, "speex") {
			return ".spx"
		}
		return ".amr"
	case Video:
		return ".mp4"
	}
	ext := strings.ToLower(path.Ext(strings.ReplaceAll(fileName, `\`, "/")))
	if len(ext) >= 2 && len(ext) <= 9 && alnum(ext[1:]) {
		return ext
	}
	switch ct := http.DetectContentType(data); {
	case strings.HasPrefix(ct, "application/pdf"):
		return ".pdf"
	case strings.HasPrefix(ct, "text/plain"):
		return ".txt"
	case strings.HasPrefix(ct, "text/html"):
		return ".html"
	case strings.HasPrefix(ct, "image/png"):
		return ".png"
	case strings.HasPrefix(ct, "image/jpeg"):
		return ".jpg"
	}
	return ".bin"
}

func alnum(s string) bool {
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// ImageMIME sniffs a picture's type; JPEG when unknown.
func ImageMIME(data []byte) string {
	switch ct := http.DetectContentType(data); ct {
	case "image/png", "image/gif", "image/webp", "image/jpeg":
		return ct
	}
	return "image/jpeg"
}

// SizeText is n bytes for a person.
func SizeText(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Clean drops control characters and cuts s to n bytes (plus a "…" when
// cut: clip.String).
func Clean(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > n {
		s = clip.String(s, n)
	}
	return s
}
