package audio

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// Limits ReadWAV enforces whatever the header says.
const (
	// MaxWAVDataBytes caps the sample data read from one file (about 17
	// minutes of 16 kHz mono, 3 minutes of 48 kHz stereo).
	MaxWAVDataBytes = 32 << 20
	// MaxWAVChannels and MaxWAVSampleRate bound the format chunk.
	MaxWAVChannels   = 32
	MaxWAVSampleRate = 768000

	maxFmtChunk = 1 << 10 // a real fmt chunk is 16, 18 or 40 bytes
	readChunk   = 64 << 10
)

// WAV errors, for errors.Is.
var (
	ErrNotWAV         = errors.New("not a RIFF/WAVE file")
	ErrUnsupportedWAV = errors.New("unsupported WAV encoding (want 16-bit integer PCM)")
	ErrWAVTooLarge    = errors.New("WAV data too large")
)

// waveFormatPCM and waveFormatExtensible are the format tags ReadWAV
// accepts; an extensible file must carry the PCM sub-format GUID.
const (
	waveFormatPCM        = 0x0001
	waveFormatExtensible = 0xFFFE
)

// ReadWAV reads a 16-bit PCM WAV stream and returns its interleaved samples
// as float32 in [-1, 1), with the sample rate and channel count. Chunks other
// than "fmt " and "data" are skipped without being buffered. Header sizes are
// never trusted for allocation: data is decoded in small pieces up to
// MaxWAVDataBytes. A data chunk shorter than its header claims (as streamed
// writers leave it) is accepted; a trailing partial frame is dropped.
func ReadWAV(r io.Reader) (samples []float32, sampleRate int, channels int, err error) {
	br := bufio.NewReaderSize(r, readChunk)
	var hdr [12]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, 0, 0, fmt.Errorf("audio: read wav header: %w", ErrNotWAV)
	}
	if string(hdr[0:4]) != "RIFF" || string(hdr[8:12]) != "WAVE" {
		return nil, 0, 0, fmt.Errorf("audio: read wav header: %w", ErrNotWAV)
	}
	var haveFmt bool
	for {
		var ch [8]byte
		if _, err := io.ReadFull(br, ch[:]); err != nil {
			if haveFmt {
				return nil, 0, 0, fmt.Errorf("audio: read wav: no data chunk: %w", ErrNotWAV)
			}
			return nil, 0, 0, fmt.Errorf("audio: read wav: no fmt chunk: %w", ErrNotWAV)
		}
		id, size := string(ch[0:4]), int64(binary.LittleEndian.Uint32(ch[4:8]))
		switch id {
		case "fmt ":
			if haveFmt {
				return nil, 0, 0, fmt.Errorf("audio: read wav: duplicate fmt chunk: %w", ErrNotWAV)
			}
			sampleRate, channels, err = readFmt(br, size)
			if err != nil {
				return nil, 0, 0, err
			}
			haveFmt = true
		case "data":
			if !haveFmt {
				return nil, 0, 0, fmt.Errorf("audio: read wav: data chunk before fmt chunk: %w", ErrNotWAV)
			}
			samples, err = readData(br, size, channels)
			if err != nil {
				return nil, 0, 0, err
			}
			return samples, sampleRate, channels, nil
		default:
			if _, err := io.CopyN(io.Discard, br, size+size&1); err != nil {
				return nil, 0, 0, fmt.Errorf("audio: read wav: skip %q chunk: %w", id, ErrNotWAV)
			}
		}
	}
}

