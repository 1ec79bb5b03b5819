package audio

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestPCM16ToFloat32(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want []float32
	}{
		{"empty", nil, []float32{}},
		{"zero", []byte{0, 0}, []float32{0}},
		{"max", []byte{0xff, 0x7f}, []float32{32767.0 / 32768}},
		{"min", []byte{0x00, 0x80}, []float32{-1}},
		{"minus one lsb", []byte{0xff, 0xff}, []float32{-1.0 / 32768}},
		{"two", []byte{0x00, 0x40, 0x00, 0xc0}, []float32{0.5, -0.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PCM16ToFloat32(tt.in)
			if err != nil {
				t.Fatalf("PCM16ToFloat32(%v) error: %v", tt.in, err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("PCM16ToFloat32(%v) = %v, want %v", tt.in, got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("PCM16ToFloat32(%v)[%d] = %v, want %v", tt.in, i, got[i], tt.want[i])
				}
			}
		})
	}
	if _, err := PCM16ToFloat32([]byte{1, 2, 3}); !errors.Is(err, ErrOddLength) {
		t.Errorf("PCM16ToFloat32(3 bytes) error = %v, want ErrOddLength", err)
	}
}

func FuzzPCM16ToFloat32(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{0x00, 0x80, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := PCM16ToFloat32(b)
		if len(b)%2 != 0 {
			if err == nil {
				t.Fatalf("odd length %d: no error", len(b))
			}
			return
		}
		if err != nil {
			t.Fatalf("even length %d: %v", len(b), err)
		}
		if len(got) != len(b)/2 {
			t.Fatalf("len = %d, want %d", len(got), len(b)/2)
		}
		for i, s := range got {
			if s < -1 || s >= 1 {
				t.Fatalf("sample %d = %v out of [-1, 1)", i, s)
			}
			if back := floatToPCM16(s); back != int16(uint16(b[2*i])|uint16(b[2*i+1])<<8) {
				t.Fatalf("sample %d does not round-trip: %v -> %d", i, s, back)
			}
		}
	})
}

func TestMono(t *testing.T) {
	tests := []struct {
		name     string
		in       []float32
		channels int
		want     []float32
	}{
		{"mono passthrough", []float32{0.1, 0.2}, 1, []float32{0.1, 0.2}},
		{"zero channels passthrough", []float32{0.1}, 0, []float32{0.1}},
		{"stereo", []float32{0.5, -0.5, 1, 0}, 2, []float32{0, 0.5}},
		{"partial frame dropped", []float32{0.2, 0.4, 0.9}, 2, []float32{0.3}},
		{"three", []float32{0.3, 0.3, 0.3}, 3, []float32{0.3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Mono(tt.in, tt.channels)
			if len(got) != len(tt.want) {
				t.Fatalf("Mono(%v, %d) = %v, want %v", tt.in, tt.channels, got, tt.want)
			}
			for i := range got {
				if math.Abs(float64(got[i]-tt.want[i])) > 1e-6 {
					t.Errorf("Mono(%v, %d) = %v, want %v", tt.in, tt.channels, got, tt.want)
				}
			}
		})
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		n, rate int
		want    time.Duration
	}{
		{16000, 16000, time.Second},
		{8000, 16000, 500 * time.Millisecond},
		{1, 16000, 62500 * time.Nanosecond},
		{44100 * 3, 44100, 3 * time.Second},
		{1, 3, 333333333 * time.Nanosecond},
		{0, 16000, 0},
		{100, 0, 0},
		{100, -1, 0},
		{-5, 16000, 0},
		{math.MaxInt, 1, math.MaxInt64},
		{math.MaxInt - 1, math.MaxInt, 999999999},
	}
	for _, tt := range tests {
		if got := Duration(tt.n, tt.rate); got != tt.want {
			t.Errorf("Duration(%d, %d) = %v, want %v", tt.n, tt.rate, got, tt.want)
		}
	}
}
