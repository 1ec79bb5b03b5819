package wecom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"

	"agent/pkg/asr"
	"agent/pkg/audio"
	"agent/pkg/clip"
	"agent/pkg/llm"
	wx "agent/pkg/wecom"
	"agent/pkg/workspace"
)

// MediaGetter downloads inbound media (*wecom.Client).
type MediaGetter interface {
	GetMedia(ctx context.Context, mediaID string, maxBytes int64) (data []byte, contentType, filename string, err error)
}

// Recognizer transcribes 16 kHz mono speech (*asr.Recognizer).
type Recognizer interface {
	Transcribe(ctx context.Context, samples []float32) (asr.Result, error)
}

// Limits on inbound media.
const (
	maxImageBytes  = 10 << 20 // WeCom's image limit
	maxVisionBytes = 5 << 20  // larger pictures are saved but not shown to the model
	maxVisionParts = 4        // pictures of one turn shown to the model
	maxVoiceBytes  = 4 << 20  // WeCom voice is at most 60 s of AMR/speex (2 MB)
	maxFileBytes   = 20 << 20 // files and videos
	downloadTime   = time.Minute
)

// Uploads stores what a user sent in that user's own folder, within its
// quota (workspace.Spaces), and returns the path the user's file tools
// know it by.
type Uploads interface {
	SaveUpload(scope, name string, data []byte) (string, error)
}

// mediaResult is what one inbound media message contributes to a turn.
type mediaResult struct {
	text   string    // for the model; "" adds nothing
	image  *llm.Part // for a vision model
	notice string    // a reply to the user (a failure), sent before the turn's replies
	// note marks text that is only context (a failure the user was
	// told about): it does not make a turn on its own.
	note bool
}

// media downloads, stores and converts one media row. It never fails the
// turn: a failure becomes a notice to the user and a note to the model.
func (p *Processor) media(ctx context.Context, b *batch, r row, images int) mediaResult {
	var m wx.Message
	if err := json.Unmarshal([]byte(r.raw), &m); err != nil || m.MediaID == "" || p.cfg.Media == nil || p.cfg.Uploads == nil {
		// Not downloadable (no media id, or nowhere to keep it).
		return mediaResult{text: r.content}
	}
	kind, limit, what := r.msgType, int64(maxFileBytes), "file"
	switch kind {
	case wx.MsgImage:
		limit, what = maxImageBytes, "picture"
	case wx.MsgVoice:
		limit, what = maxVoiceBytes, "voice message"
	case wx.MsgVideo:
		what = "video"
	}
	dctx, cancel := context.WithTimeout(ctx, downloadTime)
	data, _, _, err := p.cfg.Media.GetMedia(dctx, m.MediaID, limit)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return mediaResult{}
		}
		p.logger.Warn("wecom media download failed", "sender", b.sender, "type", kind, "err", err)
		reason := "the download failed"
		if errors.Is(err, wx.ErrMediaSize) {
			reason = fmt.Sprintf("it is larger than the %d MB I accept", limit>>20)
		}
		return mediaResult{
			text:   fmt.Sprintf("[The user sent a %s that could not be downloaded.]", what),
			note:   true,
			notice: fmt.Sprintf("I could not get your %s (%s); please send it again.", what, reason),
		}
	}
	ext := mediaExt(kind, m, data)
	rel, err := p.saveUpload(b.sender, r, m.MsgID, ext, data)
	if err != nil && errors.Is(err, workspace.ErrQuota) {
		p.logger.Warn("wecom media not saved: the user's folder is full", "sender", b.sender, "type", kind, "err", err)
		return mediaResult{
			text:   fmt.Sprintf("[The user sent a %s that could not be saved: their folder is full.]", what),
			note:   true,
			notice: fmt.Sprintf("I could not keep your %s: your folder is full (%s). Ask me to delete files you no longer need, then send it again.", what, err),
		}
	}
	if err != nil {
		p.logger.Error("wecom media not saved", "sender", b.sender, "type", kind, "err", err)
		return mediaResult{
			text:   fmt.Sprintf("[The user sent a %s that could not be saved.]", what),
			note:   true,
			notice: fmt.Sprintf("I could not store your %s (a problem on my side); please send it again later.", what),
		}
	}
	switch kind {
	case wx.MsgImage:
		res := mediaResult{text: fmt.Sprintf("[image saved to %s]", rel)}
		if p.cfg.Vision != nil && p.cfg.Vision() && images < maxVisionParts && len(data) <= maxVisionBytes {
			part := llm.ImagePart(imageMIME(data), data)
			res.image = &part
			res.text = fmt.Sprintf("[The user sent a picture (attached); saved to %s]", rel)
		}
		return res
	case wx.MsgVoice:
		return p.transcribe(ctx, b, data, rel)
	case wx.MsgVideo:
		return mediaResult{text: fmt.Sprintf("[The user sent a video (%s), saved to %s; trim_video and add_bgm can edit it]", sizeText(len(data)), rel)}
	}
	return mediaResult{text: fmt.Sprintf("[The user sent a file %q (%s), saved to %s; read_document reads it (PDF, Word, Excel, PowerPoint, CSV, HTML, text)]",
		clean(m.FileName, 128), sizeText(len(data)), rel)}
}

