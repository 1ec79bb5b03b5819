package asrtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"agent/pkg/audio"
	"agent/pkg/nativetest"
)

// RequireNativeEnv names the environment variable that turns a missing
// native dependency from a skip into a failure (make test and CI set it).
const RequireNativeEnv = nativetest.Env

// Threads is what tests give a recogniser: one. ggml's threads spin while
// they wait for each other, and go test runs packages in parallel: two
// test processes each running two whisper threads on a two-core machine
// convoy (a call takes many times as long). Benchmarks use 2, alone.
const Threads = 1

// Unavailable reports a native dependency the test cannot have
// (nativetest.Missing): a skip naming the fix, or a failure when
// AGENT_REQUIRE_NATIVE=1.
func Unavailable(tb testing.TB, what string, err error) {
	tb.Helper()
	nativetest.Missing(tb, what, "install the native dependencies with `make deps`", err)
}

// TinyModel returns the cached random tiny model (see EnsureTinyModel) in
// ModelDir, or reports it Unavailable.
func TinyModel(tb testing.TB, multilingual bool) string {
	tb.Helper()
	dir, err := ModelDir()
	if err == nil {
		var path string
		if path, err = EnsureTinyModel(dir, multilingual); err == nil {
			return path
		}
	}
	Unavailable(tb, "random test model", err)
	return ""
}

// Speech returns text spoken by espeak-ng as 16 kHz mono float32 samples.
// The WAV is converted with sox (ffmpeg if sox is missing) and cached in
// ModelDir under a name derived from the text, so it is made once.
func Speech(text string) ([]float32, error) { return SpeechIn("en", text) }

// SpeechIn is Speech in an espeak-ng voice ("en", "cmn" for Mandarin).
func SpeechIn(voice, text string) ([]float32, error) {
	dir, err := ModelDir()
	if err != nil {
		return nil, err
	}
	name := text
	if voice != "en" {
		name = voice + "\x00" + text
	}
	sum := sha256.Sum256([]byte(name))
	path := filepath.Join(dir, "speech-"+hex.EncodeToString(sum[:6])+".wav")
	if _, err := os.Stat(path); err != nil {
		if err := makeSpeech(dir, path, voice, text); err != nil {
			return nil, err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("asrtest: speech: %w", err)
	}
	defer f.Close()
	samples, rate, channels, err := audio.ReadWAV(f)
	if err != nil {
		return nil, fmt.Errorf("asrtest: speech %s: %w", path, err)
	}
	if rate != 16000 || channels != 1 {
		return nil, fmt.Errorf("asrtest: speech %s: %d Hz x%d, want 16000 Hz mono", path, rate, channels)
	}
	return samples, nil
}

func makeSpeech(dir, path, voice, text string) error {
	espeak, err := exec.LookPath("espeak-ng")
	if err != nil {
		return fmt.Errorf("asrtest: speech: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("asrtest: speech: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, "speech-*")
	if err != nil {
		return fmt.Errorf("asrtest: speech: %w", err)
	}
	defer os.RemoveAll(tmp)
	raw, conv := filepath.Join(tmp, "espeak.wav"), filepath.Join(tmp, "16k.wav")
	if err := run(espeak, "-v", voice, "-w", raw, "--", text); err != nil {
		return err
	}
	if sox, err := exec.LookPath("sox"); err == nil {
		err = run(sox, raw, "-r", "16000", "-c", "1", "-b", "16", "-e", "signed-integer", conv)
		if err != nil {
			return err
		}
	} else if ffmpeg, err := exec.LookPath("ffmpeg"); err == nil {
		if err := run(ffmpeg, "-nostdin", "-loglevel", "error", "-y", "-i", raw,
			"-ar", "16000", "-ac", "1", "-c:a", "pcm_s16le", conv); err != nil {
			return err
		}
	} else {
		return errors.New("asrtest: speech: neither sox nor ffmpeg is installed")
	}
	if err := os.Rename(conv, path); err != nil {
		return fmt.Errorf("asrtest: speech: %w", err)
	}
	return nil
}

func run(name string, args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("asrtest: %s: %w: %s", filepath.Base(name), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// SpeechOrSkip is Speech with the native-dependency policy applied.
func SpeechOrSkip(tb testing.TB, text string) []float32 {
	tb.Helper()
	return SpeechInOrSkip(tb, "en", text)
}

// SpeechInOrSkip is SpeechIn with the native-dependency policy applied.
func SpeechInOrSkip(tb testing.TB, voice, text string) []float32 {
	tb.Helper()
	s, err := SpeechIn(voice, text)
	if err != nil {
		Unavailable(tb, "espeak-ng speech ("+voice+")", err)
	}
	return s
}

// RealModelEnv names the environment variable that points tests at a
// real whisper model (ggml-tiny.bin, ggml-base.bin, ...): with it they
// assert the words recognised, not only the protocol and timing.
const RealModelEnv = "TEST_WHISPER_MODEL"

// RealModel returns $TEST_WHISPER_MODEL, or "" when unset. A set path that
// does not exist fails the test (a typo must not pass as a skip).
func RealModel(tb testing.TB) string {
	tb.Helper()
	p := os.Getenv(RealModelEnv)
	if p == "" {
		return ""
	}
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("%s=%s: %v", RealModelEnv, p, err)
	}
	return p
}
