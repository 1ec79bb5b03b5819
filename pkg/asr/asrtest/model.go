// Package asrtest provides test fixtures for speech recognition: whisper.cpp
// ggml model files with the tiny(.en) architecture and RANDOM weights, real
// speech made with espeak-ng, and the project's native-dependency test
// policy.
//
// The random models load and run like the real ones (same shapes, same
// cost), so they test plumbing, latency and memory; their transcripts are
// meaningless. Never ship them or use them outside tests.
package asrtest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
)

// File names EnsureTinyModel uses inside its directory.
const (
	TinyModelName      = "ggml-tiny-random.bin"
	TinyMultiModelName = "ggml-tiny-random-multi.bin"
)

// tiny(.en) hyper-parameters (openai/whisper's "tiny" dims).
const (
	nAudioCtx  = 1500
	nState     = 384
	nHead      = 6
	nLayer     = 4
	nTextCtx   = 448
	nMels      = 80
	nFFTBins   = 201
	ftypeF16   = 1
	nBaseVocab = 50256 + 1 // base BPE vocabulary; whisper.cpp adds the specials
	ggmlMagic  = 0x67676d6c
	seed       = 1
)

// Tensor element types and initialisers.
const (
	typeF32 = 0
	typeF16 = 1
)

type initKind int

const (
	initZero initKind = iota
	initOne
	initRand // N(0, 0.02²) from the seeded generator
)

type tensorSpec struct {
	name  string
	ttype int32
	init  initKind
	ne    []int32 // ggml order, ne0 first
}

func (t tensorSpec) elements() int64 {
	n := int64(1)
	for _, d := range t.ne {
		n *= int64(d)
	}
	return n
}

func nVocab(multilingual bool) int32 {
	if multilingual {
		return 51865
	}
	return 51864
}

// tinyTensors lists the tensors in the order whisper.cpp's converter writes
// them (and the reference generator, shared/tools/gen-whisper-ggml, does).
func tinyTensors(multilingual bool) []tensorSpec {
	var ts []tensorSpec
	add := func(name string, ttype int32, init initKind, ne ...int32) {
		ts = append(ts, tensorSpec{name, ttype, init, ne})
	}
	add("encoder.positional_embedding", typeF32, initRand, nState, nAudioCtx)
	add("encoder.conv1.weight", typeF16, initRand, 3, nMels, nState)
	add("encoder.conv1.bias", typeF32, initZero, 1, nState)
	add("encoder.conv2.weight", typeF16, initRand, 3, nState, nState)
	add("encoder.conv2.bias", typeF32, initZero, 1, nState)
	add("encoder.ln_post.weight", typeF32, initOne, nState)
	add("encoder.ln_post.bias", typeF32, initZero, nState)
	block := func(p string, cross bool) {
		add(p+".mlp_ln.weight", typeF32, initOne, nState)
		add(p+".mlp_ln.bias", typeF32, initZero, nState)
		add(p+".mlp.0.weight", typeF16, initRand, nState, 4*nState)
		add(p+".mlp.0.bias", typeF32, initZero, 4*nState)
		add(p+".mlp.2.weight", typeF16, initRand, 4*nState, nState)
		add(p+".mlp.2.bias", typeF32, initZero, nState)
		attn := func(a string) {
			a = p + "." + a
			add(a+"_ln.weight", typeF32, initOne, nState)
			add(a+"_ln.bias", typeF32, initZero, nState)
			add(a+".query.weight", typeF16, initRand, nState, nState)
			add(a+".query.bias", typeF32, initZero, nState)
			add(a+".key.weight", typeF16, initRand, nState, nState)
			add(a+".value.weight", typeF16, initRand, nState, nState)
			add(a+".value.bias", typeF32, initZero, nState)
			add(a+".out.weight", typeF16, initRand, nState, nState)
			add(a+".out.bias", typeF32, initZero, nState)
		}
		attn("attn")
		if cross {
			attn("cross_attn")
		}
	}
	for i := range nLayer {
		block("encoder.blocks."+strconv.Itoa(i), false)
	}
	add("decoder.positional_embedding", typeF32, initRand, nState, nTextCtx)
	add("decoder.token_embedding.weight", typeF16, initRand, nState, nVocab(multilingual))
	add("decoder.ln.weight", typeF32, initOne, nState)
	add("decoder.ln.bias", typeF32, initZero, nState)
	for i := range nLayer {
		block("decoder.blocks."+strconv.Itoa(i), true)
	}
	return ts
}

// vocabWord is the i-th placeholder token: " w<i>", except the blank " "
// whisper.cpp looks up at id 220.
func vocabWord(i int) string {
	if i == 220 {
		return " "
	}
	return " w" + strconv.Itoa(i)
}

// TinyModelSize is the exact size in bytes of the file WriteTinyModel
// writes.
func TinyModelSize(multilingual bool) int64 {
	n := int64(4 + 11*4)      // magic + hyper-parameters
	n += 8 + nMels*nFFTBins*4 // mel filters
	n += 4                    // vocabulary count
	for i := range nBaseVocab {
		n += 4 + int64(len(vocabWord(i)))
	}
	for _, t := range tinyTensors(multilingual) {
		n += 12 + 4*int64(len(t.ne)) + int64(len(t.name))
		if t.ttype == typeF32 {
			n += 4 * t.elements()
		} else {
			n += 2 * t.elements()
		}
	}
	return n
}

