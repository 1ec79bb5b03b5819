package wecom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"agent/pkg/asr"
	"agent/pkg/audio"
	"agent/pkg/channel/upload"
	wx "agent/pkg/wecom"
)

// MediaGetter downloads inbound media (*wecom.Client).
type MediaGetter interface {
	GetMedia(ctx context.Context, mediaID string, maxBytes int64) (data []byte, contentType, filename string, err error)
}

// Recognizer transcribes 16 kHz mono speech (*asr.Recognizer).
type Recognizer interface {
	Transcribe(ctx context.Context, samples []float32) (asr.Result, error)
}

// downloadTime bounds one media download.
const downloadTime = time.Minute

// Uploads stores what a user sent in that user's own folder, within its
// quota (workspace.Spaces), and returns the path the user's file tools
// know it by.
type Uploads = upload.Store

// media downloads, stores and converts one media row. It never fails the
// turn: a failure becomes a notice to the user and a note to the model.
func (p *Processor) media(ctx context.Context, b *batch, r row, images int) upload.Result {
	var m wx.Message
	if err := json.Unmarshal([]byte(r.raw), &m); err != nil || m.MediaID == "" || p.cfg.Media == nil || p.cfg.Uploads == nil {
		// Not downloadable (no media id, or nowhere to keep it).
		return upload.Result{Text: r.content}
	}
	kind := r.msgType
	dctx, cancel := context.WithTimeout(ctx, downloadTime)
	data, _, _, err := p.cfg.Media.GetMedia(dctx, m.MediaID, upload.Limit(kind))
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return upload.Result{}
		}
		p.logger.Warn("wecom media download failed", "sender", b.sender, "type", kind, "err", err)
		return upload.NotDownloaded(kind, errors.Is(err, wx.ErrMediaSize))
	}
	keeper := upload.Keeper{Store: p.cfg.Uploads, Vision: p.cfg.Vision, Logger: p.logger}
	// Kept where the conversation's file tools look: the sender's folder,
	// or the group's for a group chat (workspace.Scope).
	owner := Channel + ":" + b.sender
	if b.chatID != "" {
		owner = "group:" + Channel + ":" + b.chatID
	}
	res := keeper.Keep(owner, upload.Media{Kind: kind, MsgID: m.MsgID, Row: r.id, Received: r.received,
		FileName: m.FileName, Format: m.Format}, data, images)
	if kind == wx.MsgVoice && res.Path != "" {
		return p.transcribe(ctx, b, data, res.Path)
	}
	return res
}

// transcribe turns a voice message into text: audio.Decode (ffmpeg) makes
// it 16 kHz mono, the local whisper model transcribes it.
func (p *Processor) transcribe(ctx context.Context, b *batch, data []byte, rel string) upload.Result {
	var rec Recognizer
	if p.cfg.ASR != nil {
		rec = p.cfg.ASR()
	}
	if rec == nil {
		return upload.Result{
			Text:   fmt.Sprintf("[The user sent a voice message (saved to %s) that could not be transcribed.]", rel),
			Note:   true,
			Notice: "I cannot listen to voice messages right now (speech recognition is not available on this agent); please type your message.",
		}
	}
	samples, err := audio.Decode(ctx, data, audio.DecodeConfig{Rate: asr.SampleRate, Max: asr.MaxAudio, FFmpeg: p.cfg.FFmpeg})
	if err != nil {
		if ctx.Err() != nil {
			return upload.Result{}
		}
		p.logger.Warn("wecom voice not decoded", "sender", b.sender, "err", err)
		return upload.Result{
			Text:   fmt.Sprintf("[The user sent a voice message (saved to %s) that could not be decoded.]", rel),
			Note:   true,
			Notice: "I could not decode your voice message; please try again or type your message.",
		}
	}
	res, err := rec.Transcribe(ctx, samples)
	if err != nil {
		if ctx.Err() != nil {
			return upload.Result{}
		}
		p.logger.Warn("wecom voice not transcribed", "sender", b.sender, "err", err)
		return upload.Result{
			Text:   fmt.Sprintf("[The user sent a voice message (saved to %s) that could not be transcribed.]", rel),
			Note:   true,
			Notice: "I could not transcribe your voice message; please try again or type your message.",
		}
	}
	text := strings.TrimSpace(res.Text)
	p.logger.Debug("wecom voice transcribed", "sender", b.sender, "audio", res.AudioDuration, "took", res.Elapsed, "chars", len(text))
	if text == "" {
		return upload.Result{Notice: "I could not make out any words in your voice message; please try again or type your message."}
	}
	return upload.Result{Text: "[voice message, transcribed] " + text}
}
