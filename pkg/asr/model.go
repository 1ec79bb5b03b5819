package asr

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ModelInfo describes a model file that passed CheckModel.
type ModelInfo struct {
	Type         string // tiny, base, small, medium, large or custom
	Multilingual bool
	Size         int64 // bytes
	Tensors      int
}

// CheckModel reads a whisper.cpp ggml model file's structure without loading
// its weights: magic, hyper-parameters, mel filters, vocabulary and every
// tensor header, each bounded and checked against the file size, and the
// tensor inventory against what the hyper-parameters imply. whisper.cpp
// trusts these fields (a bad one can make it allocate wildly, read past a
// buffer or load a half-empty model), so New calls this first. It needs no
// cgo: `agentctl doctor` can use it in any build.
//
// Errors wrap ErrModelMissing (no such file) or ErrModelInvalid.
func CheckModel(path string) (ModelInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return ModelInfo{}, fmt.Errorf("asr: model %s: %w", path, ErrModelMissing)
		}
		return ModelInfo{}, fmt.Errorf("asr: model %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ModelInfo{}, fmt.Errorf("asr: model %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return ModelInfo{}, fmt.Errorf("asr: model %s: not a regular file: %w", path, ErrModelInvalid)
	}
	info, err := checkModel(f, st.Size())
	if err != nil {
		return ModelInfo{}, fmt.Errorf("asr: model %s: %w", path, err)
	}
	return info, nil
}

// ggml file format constants (ggml.h, whisper.cpp's whisper_model_load).
const (
	ggmlMagic    = 0x67676d6c // "ggml", little-endian
	whisperNFFT  = 201        // mel filter bins: WHISPER_N_FFT/2 + 1
	maxWordLen   = 1 << 10
	maxNameLen   = 1 << 8
	maxDims      = 4 // whisper.cpp reads ne[] into int32_t[4]
	maxElements  = 1<<31 - 1
	nVocabEn     = 51864 // tokenizer sizes of the released whisper models
	nVocabLargeV = 51866
)

// ggmlBlock gives the block size, in elements and bytes, of the tensor types
// whisper.cpp model files use: F32, F16, BF16 and the quantisations
// whisper's quantize tool writes (ggml.h, ggml-common.h).
func ggmlBlock(ttype int32) (elems, bytes int64, ok bool) {
	switch ttype {
	case 0: // F32
		return 1, 4, true
	case 1, 30: // F16, BF16
		return 1, 2, true
	case 2: // Q4_0
		return 32, 18, true
	case 3: // Q4_1
		return 32, 20, true
	case 6: // Q5_0
		return 32, 22, true
	case 7: // Q5_1
		return 32, 24, true
	case 8: // Q8_0
		return 32, 34, true
	case 10: // Q2_K
		return 256, 84, true
	case 11: // Q3_K
		return 256, 110, true
	case 12: // Q4_K
		return 256, 144, true
	case 13: // Q5_K
		return 256, 176, true
	case 14: // Q6_K
		return 256, 210, true
	}
	return 0, 0, false
}

// hparams is the model header, in file order.
type hparams struct {
	nVocab, nAudioCtx, nAudioState, nAudioHead, nAudioLayer int32
	nTextCtx, nTextState, nTextHead, nTextLayer, nMels      int32
	ftype                                                   int32
}

func (h hparams) check() error {
	inRange := func(name string, v, lo, hi int32) error {
		if v < lo || v > hi {
			return fmt.Errorf("%s = %d, want %d..%d", name, v, lo, hi)
		}
		return nil
	}
	return errors.Join(
		inRange("n_vocab", h.nVocab, nVocabEn, nVocabLargeV),
		inRange("n_audio_ctx", h.nAudioCtx, 1, 1500),
		inRange("n_audio_state", h.nAudioState, 1, 4096),
		inRange("n_audio_head", h.nAudioHead, 1, 64),
		inRange("n_audio_layer", h.nAudioLayer, 1, 64),
		inRange("n_text_ctx", h.nTextCtx, 1, 4096),
		inRange("n_text_state", h.nTextState, h.nAudioState, h.nAudioState),
		inRange("n_text_head", h.nTextHead, 1, 64),
		inRange("n_text_layer", h.nTextLayer, 1, 64),
		inRange("n_mels", h.nMels, 80, 128),
		inRange("ftype", h.ftype, 0, 1<<20),
	)
}

