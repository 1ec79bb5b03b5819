package video

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// maxTimecode bounds a time the model gives (a day): far past any clip
// the tools take, small enough for every conversion to stay exact.
const maxTimecode = 24 * 3600

var (
	secondsRE  = regexp.MustCompile(`^[0-9]{1,6}(\.[0-9]{1,6})?$`)
	timecodeRE = regexp.MustCompile(`^(?:([0-9]{1,2}):)?([0-9]{1,2}):([0-9]{1,2}(?:\.[0-9]{1,6})?)$`)
)

// parseTime reads a point in a clip: seconds ("12.5") or
// [hh:]mm:ss[.fraction] ("1:02", "00:01:02.250"). Minutes and seconds of
// a timecode are below 60; no sign, exponent, NaN or infinity.
func parseTime(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("is empty")
	}
	if len(s) > 32 {
		return 0, errors.New("is too long for a time")
	}
	if secondsRE.MatchString(s) {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v > maxTimecode {
			return 0, fmt.Errorf("%q is past %d seconds", s, maxTimecode)
		}
		return v, nil
	}
	m := timecodeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a time: give seconds (12.5) or [hh:]mm:ss[.ms] (1:02.5, 00:01:02)", s)
	}
	var h, mins int
	if m[1] != "" {
		h, _ = strconv.Atoi(m[1])
	}
	mins, _ = strconv.Atoi(m[2])
	sec, _ := strconv.ParseFloat(m[3], 64)
	if mins >= 60 || sec >= 60 {
		return 0, fmt.Errorf("%q: minutes and seconds must be below 60", s)
	}
	v := float64(h*3600+mins*60) + sec
	if v > maxTimecode {
		return 0, fmt.Errorf("%q is past %d seconds", s, maxTimecode)
	}
	return v, nil
}

// fmtDur writes seconds for the model: "2.50 s", "1:02.5 (62.5 s)".
func fmtDur(sec float64) string {
	if math.IsNaN(sec) || sec < 0 {
		return "unknown length"
	}
	if sec < 60 {
		return fmt.Sprintf("%.2f s", sec)
	}
	t := int64(math.Round(sec * 10)) // tenths
	h, m, s := t/36000, t/600%60, float64(t%600)/10
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%04.1f (%.1f s)", h, m, s, sec)
	}
	return fmt.Sprintf("%d:%04.1f (%.1f s)", m, s, sec)
}

// ffTime writes seconds for ffmpeg's -ss and -t: a plain decimal, no
// exponent, millisecond precision.
func ffTime(sec float64) string {
	return strconv.FormatFloat(sec, 'f', 3, 64)
}
