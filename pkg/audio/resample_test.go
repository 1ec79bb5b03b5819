package audio

import (
	"math"
	"testing"
)

func sine(n, rate int, hz, amp float64) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(amp * math.Sin(2*math.Pi*hz*float64(i)/float64(rate)))
	}
	return s
}

// maxErrVsSine compares out (at rate) with the ideal sine, skipping margin
// samples at each end where the filter sees the zero padding.
func maxErrVsSine(out []float32, rate int, hz, amp float64, margin int) float64 {
	var worst float64
	for i := margin; i < len(out)-margin; i++ {
		want := amp * math.Sin(2*math.Pi*hz*float64(i)/float64(rate))
		worst = math.Max(worst, math.Abs(float64(out[i])-want))
	}
	return worst
}

func rms(s []float32) float64 {
	var sum float64
	for _, v := range s {
		sum += float64(v) * float64(v)
	}
	return math.Sqrt(sum / float64(len(s)))
}

func TestResampleLength(t *testing.T) {
	tests := []struct{ n, from, to, want int }{
		{48000, 48000, 16000, 16000},
		{16000, 16000, 48000, 48000},
		{44100, 44100, 16000, 16000},
		{22050 * 3, 22050, 16000, 48000},
		{10, 3, 2, 7}, // 6.67 rounds up
		{10, 4, 3, 8}, // 7.5 rounds half up
		{1, 48000, 16000, 0},
		{2, 48000, 16000, 1},
		{5, 16000, 16000, 5},
		{0, 16000, 8000, 0},
		{100, 16000, 15999, 100},
	}
	for _, tt := range tests {
		got := Resample(make([]float32, tt.n), tt.from, tt.to)
		if len(got) != tt.want {
			t.Errorf("len(Resample(%d samples, %d, %d)) = %d, want %d", tt.n, tt.from, tt.to, len(got), tt.want)
		}
	}
}

func TestResampleInvalidAndEqual(t *testing.T) {
	in := []float32{0.1, 0.2}
	if got := Resample(in, 0, 16000); got != nil {
		t.Errorf("Resample(from 0) = %v, want nil", got)
	}
	if got := Resample(in, 16000, -1); got != nil {
		t.Errorf("Resample(to -1) = %v, want nil", got)
	}
	got := Resample(in, 16000, 16000)
	if len(got) != 2 || got[0] != 0.1 || got[1] != 0.2 {
		t.Fatalf("Resample(equal rates) = %v, want %v", got, in)
	}
	got[0] = 9
	if in[0] != 0.1 {
		t.Error("Resample(equal rates) aliases its input")
	}
}

func TestResampleAccuracy(t *testing.T) {
	tests := []struct {
		name     string
		from, to int
		hz       float64
		maxErr   float64
	}{
		{"48k to 16k, 1 kHz", 48000, 16000, 1000, 2e-3},
		{"44.1k to 16k, 3 kHz", 44100, 16000, 3000, 2e-3},
		{"22.05k to 16k, 440 Hz", 22050, 16000, 440, 2e-3},
		{"16k to 48k, 2 kHz", 16000, 48000, 2000, 2e-3},
		{"8k to 16k, 300 Hz", 8000, 16000, 300, 2e-3},
		{"16k to 15999 (no table), 500 Hz", 16000, 15999, 500, 2e-3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := sine(tt.from/2, tt.from, tt.hz, 0.5)
			out := Resample(in, tt.from, tt.to)
			if e := maxErrVsSine(out, tt.to, tt.hz, 0.5, tt.to/50); e > tt.maxErr {
				t.Errorf("max error vs ideal sine = %.2g, want <= %.2g", e, tt.maxErr)
			}
		})
	}
}

func TestResampleAntiAlias(t *testing.T) {
	// 10 kHz cannot exist at 16 kHz; without a low-pass it would fold to 6 kHz.
	in := sine(48000, 48000, 10000, 0.5)
	out := Resample(in, 48000, 16000)
	mid := out[800 : len(out)-800]
	if r := rms(mid); r > 0.5/math.Sqrt2*0.01 {
		t.Errorf("10 kHz tone after 48k->16k has RMS %.3g, want 40 dB below the input's", r)
	}
}

func TestResampleDC(t *testing.T) {
	in := make([]float32, 4410)
	for i := range in {
		in[i] = 0.25
	}
	out := Resample(in, 44100, 16000)
	for i := 100; i < len(out)-100; i++ {
		if math.Abs(float64(out[i])-0.25) > 1e-4 {
			t.Fatalf("DC not preserved: out[%d] = %v", i, out[i])
		}
	}
}

func BenchmarkResample48kTo16k(b *testing.B) {
	in := sine(48000, 48000, 440, 0.5)
	b.SetBytes(int64(len(in)) * 4)
	for b.Loop() {
		Resample(in, 48000, 16000)
	}
}
