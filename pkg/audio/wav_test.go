package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"agent/pkg/nativetest"
)

// wavBytes builds a WAV file by hand: fmt fields, then the given chunks.
type chunk struct {
	id   string
	size uint32 // as written in the header
	body []byte
}

func wavFile(chunks ...chunk) []byte {
	var b bytes.Buffer
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(0xffffffff))
	b.WriteString("WAVE")
	for _, c := range chunks {
		b.WriteString(c.id)
		binary.Write(&b, binary.LittleEndian, c.size)
		b.Write(c.body)
	}
	return b.Bytes()
}

func fmtChunk(format, channels uint16, rate uint32, bits uint16) chunk {
	var b bytes.Buffer
	le := binary.LittleEndian
	binary.Write(&b, le, format)
	binary.Write(&b, le, channels)
	binary.Write(&b, le, rate)
	binary.Write(&b, le, rate*uint32(channels)*uint32(bits/8))
	binary.Write(&b, le, channels*bits/8)
	binary.Write(&b, le, bits)
	return chunk{"fmt ", uint32(b.Len()), b.Bytes()}
}

func extensibleFmt(channels uint16, rate uint32, sub uint16) chunk {
	c := fmtChunk(waveFormatExtensible, channels, rate, 16)
	var b bytes.Buffer
	b.Write(c.body)
	le := binary.LittleEndian
	binary.Write(&b, le, uint16(22))           // cbSize
	binary.Write(&b, le, uint16(16))           // valid bits
	binary.Write(&b, le, uint32(3))            // channel mask
	binary.Write(&b, le, sub)                  // sub-format GUID, first two bytes
	b.Write([]byte{0, 0, 0, 0, 0x10, 0, 0x80}) // rest of KSDATAFORMAT_SUBTYPE_PCM
	b.Write([]byte{0, 0, 0xaa, 0, 0x38, 0x9b, 0x71})
	return chunk{"fmt ", uint32(b.Len()), b.Bytes()}
}

func pcm(v ...int16) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, v)
	return b.Bytes()
}

func TestReadWAV(t *testing.T) {
	data := pcm(0, 16384, -16384, -32768)
	tests := []struct {
		name     string
		file     []byte
		want     []float32
		rate, ch int
		err      error
	}{
		{"mono", wavFile(fmtChunk(1, 1, 16000, 16), chunk{"data", 8, data}), []float32{0, 0.5, -0.5, -1}, 16000, 1, nil},
		{"stereo", wavFile(fmtChunk(1, 2, 48000, 16), chunk{"data", 8, data}), []float32{0, 0.5, -0.5, -1}, 48000, 2, nil},
		{"stereo partial frame", wavFile(fmtChunk(1, 2, 48000, 16), chunk{"data", 6, data[:6]}), []float32{0, 0.5}, 48000, 2, nil},
		{"odd data byte dropped", wavFile(fmtChunk(1, 1, 8000, 16), chunk{"data", 3, data[:3]}), []float32{0}, 8000, 1, nil},
		{"streamed size", wavFile(fmtChunk(1, 1, 16000, 16), chunk{"data", 0xffffffff, data}), []float32{0, 0.5, -0.5, -1}, 16000, 1, nil},
		{"header shorter than data", wavFile(fmtChunk(1, 1, 16000, 16), chunk{"data", 4, data}), []float32{0, 0.5}, 16000, 1, nil},
		{"skips LIST and odd pad", wavFile(fmtChunk(1, 1, 16000, 16), chunk{"LIST", 3, []byte{1, 2, 3, 0}}, chunk{"data", 2, data[:2]}), []float32{0}, 16000, 1, nil},
		{"extensible pcm", wavFile(extensibleFmt(1, 16000, 1), chunk{"data", 2, data[2:4]}), []float32{0.5}, 16000, 1, nil},
		{"extensible float", wavFile(extensibleFmt(1, 16000, 3), chunk{"data", 2, data[2:4]}), nil, 0, 0, ErrUnsupportedWAV},
		{"float format", wavFile(fmtChunk(3, 1, 16000, 32), chunk{"data", 4, data}), nil, 0, 0, ErrUnsupportedWAV},
		{"8 bit", wavFile(fmtChunk(1, 1, 16000, 8), chunk{"data", 4, data}), nil, 0, 0, ErrUnsupportedWAV},
		{"zero channels", wavFile(fmtChunk(1, 0, 16000, 16), chunk{"data", 4, data}), nil, 0, 0, ErrUnsupportedWAV},
		{"too many channels", wavFile(fmtChunk(1, 1000, 16000, 16), chunk{"data", 4, data}), nil, 0, 0, ErrUnsupportedWAV},
		{"zero rate", wavFile(fmtChunk(1, 1, 0, 16), chunk{"data", 4, data}), nil, 0, 0, ErrUnsupportedWAV},
		{"huge rate", wavFile(fmtChunk(1, 1, 1<<31, 16), chunk{"data", 4, data}), nil, 0, 0, ErrUnsupportedWAV},
		{"data before fmt", wavFile(chunk{"data", 4, data}, fmtChunk(1, 1, 16000, 16)), nil, 0, 0, ErrNotWAV},
		{"no data", wavFile(fmtChunk(1, 1, 16000, 16)), nil, 0, 0, ErrNotWAV},
		{"no fmt", wavFile(), nil, 0, 0, ErrNotWAV},
		{"duplicate fmt", wavFile(fmtChunk(1, 1, 16000, 16), fmtChunk(1, 1, 16000, 16)), nil, 0, 0, ErrNotWAV},
		{"huge fmt", wavFile(chunk{"fmt ", 1 << 30, nil}), nil, 0, 0, ErrNotWAV},
		{"short fmt", wavFile(chunk{"fmt ", 8, make([]byte, 8)}), nil, 0, 0, ErrNotWAV},
		{"truncated fmt", wavFile(chunk{"fmt ", 16, make([]byte, 4)}), nil, 0, 0, ErrNotWAV},
		{"skip past end", wavFile(chunk{"junk", 0xfffffff0, []byte{1, 2}}), nil, 0, 0, ErrNotWAV},
		{"not riff", []byte("RIFX\x00\x00\x00\x00WAVE"), nil, 0, 0, ErrNotWAV},
		{"empty", nil, nil, 0, 0, ErrNotWAV},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, rate, ch, err := ReadWAV(bytes.NewReader(tt.file))
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("ReadWAV error = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadWAV error = %v", err)
			}
			if rate != tt.rate || ch != tt.ch {
				t.Errorf("ReadWAV rate, channels = %d, %d, want %d, %d", rate, ch, tt.rate, tt.ch)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("ReadWAV samples = %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("ReadWAV samples = %v, want %v", got, tt.want)
					break
				}
			}
		})
	}
}

