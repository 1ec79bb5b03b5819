package audio

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"agent/pkg/nativetest"
)

// needFFmpeg skips (or, with AGENT_REQUIRE_NATIVE=1, fails) without ffmpeg.
func needFFmpeg(t *testing.T) {
	t.Helper()
	nativetest.FFmpeg(t)
}

// encode writes a tone of d at 48 kHz stereo and has ffmpeg encode it.
func encode(t *testing.T, d time.Duration, ext string, args ...string) []byte {
	t.Helper()
	dir := t.TempDir()
	n := int(d.Seconds() * 48000)
	s := make([]float32, 2*n)
	for i := range n {
		v := float32(0.4 * math.Sin(2*math.Pi*440*float64(i)/48000))
		s[2*i], s[2*i+1] = v, v
	}
	var wav bytes.Buffer
	if err := WriteWAV(&wav, s, 48000, 2); err != nil {
		t.Fatal(err)
	}
	in, out := filepath.Join(dir, "in.wav"), filepath.Join(dir, "out."+ext)
	os.WriteFile(in, wav.Bytes(), 0o644)
	cmd := exec.Command("ffmpeg", append(append([]string{"-nostdin", "-loglevel", "error", "-y", "-i", in}, args...), out)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg encode %s: %v: %s", ext, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeFormats(t *testing.T) {
	needFFmpeg(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, ext string
		args      []string
	}{
		{"wav (native)", "wav", nil},
		{"ogg opus", "ogg", []string{"-c:a", "libopus", "-b:a", "24k"}},
		{"webm opus (browsers)", "webm", []string{"-c:a", "libopus"}},
		{"mp3", "mp3", []string{"-c:a", "libmp3lame"}},
		{"ogg vorbis", "ogg", []string{"-c:a", "libvorbis"}},
		{"aac in m4a", "m4a", []string{"-c:a", "aac"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := encode(t, 2*time.Second, tc.ext, tc.args...)
			s, err := Decode(ctx, data, DecodeConfig{})
			if err != nil {
				t.Fatal(err)
			}
			// Encoders pad a little; the tone is there at about its level
			// (0.4 peak, 0.28 RMS).
			if d := Duration(len(s), 16000); d < 1900*time.Millisecond || d > 2200*time.Millisecond {
				t.Errorf("decoded %v, want about 2 s", d)
			}
			if r := rms(s); r < 0.2 || r > 0.35 {
				t.Errorf("RMS %.3f, want about 0.28", r)
			}
		})
	}
}

func TestDecodeBoundedAndBad(t *testing.T) {
	needFFmpeg(t)
	ctx := context.Background()
	long := encode(t, 70*time.Second, "mp3", "-c:a", "libmp3lame", "-b:a", "32k")
	s, err := Decode(ctx, long, DecodeConfig{Max: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if d := Duration(len(s), 16000); d > time.Minute || d < 59*time.Second {
		t.Errorf("70 s cut to %v, want 60 s", d)
	}
	wav := encode(t, 3*time.Second, "wav")
	if s, _ := Decode(ctx, wav, DecodeConfig{Max: time.Second, Rate: 8000}); len(s) != 8000 {
		t.Errorf("WAV cut to %d samples at 8 kHz, want 8000", len(s))
	}
	for name, data := range map[string][]byte{
		"text":      []byte("this is not audio at all"),
		"empty":     nil,
		"truncated": long[:200],
		"bad wav":   append([]byte("RIFF\x00\x00\x00\x00WAVEjunk"), bytes.Repeat([]byte{0xff}, 64)...),
	} {
		if _, err := Decode(ctx, data, DecodeConfig{}); !errors.Is(err, ErrUndecodable) {
			t.Errorf("%s: %v, want ErrUndecodable", name, err)
		}
	}
	if _, err := Decode(ctx, long, DecodeConfig{FFmpeg: "/nonexistent/ffmpeg"}); err == nil || errors.Is(err, ErrUndecodable) {
		t.Errorf("missing ffmpeg: %v, want an error that is not the data's fault", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Decode(cctx, long, DecodeConfig{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