// transcribe turns a voice message into text: audio.Decode (ffmpeg) makes
// it 16 kHz mono, the local whisper model transcribes it.
func (p *Processor) transcribe(ctx context.Context, b *batch, data []byte, rel string) mediaResult {
	var rec Recognizer
	if p.cfg.ASR != nil {
		rec = p.cfg.ASR()
	}
	if rec == nil {
		return mediaResult{
			text:   fmt.Sprintf("[The user sent a voice message (saved to %s) that could not be transcribed.]", rel),
			note:   true,
			notice: "I cannot listen to voice messages right now (speech recognition is not available on this agent); please type your message.",
		}
	}
	samples, err := audio.Decode(ctx, data, audio.DecodeConfig{Rate: asr.SampleRate, Max: asr.MaxAudio, FFmpeg: p.cfg.FFmpeg})
	if err != nil {
		if ctx.Err() != nil {
			return mediaResult{}
		}
		p.logger.Warn("wecom voice not decoded", "sender", b.sender, "err", err)
		return mediaResult{
			text:   fmt.Sprintf("[The user sent a voice message (saved to %s) that could not be decoded.]", rel),
			note:   true,
			notice: "I could not decode your voice message; please try again or type your message.",
		}
	}
	res, err := rec.Transcribe(ctx, samples)
	if err != nil {
		if ctx.Err() != nil {
			return mediaResult{}
		}
		p.logger.Warn("wecom voice not transcribed", "sender", b.sender, "err", err)
		return mediaResult{
			text:   fmt.Sprintf("[The user sent a voice message (saved to %s) that could not be transcribed.]", rel),
			note:   true,
			notice: "I could not transcribe your voice message; please try again or type your message.",
		}
	}
	text := strings.TrimSpace(res.Text)
	p.logger.Debug("wecom voice transcribed", "sender", b.sender, "audio", res.AudioDuration, "took", res.Elapsed, "chars", len(text))
	if text == "" {
		return mediaResult{notice: "I could not make out any words in your voice message; please try again or type your message."}
	}
	return mediaResult{text: "[voice message, transcribed] " + text}
}

// saveUpload stores data as uploads/<date>-<msgid><ext> in the sender's
// own folder (Uploads): neither the sender, the message id nor a WeCom
// file name can choose where. It returns the path the sender's file tools
// know it by.
func (p *Processor) saveUpload(sender string, r row, msgID, ext string, data []byte) (string, error) {
	id := safeName(msgID)
	if msgID == "" {
		id = fmt.Sprintf("row%d", r.id)
	}
	return p.cfg.Uploads.SaveUpload(Channel+":"+sender, r.received.Format("20060102")+"-"+id+ext, data)
}

// safeName maps s to a file name of [A-Za-z0-9_.@-], at most 64 bytes,
// never "", "." or "..".
func safeName(s string) string {
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

// mediaExt picks the saved file's extension: from the content for
// pictures, the voice format, and for files only a short alphanumeric
// extension of the sender's file name.
func mediaExt(kind string, m wx.Message, data []byte) string {
	switch kind {
	case wx.MsgImage:
		switch imageMIME(data) {
		case "image/png":
			return ".png"
		case "image/gif":
			return ".gif"
		case "image/webp":
			return ".webp"
		}
		return ".jpg"
	case wx.MsgVoice:
		if strings.EqualFold(m.Format, "speex") {
			return ".spx"
		}
		return ".amr"
	case wx.MsgVideo:
		return ".mp4"
	}
	ext := strings.ToLower(path.Ext(strings.ReplaceAll(m.FileName, `\`, "/")))
	if len(ext) < 2 || len(ext) > 9 {
		return ".bin"
	}
	for _, c := range ext[1:] {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return ".bin"
		}
	}
	return ext
}

// imageMIME sniffs a picture's type; JPEG when unknown.
func imageMIME(data []byte) string {
	switch ct := http.DetectContentType(data); ct {
	case "image/png", "image/gif", "image/webp", "image/jpeg":
		return ct
	}
	return "image/jpeg"
}

func sizeText(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// clean drops control characters and cuts s to n bytes.
func clean(s string, n int) string {
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