// expected returns the tensor count and total element count whisper.cpp
// allocates for these hyper-parameters (whisper_model_load's tensor list).
func (h hparams) expected() (tensors, elements int64) {
	s := int64(h.nAudioState)
	encLayer := 12*s*s + 12*s // mlp 8s²+5s, two layer norms 4s, attention 4s²+3s
	decLayer := encLayer + 4*s*s + 5*s
	enc := s*int64(h.nAudioCtx) + 3*int64(h.nMels)*s + s + 3*s*s + s + 2*s + int64(h.nAudioLayer)*encLayer
	dec := s*int64(h.nTextCtx) + s*int64(h.nVocab) + 2*s + int64(h.nTextLayer)*decLayer
	return 7 + 15*int64(h.nAudioLayer) + 4 + 24*int64(h.nTextLayer), enc + dec
}

func (h hparams) modelType() string {
	switch h.nAudioLayer {
	case 4:
		return "tiny"
	case 6:
		return "base"
	case 12:
		return "small"
	case 24:
		return "medium"
	case 32:
		return "large"
	}
	return "custom"
}

// cursor reads a file front to back through a buffer and can jump forward
// over tensor data without reading it.
type cursor struct {
	r    io.ReaderAt
	size int64
	off  int64
	br   *bufio.Reader
}

func newCursor(r io.ReaderAt, size int64) *cursor {
	return &cursor{r: r, size: size, br: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 64<<10)}
}

func (c *cursor) left() int64 { return c.size - c.off }

// read returns the next n bytes (n is small and already bounded).
func (c *cursor) read(p []byte) error {
	if int64(len(p)) > c.left() {
		return io.ErrUnexpectedEOF
	}
	if _, err := io.ReadFull(c.br, p); err != nil {
		return err
	}
	c.off += int64(len(p))
	return nil
}

func (c *cursor) i32() (int32, error) {
	var b [4]byte
	if err := c.read(b[:]); err != nil {
		return 0, err
	}
	return int32(binary.LittleEndian.Uint32(b[:])), nil
}

func (c *cursor) skip(n int64) error {
	if n < 0 || n > c.left() {
		return io.ErrUnexpectedEOF
	}
	if n <= int64(c.br.Buffered()) {
		c.br.Discard(int(n))
	} else {
		c.br.Reset(io.NewSectionReader(c.r, c.off+n, c.size-c.off-n))
	}
	c.off += n
	return nil
}

