package asr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agent/pkg/asr/asrtest"
)

func TestCheckAudio(t *testing.T) {
	tests := []struct {
		name    string
		samples []float32
		ok      bool
	}{
		{"one sample", []float32{0}, true},
		{"clipped values pass", []float32{2, -3}, true},
		{"exactly MaxAudio", make([]float32, maxSamples), true},
		{"empty", nil, false},
		{"over MaxAudio", make([]float32, maxSamples+1), false},
		{"NaN", []float32{0, float32(math.NaN())}, false},
		{"+Inf", []float32{float32(math.Inf(1))}, false},
		{"-Inf", []float32{0, 0, float32(math.Inf(-1))}, false},
	}
	for _, tt := range tests {
		err := checkAudio(tt.samples)
		if tt.ok && err != nil {
			t.Errorf("%s: checkAudio error = %v, want nil", tt.name, err)
		}
		if !tt.ok && !errors.Is(err, ErrBadAudio) {
			t.Errorf("%s: checkAudio error = %v, want ErrBadAudio", tt.name, err)
		}
	}
}

func TestCheckConfig(t *testing.T) {
	if err := checkConfig(Config{}); !errors.Is(err, ErrModelMissing) {
		t.Errorf("checkConfig(no path) = %v, want ErrModelMissing", err)
	}
	if err := checkConfig(Config{ModelPath: "m.bin", Threads: -1}); err == nil {
		t.Error("checkConfig(threads -1) = nil, want an error")
	}
	if err := checkConfig(Config{ModelPath: "m.bin", Threads: 2}); err != nil {
		t.Errorf("checkConfig(valid) = %v", err)
	}
}

func TestAudioCtx(t *testing.T) {
	const full = 1500
	tests := []struct{ n, want int }{
		{1, 128},                // 1 position + margin 64, rounded up to a multiple of 64
		{SampleRate, 128},       // 50 + 64 = 114 -> 128
		{3 * SampleRate, 256},   // 150 + 64 = 214 -> 256
		{3*SampleRate + 1, 256}, // 151 + 64 = 215 -> 256
		{10 * SampleRate, 576},  // 500 + 64 = 564 -> 576
		{28 * SampleRate, 1472}, // 1400 + 64 = 1464 -> 1472
		{29 * SampleRate, 0},    // 1450 + 64 -> 1536 >= 1500: the full window
		{30 * SampleRate, 0},
		{60 * SampleRate, 0}, // several windows
		{0, 0},
	}
	for _, tt := range tests {
		got := audioCtx(tt.n, full)
		if got != tt.want {
			t.Errorf("audioCtx(%d samples, %d) = %d, want %d", tt.n, full, got, tt.want)
		}
		// A shrunk context must cover the input (20 ms per position) plus
		// the margin.
		if covered := time.Duration(got) * 20 * time.Millisecond; got != 0 && covered < sampleDuration(tt.n)+time.Second {
			t.Errorf("audioCtx(%d samples) = %d covers %v, less than the audio plus a second", tt.n, got, covered)
		}
	}
}