func readFmt(r io.Reader, size int64) (rate, channels int, err error) {
	if size < 16 || size > maxFmtChunk {
		return 0, 0, fmt.Errorf("audio: read wav: fmt chunk of %d bytes: %w", size, ErrNotWAV)
	}
	b := make([]byte, size+size&1)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, 0, fmt.Errorf("audio: read wav: short fmt chunk: %w", ErrNotWAV)
	}
	le := binary.LittleEndian
	format := le.Uint16(b[0:2])
	channels = int(le.Uint16(b[2:4]))
	rate = int(le.Uint32(b[4:8]))
	blockAlign := int(le.Uint16(b[12:14]))
	bits := int(le.Uint16(b[14:16]))
	if format == waveFormatExtensible {
		// cbSize(2) validBits(2) channelMask(4) subFormat GUID(16): the
		// GUID's first two bytes are the plain format tag.
		if size < 40 || le.Uint16(b[24:26]) != waveFormatPCM {
			return 0, 0, fmt.Errorf("audio: read wav: extensible sub-format: %w", ErrUnsupportedWAV)
		}
		format = waveFormatPCM
	}
	switch {
	case format != waveFormatPCM:
		return 0, 0, fmt.Errorf("audio: read wav: format tag %#x: %w", format, ErrUnsupportedWAV)
	case bits != 16:
		return 0, 0, fmt.Errorf("audio: read wav: %d bits per sample: %w", bits, ErrUnsupportedWAV)
	case channels < 1 || channels > MaxWAVChannels:
		return 0, 0, fmt.Errorf("audio: read wav: %d channels: %w", channels, ErrUnsupportedWAV)
	case rate < 1 || rate > MaxWAVSampleRate:
		return 0, 0, fmt.Errorf("audio: read wav: sample rate %d: %w", rate, ErrUnsupportedWAV)
	case blockAlign != 2*channels:
		return 0, 0, fmt.Errorf("audio: read wav: block align %d for %d channels: %w", blockAlign, channels, ErrNotWAV)
	}
	return rate, channels, nil
}

// readData decodes up to size bytes (fewer if the stream ends first) and
// fails once more than MaxWAVDataBytes would be needed.
func readData(r io.Reader, size int64, channels int) ([]float32, error) {
	want := size
	if want > MaxWAVDataBytes {
		want = MaxWAVDataBytes + 1 // enough to tell a real overrun from a lying header
	}
	lr := io.LimitReader(r, want)
	buf := make([]byte, readChunk)
	var out []float32
	var carry int // a leftover odd byte at buf[0]
	var total int64
	for {
		n, err := lr.Read(buf[carry:])
		total += int64(n)
		if total > MaxWAVDataBytes {
			return nil, fmt.Errorf("audio: read wav: more than %d bytes of samples: %w", MaxWAVDataBytes, ErrWAVTooLarge)
		}
		n += carry
		whole := n &^ 1
		start := len(out)
		out = slices.Grow(out, whole/2)[:start+whole/2]
		decodePCM16(out[start:], buf[:whole])
		carry = n - whole
		if carry == 1 {
			buf[0] = buf[whole]
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("audio: read wav data: %w", err)
		}
	}
	return out[:len(out)-len(out)%channels], nil
}

// WriteWAV writes interleaved samples as a 16-bit PCM WAV file. Samples are
// clipped to [-1, 1] and rounded.
func WriteWAV(w io.Writer, samples []float32, sampleRate, channels int) error {
	if channels < 1 || channels > MaxWAVChannels || sampleRate < 1 || sampleRate > MaxWAVSampleRate {
		return fmt.Errorf("audio: write wav: %d Hz, %d channels: %w", sampleRate, channels, ErrUnsupportedWAV)
	}
	dataLen := int64(len(samples)) * 2
	if dataLen > math.MaxUint32-36 {
		return fmt.Errorf("audio: write wav: %d samples: %w", len(samples), ErrWAVTooLarge)
	}
	le := binary.LittleEndian
	h := make([]byte, 0, 44)
	h = append(h, "RIFF"...)
	h = le.AppendUint32(h, uint32(36+dataLen))
	h = append(h, "WAVEfmt "...)
	h = le.AppendUint32(h, 16)
	h = le.AppendUint16(h, waveFormatPCM)
	h = le.AppendUint16(h, uint16(channels))
	h = le.AppendUint32(h, uint32(sampleRate))
	h = le.AppendUint32(h, uint32(sampleRate*channels*2))
	h = le.AppendUint16(h, uint16(channels*2))
	h = le.AppendUint16(h, 16)
	h = append(h, "data"...)
	h = le.AppendUint32(h, uint32(dataLen))
	bw := bufio.NewWriter(w)
	if _, err := bw.Write(h); err != nil {
		return fmt.Errorf("audio: write wav: %w", err)
	}
	var b [2]byte
	for _, s := range samples {
		le.PutUint16(b[:], uint16(floatToPCM16(s)))
		if _, err := bw.Write(b[:]); err != nil {
			return fmt.Errorf("audio: write wav: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("audio: write wav: %w", err)
	}
	return nil
}

func floatToPCM16(s float32) int16 {
	v := math.Round(float64(s) * 32768)
	switch {
	case v != v: // NaN
		return 0
	case v > math.MaxInt16:
		return math.MaxInt16
	case v < math.MinInt16:
		return math.MinInt16
	}
	return int16(v)
}
