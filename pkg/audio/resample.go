package audio

import (
	"math"
	"slices"
)

// Resampler design: a Kaiser-windowed sinc low-pass, cut off a little below
// the lower of the two Nyquist frequencies, evaluated at every output
// instant. For rational ratios with few phases the kernel is tabulated once
// per phase (polyphase); otherwise it is computed per output sample.
const (
	sincZeros    = 16   // zero crossings of the sinc on each side of the centre
	kaiserBeta   = 8.0  // stop-band attenuation around 80 dB
	passFraction = 0.95 // cutoff as a fraction of the lower Nyquist frequency
	maxPhases    = 4096 // above this, no table
)

// Resample converts mono samples from one sample rate to another with a
// windowed-sinc interpolator (band-limited: downsampling filters out what the
// new rate cannot carry). The result has round(len*to/from) samples. It
// returns nil for non-positive rates and a copy when the rates are equal.
func Resample(samples []float32, from, to int) []float32 {
	if from <= 0 || to <= 0 {
		return nil
	}
	if from == to || len(samples) == 0 {
		return slices.Clone(samples)
	}
	g := gcd(from, to)
	up, down := int64(to/g), int64(from/g) // output i sits at input position i*down/up
	n := int((int64(len(samples))*int64(to) + int64(from)/2) / int64(from))
	out := make([]float32, n)

	fc := passFraction * math.Min(1, float64(to)/float64(from)) // in cycles per input sample * 2
	half := float64(sincZeros) / fc                             // kernel half-width in input samples
	k0 := -int(math.Ceil(half))                                 // taps j = base+k0 .. base+k0+taps-1
	taps := 2*int(math.Ceil(half)) + 1

	kernel := func(x float64) float64 { // x in input samples from the output instant
		if math.Abs(x) >= half {
			return 0
		}
		return fc * sinc(fc*x) * kaiser(x/half)
	}
	// phaseTaps fills c with the normalised taps for fractional offset frac.
	phaseTaps := func(c []float64, frac float64) {
		var sum float64
		for k := range c {
			c[k] = kernel(frac - float64(k0+k))
			sum += c[k]
		}
		if sum != 0 {
			for k := range c {
				c[k] /= sum
			}
		}
	}

	var table [][]float64
	if up <= maxPhases && up <= int64(n) {
		table = make([][]float64, up)
		for p := range table {
			table[p] = make([]float64, taps)
			phaseTaps(table[p], float64(p)/float64(up))
		}
	}
	c := make([]float64, taps)
	for i := range out {
		pos := int64(i) * down
		base, phase := int(pos/up), pos%up
		coef := c
		if table != nil {
			coef = table[phase]
		} else {
			phaseTaps(c, float64(phase)/float64(up))
		}
		var acc float64
		first := base + k0
		for k, w := range coef {
			j := first + k
			if j < 0 || j >= len(samples) {
				continue
			}
			acc += w * float64(samples[j])
		}
		out[i] = float32(acc)
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	return math.Sin(math.Pi*x) / (math.Pi * x)
}

// kaiser is the Kaiser window at t in [-1, 1].
func kaiser(t float64) float64 {
	return besselI0(kaiserBeta*math.Sqrt(1-t*t)) / besselI0(kaiserBeta)
}

// besselI0 is the modified Bessel function of the first kind, order 0.
func besselI0(x float64) float64 {
	sum, term := 1.0, 1.0
	for k := 1; k < 50; k++ {
		term *= (x / (2 * float64(k))) * (x / (2 * float64(k)))
		sum += term
		if term < sum*1e-12 {
			break
		}
	}
	return sum
}
