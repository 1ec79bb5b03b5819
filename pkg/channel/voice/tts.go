package voice

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Spoken replies: a client whose hello says "tts":true (or says nothing
// while voice.tts is on: Config.Defaults) gets, after each
// final reply frame, {"type":"audio","format":"wav","sample_rate":N,
// "bytes":M} and then M bytes of WAV in binary frames of up to audioChunk
// bytes. The WAV is synthesised locally by espeak-ng (text on its stdin,
// never through a shell). Cancel stops synthesis and streaming; a failure
// is an error frame with code tts_unavailable and the connection stays
// usable.

const (
	defaultTTSVoice = "en"
	audioChunk      = 16 << 10 // bytes per binary audio frame
	audioCredits    = 4        // audio frames queued or being written at once
)

// TTSConfig configures the speech synthesiser. Zero fields take the
// defaults.
type TTSConfig struct {
	Command  string        // the espeak-ng binary; default "espeak-ng" (looked up on PATH)
	Timeout  time.Duration // per reply; default 30 s
	MaxBytes int           // WAV bytes per reply; default 8 MiB (about 3 minutes of speech)
	MaxText  int           // bytes of reply text spoken (longer replies are cut at a word); default 4 KiB
}

func (t TTSConfig) withDefaults() TTSConfig {
	if t.Command == "" {
		t.Command = "espeak-ng"
	}
	if t.Timeout <= 0 {
		t.Timeout = 30 * time.Second
	}
	if t.MaxBytes <= 0 {
		t.MaxBytes = 8 << 20
	}
	if t.MaxText <= 0 {
		t.MaxText = 4 << 10
	}
	return t
}

// validVoice accepts espeak-ng voice names (en, en-us, cmn, mb/mb-en1,
// en+f3): letters, digits and _ + - /, not starting with - (it is passed
// as an argument).
func validVoice(v string) bool {
	if v == "" || len(v) > 40 || v[0] == '-' {
		return false
	}
	for _, r := range v {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_+-/", r)
		if !ok {
			return false
		}
	}
	return !strings.Contains(v, "..")
}

// outFrame is a frame for writeLoop.
type outFrame struct {
	b      []byte
	binary bool
	// closeCode, when set, closes the connection after the frame
	// (closeReason is the close frame's text).
	closeCode   int
	closeReason string
}

// speak synthesises text and streams it as a spoken reply of job gen.
func (c *conn) speak(ctx context.Context, gen uint64, text string) {
	wav, rate, err := c.s.synthesize(ctx, text, c.ttsVoice)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("voice reply not synthesised", "err", err)
		// The turn's last frame: it ends the turn in the same step, so a
		// client that answers it at once is not told busy.
		c.sendLast(gen, errorFrame(CodeTTSUnavailable, "the spoken reply could not be synthesised: "+err.Error()))
		return
	}
	if !c.sendJob(gen, audioMsg{Type: "audio", Format: "wav", SampleRate: rate, Bytes: len(wav)}) {
		return
	}
	for i := 0; len(wav) > 0; i++ {
		if c.s.chunkHook != nil {
			c.s.chunkHook(ctx, i)
		}
		select { // bounds what is queued: the writer returns a credit per frame written
		case c.credits <- struct{}{}:
		case <-ctx.Done():
			return
		}
		n := min(audioChunk, len(wav))
		if !c.sendJobFrame(gen, outFrame{b: wav[:n], binary: true}, n == len(wav)) {
			<-c.credits
			return
		}
		wav = wav[n:]
	}
}

// sendJobFrame is sendJob for an encoded frame; the last one of the turn
// also ends it (see sendLast).
func (c *conn) sendJobFrame(gen uint64, f outFrame, last bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.ctx.Err() != nil {
		return false
	}
	if last {
		c.busy, c.jobCancel, c.turnIn = false, nil, nil
	}
	return c.enqueue(f)
}

// synthesize runs espeak-ng on text and returns a WAV with correct chunk
// sizes (espeak-ng writing to a pipe leaves them at a placeholder) and its
// sample rate.
func (s *Server) synthesize(ctx context.Context, text, voice string) ([]byte, int, error) {
	cfg := s.cfg.TTS
	text = cutText(text, cfg.MaxText)
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, cfg.Command, "--stdout", "-v", voice, "--stdin")
	cmd.Stdin = strings.NewReader(text)
	out := &capWriter{max: cfg.MaxBytes, over: cancel}
	errOut := &capWriter{max: 1 << 10}
	cmd.Stdout, cmd.Stderr = out, errOut
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	switch {
	case out.exceeded:
		return nil, 0, fmt.Errorf("espeak-ng output over %d bytes", cfg.MaxBytes)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, 0, fmt.Errorf("espeak-ng took over %v", cfg.Timeout)
	case err != nil:
		msg := strings.TrimSpace(errOut.buf.String())
		if msg != "" {
			return nil, 0, fmt.Errorf("%s: %w (%s)", cfg.Command, err, clip(msg))
		}
		return nil, 0, fmt.Errorf("%s: %w", cfg.Command, err)
	}
	return fixWAV(out.buf.Bytes())
}

// cutText shortens text to at most max bytes, at a space when there is one.
func cutText(text string, max int) string {
	text = strings.ToValidUTF8(strings.TrimSpace(text), " ")
	if len(text) <= max {
		return text
	}
	cut := max
	for cut > 0 && text[cut]&0xC0 == 0x80 { // not inside a rune
		cut--
	}
	if sp := strings.LastIndexByte(text[:cut], ' '); sp > max/2 {
		cut = sp
	}
	return text[:cut]
}

// fixWAV checks a RIFF/WAVE PCM stream whose data chunk runs to the end,
// sets its RIFF and data sizes and returns the sample rate.
func fixWAV(b []byte) ([]byte, int, error) {
	if len(b) < 12 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return nil, 0, errors.New("espeak-ng output is not a WAV")
	}
	rate := 0
	for off := 12; off+8 <= len(b); {
		id, size := string(b[off:off+4]), int(binary.LittleEndian.Uint32(b[off+4:]))
		body := off + 8
		switch id {
		case "fmt ":
			if size < 16 || body+16 > len(b) {
				return nil, 0, errors.New("espeak-ng output: short fmt chunk")
			}
			rate = int(binary.LittleEndian.Uint32(b[body+4:]))
		case "data":
			if rate <= 0 {
				return nil, 0, errors.New("espeak-ng output: no fmt chunk before data")
			}
			n := len(b) - body
			if n <= 0 {
				return nil, 0, errors.New("espeak-ng produced no audio")
			}
			binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-8))
			binary.LittleEndian.PutUint32(b[off+4:], uint32(n))
			return b, rate, nil
		}
		off = body + size + size&1
	}
	return nil, 0, errors.New("espeak-ng output: no data chunk")
}

// capWriter keeps up to max bytes; past that it fails (and calls over).
type capWriter struct {
	buf      bytes.Buffer
	max      int
	exceeded bool
	over     func()
}

func (w *capWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.max {
		if w.over == nil { // stderr: keep the start, drop the rest quietly
			w.buf.Write(p[:max(0, w.max-w.buf.Len())])
			return len(p), nil
		}
		w.exceeded = true
		w.over()
		return 0, errors.New("output over the limit")
	}
	return w.buf.Write(p)
}