// endless is an unbounded stream of silence.
type endless struct{}

func (endless) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestReadWAVTooLarge(t *testing.T) {
	head := wavFile(fmtChunk(1, 1, 16000, 16), chunk{"data", 0xffffffff, nil})
	_, _, _, err := ReadWAV(io.MultiReader(bytes.NewReader(head), endless{}))
	if !errors.Is(err, ErrWAVTooLarge) {
		t.Fatalf("ReadWAV(endless data) error = %v, want ErrWAVTooLarge", err)
	}
}

func TestWAVRoundTrip(t *testing.T) {
	in := []float32{0, 0.25, -0.25, 0.999999, -1, 1.5, -2}
	want := []float32{0, 0.25, -0.25, 32767.0 / 32768, -1, 32767.0 / 32768, -1}
	var b bytes.Buffer
	if err := WriteWAV(&b, in, 22050, 1); err != nil {
		t.Fatal(err)
	}
	got, rate, ch, err := ReadWAV(&b)
	if err != nil {
		t.Fatal(err)
	}
	if rate != 22050 || ch != 1 || len(got) != len(want) {
		t.Fatalf("round trip = %v at %d Hz x%d, want %v at 22050 Hz x1", got, rate, ch, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("sample %d = %v, want %v", i, got[i], want[i])
		}
	}
	if err := WriteWAV(io.Discard, in, 0, 1); !errors.Is(err, ErrUnsupportedWAV) {
		t.Errorf("WriteWAV(rate 0) error = %v, want ErrUnsupportedWAV", err)
	}
}

// TestReadWAVFromSox reads what a real encoder writes (sox adds a LIST
// chunk to some outputs and writes WAVE_FORMAT_EXTENSIBLE for >2 channels).
func TestReadWAVFromSox(t *testing.T) {
	sox := nativetest.Sox(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		channels string
		want     int
	}{{"1", 1}, {"2", 2}, {"4", 4}} {
		out := filepath.Join(dir, "tone"+tc.channels+".wav")
		cmd := exec.Command(sox, "-n", "-r", "16000", "-c", tc.channels, "-b", "16", out, "synth", "0.5", "sine", "440")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sox: %v: %s", err, b)
		}
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		samples, rate, ch, err := ReadWAV(f)
		f.Close()
		if err != nil {
			t.Fatalf("ReadWAV(sox %s channels): %v", tc.channels, err)
		}
		if rate != 16000 || ch != tc.want || len(samples) != 8000*tc.want {
			t.Errorf("ReadWAV(sox %s channels) = %d samples at %d Hz x%d, want %d at 16000 x%d",
				tc.channels, len(samples), rate, ch, 8000*tc.want, tc.want)
		}
	}
}

func FuzzReadWAV(f *testing.F) {
	data := pcm(0, 100, -100, 32767)
	f.Add(wavFile(fmtChunk(1, 1, 16000, 16), chunk{"data", 8, data}))
	f.Add(wavFile(fmtChunk(1, 2, 44100, 16), chunk{"LIST", 4, []byte("INFO")}, chunk{"data", 0xffffffff, data}))
	f.Add(wavFile(extensibleFmt(2, 48000, 1), chunk{"data", 8, data}))
	f.Add([]byte("RIFF\x00\x00\x00\x00WAVE"))
	f.Fuzz(func(t *testing.T, b []byte) {
		samples, rate, ch, err := ReadWAV(bytes.NewReader(b))
		if err != nil {
			return
		}
		if ch < 1 || ch > MaxWAVChannels || rate < 1 || rate > MaxWAVSampleRate {
			t.Fatalf("accepted rate %d, channels %d", rate, ch)
		}
		if len(samples)%ch != 0 {
			t.Fatalf("%d samples is not a whole number of %d-channel frames", len(samples), ch)
		}
		if 2*len(samples) > len(b) {
			t.Fatalf("%d samples from %d input bytes", len(samples), len(b))
		}
	})
}
