package voice

import "slices"

// Protocol is the protocol name a hello may carry and ready confirms; it is
// also offered as the WebSocket subprotocol.
const Protocol = "agent.voice.v1"

// Error codes of error frames. Errors before ready and CodeUnauthorized
// close the connection (their frame says "fatal":true); the others leave it
// usable.
const (
	CodeUnauthorized   = "unauthorized"     // bad or missing token and no console session; or, before a turn, the token changed or the session ended
	CodeBadHello       = "bad_hello"        // the first frame is not a valid hello
	CodeBadRequest     = "bad_request"      // malformed JSON, unknown type, empty or oversized text
	CodeBadAudio       = "bad_audio"        // unsupported sample rate, unusable audio
	CodeTooLong        = "too_long"         // an utterance over the limit (60 s): it is dropped
	CodeASRUnavailable = "asr_unavailable"  // no speech recogniser is loaded
	CodeASRFailed      = "asr_failed"       // recognition failed
	CodeLLMUnavailable = "llm_unavailable"  // the conversation pipeline is not running
	CodeBusy           = "busy"             // a turn is in flight on this connection
	CodeTTSUnavailable = "tts_unavailable"  // a spoken reply could not be synthesised (espeak-ng missing or failing)
	CodeNotPaired      = "pairing_required" // security.dm_policy "pairing": the device is not approved yet (fatal; the message has the code)
	CodeForbidden      = "forbidden"        // security.dm_policy refuses the device (fatal)
	CodeInternal       = "internal"         // the server could not check the hello (fatal; try again)
)

// Audio formats a hello may name. FormatPCM (the default) is the
// contract's raw PCM, ended by `end` or voice activity, with partial
// transcripts. An EncodedFormats stream (what a browser's MediaRecorder or
// a device's codec produces) is collected until `end` and decoded by
// ffmpeg: no voice-activity end, no partials.
const FormatPCM = "pcm_s16le"

// EncodedFormats are the compressed formats a hello may name.
var EncodedFormats = []string{"webm", "ogg", "opus", "mp3", "wav", "m4a", "aac", "amr", "flac"}

// SampleRates are the hello sample rates accepted (Hz).
var SampleRates = []int{8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000}

func supportedRate(r int) bool { return slices.Contains(SampleRates, r) }

// Client frame types.
const (
	typeHello  = "hello"
	typeEnd    = "end"
	typeText   = "text"
	typeCancel = "cancel"
)

// clientMsg is any client text frame.
type clientMsg struct {
	Type       string `json:"type"`
	Token      string `json:"token,omitempty"`
	ConsoleKey string `json:"console_key,omitempty"` // the web console's session key (with its cookie)
	Device     string `json:"device,omitempty"`
	User       string `json:"user,omitempty"`
	Profile    string `json:"profile,omitempty"`
	SampleRate int    `json:"sample_rate,omitempty"`
	Protocol   string `json:"protocol,omitempty"`
	Text       string `json:"text,omitempty"`
	TTS        *bool  `json:"tts,omitempty"`      // hello: speak the final replies (audio frames); default voice.tts
	Voice      string `json:"voice,omitempty"`    // hello: espeak-ng voice of spoken replies; default voice.tts_voice
	Partials   *bool  `json:"partials,omitempty"` // hello: partial transcripts while speaking; default voice.partial_transcripts
	Format     string `json:"format,omitempty"`   // hello: pcm_s16le (default) or a compressed format (EncodedFormats)
}

// Server frames.
type readyMsg struct {
	Type     string `json:"type"` // ready
	Session  string `json:"session"`
	Protocol string `json:"protocol"`
}

type textMsg struct {
	Type  string `json:"type"` // transcript | reply
	Text  string `json:"text"`
	Final bool   `json:"final"`
}

// audioMsg announces a spoken reply: Bytes bytes of Format audio follow
// in binary frames.
type audioMsg struct {
	Type       string `json:"type"`   // audio
	Format     string `json:"format"` // wav
	SampleRate int    `json:"sample_rate"`
	Bytes      int    `json:"bytes"`
}

type errorMsg struct {
	Type    string `json:"type"` // error
	Code    string `json:"code"`
	Message string `json:"message"`
	Fatal   bool   `json:"fatal,omitempty"`
}

func transcript(text string, final bool) textMsg {
	return textMsg{Type: "transcript", Text: text, Final: final}
}

func reply(text string, final bool) textMsg { return textMsg{Type: "reply", Text: text, Final: final} }

func errorFrame(code, msg string) errorMsg { return errorMsg{Type: "error", Code: code, Message: msg} }
