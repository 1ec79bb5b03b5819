package plugin

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"strings"
	"time"
)

// What of a plugin's stderr reaches the log: lines cut at stderrMaxLine
// bytes, stderrBurst lines at once then stderrPerSecond a second; the
// lines over that are counted and the count logged when logging resumes.
const (
	stderrMaxLine   = 1024
	stderrBurst     = 100
	stderrPerSecond = 10
)

// lineLimiter is a token bucket counted in lines.
type lineLimiter struct {
	now    func() time.Time
	burst  float64
	rate   float64
	tokens float64
	last   time.Time
}

func newLineLimiter(now func() time.Time, burst int, rate float64) *lineLimiter {
	return &lineLimiter{now: now, burst: float64(burst), rate: rate, tokens: float64(burst), last: now()}
}

func (l *lineLimiter) allow() bool {
	t := l.now()
	if el := t.Sub(l.last).Seconds(); el > 0 {
		l.tokens = min(l.burst, l.tokens+el*l.rate)
	}
	l.last = t
	if l.tokens >= 1 {
		l.tokens--
		return true
	}
	return false
}

// logStderr logs r's lines until it ends. Memory is bounded by
// stderrMaxLine whatever the plugin writes.
func logStderr(r io.Reader, log *slog.Logger, lim *lineLimiter) {
	br := bufio.NewReaderSize(r, stderrMaxLine)
	dropped := 0
	emit := func(line []byte, cut bool) {
		if !lim.allow() {
			dropped++
			return
		}
		if dropped > 0 {
			log.Warn("channel plugin stderr rate-limited", "dropped_lines", dropped)
			dropped = 0
		}
		s := strings.ToValidUTF8(strings.TrimRight(string(line), "\r\n"), "?")
		if cut {
			log.Info("channel plugin stderr", "line", s, "truncated", true)
			return
		}
		log.Info("channel plugin stderr", "line", s)
	}
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			emit(line, false)
			continue
		case errors.Is(err, bufio.ErrBufferFull):
			emit(line, true)
			for errors.Is(err, bufio.ErrBufferFull) { // drop the rest of the line
				_, err = br.ReadSlice('\n')
			}
			if err == nil {
				continue
			}
		case len(line) > 0:
			emit(line, false)
		}
		if dropped > 0 {
			log.Warn("channel plugin stderr rate-limited", "dropped_lines", dropped)
		}
		return
	}
}
