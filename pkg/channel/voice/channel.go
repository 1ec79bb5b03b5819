package voice

import (
	"context"
	"fmt"
	"log/slog"

	"agent/pkg/channel"
	"agent/pkg/channel/gate"
	"agent/pkg/channelhost"
	"agent/pkg/config"
	"agent/pkg/pairing"
)

// The voice channel as the host sees it (pkg/channel): the agent.voice.v1
// WebSocket at GET /voice; devices and the web console connect to it, so it
// cannot message anyone unprompted.

var (
	_ channel.Channel      = (*Server)(nil)
	_ channel.Disconnecter = (*Server)(nil)
	_ channel.Closer       = (*Server)(nil)
	_ channel.FastTurns    = (*Server)(nil)
	_ channel.Console      = (*Server)(nil)
)

// Name is "voice".
func (s *Server) Name() string { return Channel }

// Routes serve the WebSocket.
func (s *Server) Routes() []channel.Route {
	return []channel.Route{{Pattern: "GET /voice", Handler: s}}
}

// FastTurns: a device's user waits for every answer; their turns (and
// their scheduled tasks) are latency-first.
func (s *Server) FastTurns() bool { return true }

// Run has no background work: connections live in their handlers.
func (s *Server) Run(context.Context) error { return nil }

// ConsoleOperator is the principal the web console's connections speak as
// (channel.Console): they close when the operator ends every console
// session.
func (s *Server) ConsoleOperator() string { return ConsoleOperator.Principal() }

// Send refuses: a voice device is answered on its own connection, never
// messaged unprompted.
func (s *Server) Send(context.Context, string, string) error {
	return fmt.Errorf("%w: voice devices are answered on their own connection only", channel.ErrNoPush)
}

// ConsoleOperator is who the web console signed in with `agentctl console`
// speaks as: the operator's admin channel (agentctl send's), because the
// link came over the 0600 admin socket. Admitted without pairing.
var ConsoleOperator = Identity{Channel: "admin", User: "console"}

// Build makes the channel when voice.enabled (channelhost.Build).
func Build(_ context.Context, h channelhost.Env) (channel.Channel, error) {
	cfg := h.Config()
	if !cfg.Voice.Enabled {
		return nil, nil
	}
	logger := h.Logger.With("component", "voice")
	if cfg.Voice.Token == "" {
		h.Logger.Info("voice.token is empty: no device can connect; the web console signs in with a link from agentctl console")
	}
	recognizer := func() Recognizer {
		if h.Models != nil {
			if r := h.Models.Recognizer(); r != nil {
				return r
			}
		}
		return nil
	}
	vc := Config{
		// An empty voice.token admits no device; the console gets in
		// with its session (agentctl console), nothing else.
		Token:    func() string { return h.Config().Voice.Token },
		Operator: ConsoleOperator,
		ASR:      recognizer,
		Admit: func(ctx context.Context, principals []string) (Admission, error) {
			return admit(ctx, h, logger, principals)
		},
		Defaults: func() Defaults {
			v := h.Config().Voice
			return Defaults{Partials: v.PartialTranscripts, TTS: v.TTS, TTSVoice: v.TTSVoice}
		},
		Logger: logger,
	}
	if h.Console != nil {
		vc.Sessions = h.Console
	}
	// The Silero VAD model is nil until loaded, and without one
	// (voice.vad = "energy", or no model file).
	if h.Models != nil && cfg.Voice.VAD != config.VADEnergy {
		vc.VAD.Silero = h.Models.VAD
	}
	vc.Turns = h.Turns
	s := New(vc)
	m := h.Metrics
	m.GaugeFunc("agent_voice_connections", "Open voice WebSocket connections.", nil, func() float64 { return float64(s.Stats().Connections) })
	m.GaugeFunc("agent_voice_utterances", "Utterances handed to speech recognition since start.", nil, func() float64 { return float64(s.Stats().Utterances) })
	m.GaugeFunc("agent_voice_partials", "Partial transcripts sent since start.", nil, func() float64 { return float64(s.Stats().Partials) })
	m.GaugeFunc("agent_voice_silero_connections", "Voice connections since start whose utterances end by the Silero VAD (the others: energy).", nil,
		func() float64 { return float64(s.Stats().Silero) })
	m.GaugeFunc("agent_asr_workers", "Speech recognition workers (decoding states); 0 while no model is loaded.", nil, func() float64 {
		if h.Models != nil {
			if r := h.Models.Recognizer(); r != nil {
				return float64(r.Workers())
			}
		}
		return 0
	})
	return s, nil
}

// admit applies security.dm_policy, as configured now, to a voice device
// at its hello and before each of its turns. The names a hello gives
// ("voice:DEVICE", "voice:USER") are claims anyone holding the shared
// voice.token can make, so every one must be admitted (an approved device
// does not carry an unapproved user in with it, nor the reverse); under
// "pairing" the first one that is not gets a code for the operator to
// approve. A name listed in agent.owners is refused outright: owner rights
// cannot rest on a claim. The operator talks through the console
// (agentctl console) instead.
func admit(ctx context.Context, h channelhost.Env, logger *slog.Logger, principals []string) (Admission, error) {
	dec, err := h.Gate.Admit(ctx, nil, gate.Request{Principals: principals, RefuseOwnerClaims: true})
	switch {
	case err != nil:
		return Admission{}, err
	case dec.OwnerClaim:
		logger.Warn("voice hello claims an owner's name; refused", "principal", dec.Principal)
		return Admission{Reason: dec.Reason + " over voice.token (anyone holding the token could); " +
			"owners use the web console signed in with agentctl console"}, nil
	case dec.Verdict == pairing.Allow:
		return Admission{Allowed: true}, nil
	case dec.Verdict == pairing.NewCode || dec.Verdict == pairing.Waiting:
		return Admission{Code: dec.Code}, nil
	}
	return Admission{}, nil
}