func checkModel(r io.ReaderAt, size int64) (ModelInfo, error) {
	c := newCursor(r, size)
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrModelInvalid)
	}
	truncated := func(what string) error {
		return invalid("truncated in %s at byte %d of %d", what, c.off, size)
	}

	magic, err := c.i32()
	if err != nil {
		return ModelInfo{}, invalid("file too short (%d bytes)", size)
	}
	if uint32(magic) != ggmlMagic {
		return ModelInfo{}, invalid("bad magic %#08x, want %#08x (\"ggml\")", uint32(magic), ggmlMagic)
	}
	var h hparams
	for _, p := range []*int32{&h.nVocab, &h.nAudioCtx, &h.nAudioState, &h.nAudioHead, &h.nAudioLayer,
		&h.nTextCtx, &h.nTextState, &h.nTextHead, &h.nTextLayer, &h.nMels, &h.ftype} {
		if *p, err = c.i32(); err != nil {
			return ModelInfo{}, truncated("header")
		}
	}
	if err := h.check(); err != nil {
		return ModelInfo{}, invalid("bad header: %v", err)
	}

	// Mel filters: n_mel x n_fft float32.
	nMel, err1 := c.i32()
	nFFT, err2 := c.i32()
	if err1 != nil || err2 != nil {
		return ModelInfo{}, truncated("mel filters")
	}
	if nMel != h.nMels || nFFT != whisperNFFT {
		return ModelInfo{}, invalid("mel filters %dx%d, want %dx%d", nMel, nFFT, h.nMels, whisperNFFT)
	}
	if err := c.skip(int64(nMel) * int64(nFFT) * 4); err != nil {
		return ModelInfo{}, truncated("mel filters")
	}

	// Vocabulary: count, then length-prefixed words.
	nWords, err := c.i32()
	if err != nil {
		return ModelInfo{}, truncated("vocabulary")
	}
	if nWords < 1 || nWords > h.nVocab {
		return ModelInfo{}, invalid("vocabulary of %d words, want 1..%d", nWords, h.nVocab)
	}
	for i := int32(0); i < nWords; i++ {
		n, err := c.i32()
		if err != nil {
			return ModelInfo{}, truncated("vocabulary")
		}
		if n < 0 || n > maxWordLen {
			return ModelInfo{}, invalid("vocabulary word %d is %d bytes long", i, n)
		}
		if err := c.skip(int64(n)); err != nil {
			return ModelInfo{}, truncated("vocabulary")
		}
	}

	// Tensors until the end of the file.
	var tensors, elements int64
	for c.left() > 0 {
		var hdr [3]int32 // n_dims, name length, type
		for i := range hdr {
			if hdr[i], err = c.i32(); err != nil {
				return ModelInfo{}, truncated("tensor header")
			}
		}
		nDims, nameLen, ttype := hdr[0], hdr[1], hdr[2]
		if nDims < 1 || nDims > maxDims {
			return ModelInfo{}, invalid("tensor %d has %d dimensions", tensors, nDims)
		}
		if nameLen < 1 || nameLen > maxNameLen {
			return ModelInfo{}, invalid("tensor %d has a %d-byte name", tensors, nameLen)
		}
		blockElems, blockBytes, ok := ggmlBlock(ttype)
		if !ok {
			return ModelInfo{}, invalid("tensor %d has unsupported type %d", tensors, ttype)
		}
		n := int64(1)
		var ne0 int64
		for d := int32(0); d < nDims; d++ {
			v, err := c.i32()
			if err != nil {
				return ModelInfo{}, truncated("tensor header")
			}
			if v < 1 {
				return ModelInfo{}, invalid("tensor %d has dimension %d", tensors, v)
			}
			if d == 0 {
				ne0 = int64(v)
			}
			n *= int64(v)
			if n > maxElements {
				return ModelInfo{}, invalid("tensor %d has more than %d elements", tensors, int64(maxElements))
			}
		}
		if ne0%blockElems != 0 {
			return ModelInfo{}, invalid("tensor %d: row of %d elements for a %d-element block type", tensors, ne0, blockElems)
		}
		name := make([]byte, nameLen)
		if err := c.read(name); err != nil {
			return ModelInfo{}, truncated("tensor name")
		}
		if err := c.skip(n / blockElems * blockBytes); err != nil {
			return ModelInfo{}, truncated(fmt.Sprintf("tensor %q", name))
		}
		tensors++
		elements += n
	}

	wantTensors, wantElements := h.expected()
	if tensors != wantTensors || elements != wantElements {
		return ModelInfo{}, invalid("%d tensors with %d elements, the header implies %d with %d (incomplete or foreign model)",
			tensors, elements, wantTensors, wantElements)
	}
	return ModelInfo{
		Type:         h.modelType(),
		Multilingual: h.nVocab >= nVocabEn+1,
		Size:         size,
		Tensors:      int(tensors),
	}, nil
}
