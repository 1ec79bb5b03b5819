//go:build whisper

package asr

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"agent/pkg/asr/asrtest"
	"agent/pkg/audio"
)

// whisperCLI is whisper.cpp's own whisper-cli, built by scripts/deps.sh
// from the same sources as the static libraries (AGENT_WHISPER_CLI
// overrides).
func whisperCLI(tb testing.TB) string {
	p := os.Getenv("AGENT_WHISPER_CLI")
	if p == "" {
		_, file, _, _ := runtime.Caller(0)
		p = filepath.Join(filepath.Dir(file), "..", "..", ".deps", "whisper", "linux-"+runtime.GOARCH, "bin", "whisper-cli")
	}
	if _, err := os.Stat(p); err != nil {
		asrtest.Unavailable(tb, "whisper-cli (scripts/deps.sh whisper)", err)
	}
	return p
}

// textCtxModel writes a copy of the tiny model at src whose text context
// is textCtx positions instead of 448: the header field and the decoder's
// positional embedding (ggml ne = [384, n_text_ctx], f32) change, nothing
// else. whisper.cpp stops decoding at n_text_ctx/2 - 4 tokens whatever
// max_tokens says, so a short context caps whisper-cli (which cannot set
// max_tokens) at the same token count as our path; the random weights
// never emit end-of-text, so otherwise the CLI would decode 220 tokens to
// our 46 and the two would not do the same work.
func textCtxModel(tb testing.TB, src string, textCtx int) string {
	tb.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	name := []byte("decoder.positional_embedding")
	i := bytes.Index(b, name)
	le := binary.LittleEndian
	const hdrTextCtx = 4 + 5*4 // magic, n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer
	if i < 8 || le.Uint32(b[hdrTextCtx:]) != nTextCtxTiny || le.Uint32(b[i-4:]) != nTextCtxTiny {
		tb.Fatalf("%s: not the tiny layout textCtxModel expects", src)
	}
	data := i + len(name)
	rowBytes := int(le.Uint32(b[i-8:])) * 4
	out := make([]byte, 0, len(b))
	out = append(out, b[:i-4]...)
	out = le.AppendUint32(out, uint32(textCtx))
	out = append(out, name...)
	out = append(out, b[data:data+textCtx*rowBytes]...)
	out = append(out, b[data+nTextCtxTiny*rowBytes:]...)
	le.PutUint32(out[hdrTextCtx:], uint32(textCtx))
	path := filepath.Join(tb.TempDir(), fmt.Sprintf("ggml-tiny-random-ctx%d.bin", textCtx))
	if err := os.WriteFile(path, out, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

const nTextCtxTiny = 448

// BenchmarkVersusCLI3s compares our Go path (Recognizer.Transcribe, warm,
// 2 threads) with whisper.cpp's own whisper-cli built from the same tree,
// on the same 3 s espeak-ng WAV, with the same whisper parameters (greedy,
// no timestamps, language en, suppress_nst, one fallback at temperature
// 1.0, the audio context our path picks) and the same decode length (see
// textCtxModel). cli_ms is the CLI's marginal cost per utterance: the wall
// time of one process transcribing the file 1+k times minus one doing it
// once, over k, so process start, model load and the first, cold run
// cancel out as they do for a daemon. go_ms and cli_ms are medians;
// overhead_pct = (go - cli) / cli.
func BenchmarkVersusCLI3s(b *testing.B) {
	cli := whisperCLI(b)
	model := textCtxModel(b, asrtest.TinyModel(b, false), 64)
	samples := speech3s(b)
	wav := filepath.Join(b.TempDir(), "speech3s.wav")
	var buf bytes.Buffer
	if err := audio.WriteWAV(&buf, samples, SampleRate, 1); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(wav, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	// The WAV holds 16-bit samples: transcribe what the CLI reads.
	read, _, _, err := audio.ReadWAV(bytes.NewReader(buf.Bytes()))
	if err != nil {
		b.Fatal(err)
	}

	r, err := New(Config{ModelPath: model, Language: "en", Threads: 2}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	res, err := r.Transcribe(context.Background(), read) // warm up
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("go: %d words (tokens) %q", len(strings.Fields(res.Text)), res.Text)

	// -nfa: flash attention off, as in our path (it pads the audio context
	// with keys an earlier call left behind, see New).
	args := []string{"-m", model, "-t", "2", "-l", "en", "-nt", "-bs", "1", "-tpi", "1.0", "-sns", "-nfa"}
	if ac := audioCtx(len(padShort(read)), nAudioCtxTiny); ac > 0 {
		args = append(args, "-ac", strconv.Itoa(ac))
	}
	runCLI := func(files int) time.Duration {
		a := slices.Clone(args)
		for range files {
			a = append(a, "-f", wav)
		}
		cmd := exec.Command(cli, a...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("%s: %v\n%s", cli, err, out.Bytes())
		}
		d := time.Since(start)
		if files == 1 {
			for _, l := range bytes.Split(out.Bytes(), []byte("\n")) {
				if bytes.Contains(l, []byte("time =")) || bytes.Contains(l, []byte("fallbacks")) {
					b.Logf("cli: %s", bytes.TrimSpace(l))
				}
			}
		}
		return d
	}

	const k = 4
	var goLat, cliLat, cliOnce []time.Duration
	for b.Loop() {
		// k calls, averaged, as the CLI's marginal cost is over k files.
		var sum time.Duration
		for range k {
			res, err := r.Transcribe(context.Background(), read)
			if err != nil {
				b.Fatal(err)
			}
			sum += res.Elapsed
		}
		goLat = append(goLat, sum/k)
		b.StopTimer()
		once := runCLI(1)
		many := runCLI(1 + k)
		cliOnce = append(cliOnce, once)
		cliLat = append(cliLat, (many-once)/k)
		b.StartTimer()
	}
	med := func(d []time.Duration) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[len(s)/2]) / float64(time.Millisecond)
	}
	g, c := med(goLat), med(cliLat)
	b.ReportMetric(g, "go_ms")
	b.ReportMetric(c, "cli_ms")
	b.ReportMetric(med(cliOnce), "cli_process_ms")
	b.ReportMetric((g-c)/c*100, "overhead_pct")
}

const nAudioCtxTiny = 1500