func TestTokenBudget(t *testing.T) {
	tests := []struct{ n, want int }{
		{1, 32},
		{SampleRate, 32},
		{3 * SampleRate, 46},
		{3*SampleRate + 1, 56},
		{20 * SampleRate, 216},
		{30 * SampleRate, 220},
		{60 * SampleRate, 220},
	}
	for _, tt := range tests {
		if got := tokenBudget(tt.n); got != tt.want {
			t.Errorf("tokenBudget(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}

func TestWindowStart(t *testing.T) {
	tests := []struct{ end, want time.Duration }{
		{0, 0},
		{3 * time.Second, 0},
		{30 * time.Second, 0},
		{30*time.Second + 10*time.Millisecond, 30 * time.Second},
		{40 * time.Second, 30 * time.Second},
		{60 * time.Second, 30 * time.Second},
	}
	for _, tt := range tests {
		if got := windowStart(tt.end); got != tt.want {
			t.Errorf("windowStart(%v) = %v, want %v", tt.end, got, tt.want)
		}
	}
}

func TestPadShort(t *testing.T) {
	in := []float32{0.5, -0.5}
	out := padShort(in)
	if len(out) != minSamples || out[0] != 0.5 || out[1] != -0.5 || out[2] != 0 {
		t.Errorf("padShort(2 samples) = %d samples starting %v", len(out), out[:3])
	}
	long := make([]float32, minSamples+1)
	if got := padShort(long); &got[0] != &long[0] {
		t.Error("padShort copied input that was long enough")
	}
}

func TestTextHelpers(t *testing.T) {
	for in, want := range map[string]string{"": "auto", " AUTO ": "auto", "zh": "zh", "En": "en"} {
		if got := normalizeLanguage(in); got != want {
			t.Errorf("normalizeLanguage(%q) = %q, want %q", in, got, want)
		}
	}
	if got := cleanText(" hello \xe4\xb8 world\n"); got != "hello  world" {
		t.Errorf("cleanText = %q", got)
	}
}

// --- model file checks ----------------------------------------------------

func TestCheckModelTiny(t *testing.T) {
	for _, multi := range []bool{false, true} {
		path := asrtest.TinyModel(t, multi)
		info, err := CheckModel(path)
		if err != nil {
			t.Fatalf("CheckModel(%s): %v", path, err)
		}
		want := ModelInfo{Type: "tiny", Multilingual: multi, Size: asrtest.TinyModelSize(multi), Tensors: 167}
		if info != want {
			t.Errorf("CheckModel(%s) = %+v, want %+v", path, info, want)
		}
	}
}

func TestCheckModelMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ggml-base.bin")
	_, err := CheckModel(path)
	if !errors.Is(err, ErrModelMissing) {
		t.Fatalf("CheckModel(missing) = %v, want ErrModelMissing", err)
	}
	for _, want := range []string{path, "scripts/fetch-models.sh", "make models"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := CheckModel(t.TempDir()); !errors.Is(err, ErrModelInvalid) {
		t.Errorf("CheckModel(directory) = %v, want ErrModelInvalid", err)
	}
}

// patched overlays bytes on a ReaderAt.
type patched struct {
	r   io.ReaderAt
	off int64
	b   []byte
}

func (p patched) ReadAt(b []byte, off int64) (int, error) {
	n, err := p.r.ReadAt(b, off)
	for i := range b[:n] {
		if j := off + int64(i) - p.off; j >= 0 && j < int64(len(p.b)) {
			b[i] = p.b[j]
		}
	}
	return n, err
}

func le32(v int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }

func TestCheckModelCorrupt(t *testing.T) {
	path := asrtest.TinyModel(t, false)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size := asrtest.TinyModelSize(false)
	const (
		hparams = 4                  // after the magic
		mel     = hparams + 11*4     // n_mel, n_fft
		vocab   = mel + 8 + 80*201*4 // word count
	)
	// The first tensor follows the vocabulary; find it by its name.
	head := make([]byte, 2<<20)
	if _, err := f.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	firstTensor := int64(bytes.Index(head, []byte("encoder.positional_embedding"))) - 5*4 // n_dims, len, type, ne0, ne1
	if firstTensor < vocab {
		t.Fatal("first tensor not found")
	}

	tests := []struct {
		name string
		r    io.ReaderAt
		size int64
		want string
	}{
		{"empty", f, 0, "too short"},
		{"three bytes", f, 3, "too short"},
		{"wrong magic", patched{f, 0, []byte("GGUF")}, size, "bad magic"},
		{"truncated header", f, 20, "truncated in header"},
		{"truncated mel", f, mel + 100, "truncated in mel filters"},
		{"truncated vocabulary", f, vocab + 1000, "truncated in vocabulary"},
		{"truncated tensor header", f, firstTensor + 6, "truncated in tensor header"},
		{"truncated tensor data", f, firstTensor + 1000, "truncated in tensor"},
		{"one byte short", f, size - 1, "truncated in tensor"},
		{"trailing garbage", concat{f, size, []byte{1, 0, 0, 0, 4, 0}}, size + 6, "truncated in tensor header"},
		{"n_vocab", patched{f, hparams, le32(1 << 30)}, size, "n_vocab"},
		{"n_audio_ctx", patched{f, hparams + 4, le32(0)}, size, "n_audio_ctx"},
		{"state mismatch", patched{f, hparams + 6*4, le32(512)}, size, "n_text_state"},
		{"n_mels", patched{f, hparams + 9*4, le32(7)}, size, "n_mels"},
		{"mel filter shape", patched{f, mel + 4, le32(400)}, size, "mel filters"},
		{"vocabulary count", patched{f, vocab, le32(-1)}, size, "vocabulary of"},
		{"vocabulary word length", patched{f, vocab + 4, le32(1 << 30)}, size, "bytes long"},
		{"tensor dims", patched{f, firstTensor, le32(5)}, size, "dimensions"},
		{"tensor name length", patched{f, firstTensor + 4, le32(1 << 20)}, size, "name"},
		{"tensor type", patched{f, firstTensor + 8, le32(4)}, size, "unsupported type"},
		{"tensor dimension", patched{f, firstTensor + 12, le32(-3)}, size, "dimension -3"},
		{"tensor too big", patched{f, firstTensor + 12, le32(1 << 30)}, size, "elements"},
		{"tensor shape vs file", patched{f, firstTensor + 12, le32(383)}, size, ""}, // the walk loses step
		{"header implies other tensors", patched{f, hparams + 8*4, le32(5)}, size, "header implies"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := checkModel(tt.r, tt.size)
			if !errors.Is(err, ErrModelInvalid) {
				t.Fatalf("checkModel = %v, want ErrModelInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("checkModel error %q does not mention %q", err, tt.want)
			}
		})
	}
}

// concat is a ReaderAt of r's first n bytes followed by tail.
type concat struct {
	r    io.ReaderAt
	n    int64
	tail []byte
}

func (c concat) ReadAt(b []byte, off int64) (int, error) {
	var n int
	if off < c.n {
		m := min(int64(len(b)), c.n-off)
		k, err := c.r.ReadAt(b[:m], off)
		if n = k; int64(k) < m {
			return n, err
		}
	}
	for ; n < len(b); n++ {
		i := off + int64(n) - c.n
		if i >= int64(len(c.tail)) {
			return n, io.EOF
		}
		b[n] = c.tail[i]
	}
	return n, nil
}

func FuzzCheckModel(f *testing.F) {
	// Seeds: a real header (magic, hyper-parameters, the start of the mel
	// filters) and small hand-made files.
	if m, err := os.Open(asrtest.TinyModel(f, false)); err == nil {
		head := make([]byte, 4096)
		if _, err := m.ReadAt(head, 0); err == nil {
			f.Add(head)
		}
		m.Close()
	}
	f.Add([]byte("lmgg"))
	f.Add(append([]byte("lmgg"), make([]byte, 60)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := checkModel(bytes.NewReader(b), int64(len(b)))
		if err == nil {
			t.Fatalf("accepted %d bytes as a model: %+v", len(b), info)
		}
		if !errors.Is(err, ErrModelInvalid) {
			t.Fatalf("error %v does not wrap ErrModelInvalid", err)
		}
	})
}
