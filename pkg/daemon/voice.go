package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"

	"agent/pkg/admin"
	"agent/pkg/asr"
	"agent/pkg/channel/gate"
	"agent/pkg/channel/voice"
	"agent/pkg/config"
	"agent/pkg/console"
	"agent/pkg/conversation"
	"agent/pkg/pairing"
	"agent/pkg/vad"
)

// recognizerSource is what the local models offer the voice channel
// (localmodels.Set); the recogniser is nil until loaded.
type recognizerSource interface {
	Recognizer() *asr.Recognizer
}

// vadSource offers the Silero VAD model (localmodels.Set); nil until
// loaded, and without one (voice.vad = "energy", or no model file).
type vadSource interface {
	VAD() *vad.Model
}

// consoleOperator is who the web console signed in with `agentctl console`
// speaks as: the operator's admin channel (agentctl send's), because the
// link came over the 0600 admin socket. Admitted without pairing.
var consoleOperator = voice.Identity{Channel: "admin", User: "console"}

// voiceRoutes registers the web console at / with its sign-in link at
// /console and, when voice.enabled, the agent.voice.v1 WebSocket at /voice.
func (d *Daemon) voiceRoutes(mux *http.ServeMux) {
	d.sessions = console.NewSessions(console.SessionConfig{Now: d.now, Logger: d.logger.With("component", "console")})
	mux.Handle("GET /{$}", console.Handler())
	mux.Handle("GET "+console.SignInPath, d.sessions.SignIn())
	cfg := d.config()
	if !cfg.Voice.Enabled {
		return
	}
	if cfg.Voice.Token == "" {
		d.logger.Info("voice.token is empty: no device can connect; the web console signs in with a link from agentctl console")
	}
	vc := voice.Config{
		// An empty voice.token admits no device; the console gets in
		// with its session (agentctl console), nothing else.
		Token:    func() string { return d.config().Voice.Token },
		Sessions: d.sessions,
		Operator: consoleOperator,
		ASR:      d.voiceRecognizer,
		Admit:    d.admitVoice,
		Defaults: func() voice.Defaults {
			v := d.config().Voice
			return voice.Defaults{Partials: v.PartialTranscripts, TTS: v.TTS, TTSVoice: v.TTSVoice}
		},
		Logger: d.logger.With("component", "voice"),
	}
	if src, ok := d.opts.Models.(vadSource); ok && cfg.Voice.VAD != config.VADEnergy {
		vc.VAD.Silero = src.VAD
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
	v := d.voice
	d.metrics.GaugeFunc("agent_voice_connections", "Open voice WebSocket connections.", nil, func() float64 { return float64(v.Stats().Connections) })
	d.metrics.GaugeFunc("agent_voice_utterances", "Utterances handed to speech recognition since start.", nil, func() float64 { return float64(v.Stats().Utterances) })
	d.metrics.GaugeFunc("agent_voice_partials", "Partial transcripts sent since start.", nil, func() float64 { return float64(v.Stats().Partials) })
	d.metrics.GaugeFunc("agent_voice_silero_connections", "Voice connections since start whose utterances end by the Silero VAD (the others: energy).", nil,
		func() float64 { return float64(v.Stats().Silero) })
	d.metrics.GaugeFunc("agent_asr_workers", "Speech recognition workers (decoding states); 0 while no model is loaded.", nil, func() float64 {
		if src, ok := d.opts.Models.(recognizerSource); ok {
			if r := src.Recognizer(); r != nil {
				return float64(r.Workers())
			}
		}
		return 0
	})
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

// admitVoice applies security.dm_policy, as configured now, to a voice
// device at its hello and before each of its turns. The names a hello
// gives ("voice:DEVICE", "voice:USER") are claims anyone holding the shared
// voice.token can make, so every one must be admitted (an approved device
// does not carry an unapproved user in with it, nor the reverse); under
// "pairing" the first one that is not gets a code for the operator to
// approve. A name listed in agent.owners is refused outright: owner rights
// cannot rest on a claim. The operator talks through the console
// (agentctl console) instead.
func (d *Daemon) admitVoice(ctx context.Context, principals []string) (voice.Admission, error) {
	dec, err := gate.Gate{Pairings: d.pairings(), Policy: d.dmPolicy}.Admit(ctx, nil, gate.Request{Principals: principals, RefuseOwnerClaims: true})
	switch {
	case err != nil:
		return voice.Admission{}, err
	case dec.OwnerClaim:
		d.logger.Warn("voice hello claims an owner's name; refused", "principal", dec.Principal)
		return voice.Admission{Reason: dec.Reason + " over voice.token (anyone holding the token could); " +
			"owners use the web console signed in with agentctl console"}, nil
	case dec.Verdict == pairing.Allow:
		return voice.Admission{Allowed: true}, nil
	case dec.Verdict == pairing.NewCode || dec.Verdict == pairing.Waiting:
		return voice.Admission{Code: dec.Code}, nil
	}
	return voice.Admission{}, nil
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

// ConsoleLink implements admin.ConsoleBackend: a one-time sign-in link for
// the web console on this agent's listen address (a wildcard listener is
// reached on loopback).
func (d *Daemon) ConsoleLink(context.Context) (admin.ConsoleLink, error) {
	if d.sessions == nil {
		return admin.ConsoleLink{}, errors.New("console: the HTTP server is not running")
	}
	host, port, err := net.SplitHostPort(d.httpAddr)
	if err != nil {
		return admin.ConsoleLink{}, fmt.Errorf("console: listen address %q: %w", d.httpAddr, err)
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.Is6() {
			host = "::1"
		}
	}
	l, err := d.sessions.NewLink("http://" + net.JoinHostPort(host, port))
	if err != nil {
		return admin.ConsoleLink{}, err
	}
	d.logger.Info("console sign-in link issued over the admin socket", "expires", l.Expires)
	return admin.ConsoleLink{URL: l.URL, ExpiresAt: l.Expires, Voice: d.voice != nil}, nil
}

// ConsoleEnd implements admin.ConsoleBackend: every console session ends
// and its voice connections close.
func (d *Daemon) ConsoleEnd(context.Context) (admin.ConsoleEnded, error) {
	if d.sessions == nil {
		return admin.ConsoleEnded{}, errors.New("console: the HTTP server is not running")
	}
	res := admin.ConsoleEnded{Sessions: d.sessions.EndAll()}
	if d.voice != nil {
		res.Connections = d.voice.Disconnect(consoleOperator.Principal())
	}
	d.logger.Info("console sessions ended by the operator", "sessions", res.Sessions, "connections", res.Connections)
	return res, nil
}
