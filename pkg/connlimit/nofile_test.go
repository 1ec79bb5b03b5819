package connlimit

import "testing"

func TestFitNoFile(t *testing.T) {
	for _, c := range []struct {
		max     int
		nofile  uint64
		want    int
		clamped bool
	}{
		{1024, 65536, 1024, false},
		{1024, 1280, 1024, false}, // exactly fits beside the 256 kept
		{1024, 1024, 768, true},   // a bare shell's limit
		{4096, 4096, 3840, true},
		{1024, 300, 150, true}, // tiny: half of it
		{100, 300, 100, false}, // never raised
		{64, 20, 16, true},     // absurd limit: the floor
		{1024, 1 << 40, 1024, false},
	} {
		got, clamped := FitNoFile(c.max, c.nofile, 256)
		if got != c.want || clamped != c.clamped {
			t.Errorf("FitNoFile(%d, %d) = %d, %v; want %d, %v", c.max, c.nofile, got, clamped, c.want, c.clamped)
		}
	}
}