// modelWriter writes one model file; the first error sticks.
type modelWriter struct {
	w   *bufio.Writer
	rng *rand.Rand
	buf []byte
	err error
}

func (m *modelWriter) bytes(b []byte) {
	if m.err == nil {
		_, m.err = m.w.Write(b)
	}
}

func (m *modelWriter) i32(v int32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(v))
	m.bytes(b[:])
}

func (m *modelWriter) tensor(t tensorSpec) {
	m.i32(int32(len(t.ne)))
	m.i32(int32(len(t.name)))
	m.i32(t.ttype)
	for _, d := range t.ne {
		m.i32(d)
	}
	m.bytes([]byte(t.name))
	width := 2
	if t.ttype == typeF32 {
		width = 4
	}
	le := binary.LittleEndian
	m.buf = m.buf[:0]
	for range t.elements() {
		var v float32
		switch t.init {
		case initOne:
			v = 1
		case initRand:
			v = float32(m.rng.NormFloat64() * 0.02)
		}
		if width == 4 {
			m.buf = le.AppendUint32(m.buf, math.Float32bits(v))
		} else {
			m.buf = le.AppendUint16(m.buf, f16(v))
		}
		if len(m.buf) >= 64<<10 {
			m.bytes(m.buf)
			m.buf = m.buf[:0]
		}
	}
	m.bytes(m.buf)
}

// f16 converts to IEEE half precision by truncation, flushing what would be
// subnormal to zero, exactly as the reference generator does (so the files
// are byte-identical to it).
func f16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16((b >> 16) & 0x8000)
	exp := int((b>>23)&0xff) - 127 + 15
	mant := uint16((b >> 13) & 0x3ff)
	if exp <= 0 {
		return sign
	}
	if exp >= 31 {
		return sign | 0x7c00
	}
	return sign | uint16(exp)<<10 | mant
}

// writeTinyModel writes the model to w.
func writeTinyModel(w io.Writer, multilingual bool) error {
	m := &modelWriter{
		w:   bufio.NewWriterSize(w, 1<<20),
		rng: rand.New(rand.NewSource(seed)),
		buf: make([]byte, 0, 64<<10+4),
	}
	m.i32(ggmlMagic)
	for _, v := range []int32{nVocab(multilingual), nAudioCtx, nState, nHead, nLayer,
		nTextCtx, nState, nHead, nLayer, nMels, ftypeF16} {
		m.i32(v)
	}
	// Mel filters: triangular, n_mel x n_fft bins.
	m.i32(nMels)
	m.i32(nFFTBins)
	for mel := range nMels {
		for k := range nFFTBins {
			c := float64(mel)*2.5 + 1
			v := math.Max(0, 1-math.Abs(float64(k)-c)/2.5)
			m.buf = binary.LittleEndian.AppendUint32(m.buf[:0], math.Float32bits(float32(v*0.01)))
			m.bytes(m.buf)
		}
	}
	m.i32(nBaseVocab)
	for i := range nBaseVocab {
		word := vocabWord(i)
		m.i32(int32(len(word)))
		m.bytes([]byte(word))
	}
	for _, t := range tinyTensors(multilingual) {
		m.tensor(t)
	}
	if m.err != nil {
		return m.err
	}
	return m.w.Flush()
}

// WriteTinyModel writes a tiny (multilingual: tiny, else tiny.en) whisper.cpp
// model with deterministic random weights to path (about 78 MB).
func WriteTinyModel(path string, multilingual bool) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("asrtest: write model: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("asrtest: write model %s: %w", path, cerr)
		}
	}()
	if err := writeTinyModel(f, multilingual); err != nil {
		return fmt.Errorf("asrtest: write model %s: %w", path, err)
	}
	return nil
}

// EnsureTinyModel returns the path of the random tiny model in dir
// (TinyModelName or TinyMultiModelName), writing it first if it is missing
// or has the wrong size. The write is atomic (temporary file, fsync,
// rename), so concurrent test processes never see a partial model.
func EnsureTinyModel(dir string, multilingual bool) (string, error) {
	name := TinyModelName
	if multilingual {
		name = TinyMultiModelName
	}
	path := filepath.Join(dir, name)
	if st, err := os.Stat(path); err == nil && st.Size() == TinyModelSize(multilingual) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("asrtest: model dir: %w", err)
	}
	tmp, err := os.CreateTemp(dir, name+".tmp*")
	if err != nil {
		return "", fmt.Errorf("asrtest: write model: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	werr := writeTinyModel(tmp, multilingual)
	if werr == nil {
		werr = tmp.Chmod(0o644) // CreateTemp makes 0600; the cache is shared
	}
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		return "", fmt.Errorf("asrtest: write model %s: %w", path, werr)
	}
	return path, nil
}

// ModelDir is the shared cache for generated test models:
// <module root>/testdata/models (git-ignored), found by walking up from the
// working directory to go.mod.
func ModelDir() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "testdata", "models"), nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("asrtest: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("asrtest: no go.mod above the working directory")
		}
		dir = parent
	}
}
