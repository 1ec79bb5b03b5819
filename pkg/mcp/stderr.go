package mcp

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"strings"
	"time"
)

// lineLimiter is a token bucket counted in lines: burst lines at once, then
// rate lines a second.
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

// logStderr reads r line by line until EOF or a read error and logs each
// line. Lines longer than maxLine are cut (the rest of the line is read and
// dropped), and lines over the limiter's rate are counted and reported as
// one "dropped" record when logging resumes or the stream ends. Memory use
// is bounded by maxLine whatever the server writes.
func logStderr(r io.Reader, log *slog.Logger, maxLine int, lim *lineLimiter) {
	br := bufio.NewReaderSize(r, maxLine)
	dropped := 0
	emit := func(line []byte, cut bool) {
		if !lim.allow() {
			dropped++
			return
		}
		if dropped > 0 {
			log.Warn("mcp server stderr rate-limited", "dropped_lines", dropped)
			dropped = 0
		}
		s := strings.ToValidUTF8(strings.TrimRight(string(line), "\r\n"), "?")
		if cut {
			log.Info("mcp server stderr", "line", s, "truncated", true)
			return
		}
		log.Info("mcp server stderr", "line", s)
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
			log.Warn("mcp server stderr rate-limited", "dropped_lines", dropped)
		}
		return
	}
}
