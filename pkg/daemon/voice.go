package daemon

import (
	"context"
	"net/http"

	"agent/pkg/asr"
	"agent/pkg/channel/voice"
	"agent/pkg/console"
	"agent/pkg/conversation"
)

// recognizerSource is what the local models offer the voice channel
// (localmodels.Set); the recogniser is nil until loaded.
type recognizerSource interface {
	Recognizer() *asr.Recognizer
}

// voiceRoutes registers the web console at / and, when voice.enabled, the
// agent.voice.v1 WebSocket at /voice.
func (d *Daemon) voiceRoutes(mux *http.ServeMux) {
	mux.Handle("GET /{$}", console.Handler())
	cfg := d.config()
	if !cfg.Voice.Enabled {
		return
	}
	vc := voice.Config{
		Token:        func() string { return d.config().Voice.Token },
		AllowNoToken: cfg.ListenIsLoopback(),
		ASR:          d.voiceRecognizer,
		Logger:       d.logger.With("component", "voice"),
	}
	if d.brain != nil {
		vc.Conversation = d.brain.conv
		runner := d.brain.runner
		vc.Cancel = func(in conversation.Inbound) {
			if key, err := conversation.Key(in); err == nil {
				runner.Cancel(string(key))
			}
		}
	}
	d.voice = voice.New(vc)
	mux.Handle("GET /voice", d.voice)
}

// voiceRecognizer is the loaded speech recogniser, or nil.
func (d *Daemon) voiceRecognizer() voice.Recognizer {
	src, ok := d.opts.Models.(recognizerSource)
	if !ok {
		return nil
	}
	if r := src.Recognizer(); r != nil {
		return r
	}
	return nil
}

// stopVoice disconnects the voice clients (their turns in flight are
// cancelled with the connection); hijacked connections are not closed by
// the HTTP server's Shutdown.
func (d *Daemon) stopVoice(ctx context.Context) {
	if d.voice == nil {
		return
	}
	if err := d.voice.Close(ctx); err != nil {
		d.logger.Warn("voice connections did not close in time", "err", err)
	}
}
