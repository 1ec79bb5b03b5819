package plugin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"agent/pkg/clip"
	"agent/pkg/clock"
)

// SendError is a plugin's "error" answer to a send (the send is retried).
type SendError struct{ Text string }

func (e *SendError) Error() string { return "the plugin could not deliver it: " + e.Text }

// ErrUnanswered is wrapped by a send that got no answer: none within the
// timeout, or the plugin exited (the send is retried).
var ErrUnanswered = errors.New("send unanswered")

// maxNotes bounds the warnings one connection logs about lines it ignores
// (unknown types, answers to unknown sends, invalid messages); the rest
// are counted and the count logged when the connection ends.
const maxNotes = 10

// conn is one run of a plugin: its pipes, the sends waiting for an
// answer, and why it ended.
type conn struct {
	c       *Channel
	p       Process
	clock   clock.Clock
	logger  *slog.Logger
	timeout time.Duration

	ctx    context.Context // ends with the connection
	cancel context.CancelFunc

	wq    chan writeReq
	dead  chan struct{} // closed when the connection is reset or ends
	once  sync.Once
	cause error // why; set before dead closes

	exited     chan struct{} // the process was waited for
	readerDone chan struct{}
	writerDone chan struct{}
	stderrDone chan struct{}

	mu          sync.Mutex
	pending     map[string]chan error // send id -> its answer
	pausedTotal time.Duration         // reading stopped for back-pressure
	pausedSince time.Time             // zero while reading
	notes       int
	awaiting    int // sends written, waiting for their answer
}

type writeReq struct {
	line []byte
	done chan error
}

// newConn serves p: its stdout read, its stdin written, its stderr
// logged, its exit noticed.
func newConn(ctx context.Context, c *Channel, p Process) *conn {
	cn := &conn{c: c, p: p, clock: c.clock, logger: c.logger, timeout: c.o.AnswerTimeout,
		wq: make(chan writeReq), dead: make(chan struct{}), exited: make(chan struct{}),
		readerDone: make(chan struct{}), writerDone: make(chan struct{}), stderrDone: make(chan struct{}),
		pending: map[string]chan error{}}
	cn.ctx, cn.cancel = context.WithCancel(ctx)
	go cn.waitExit()
	go cn.writeLoop()
	go cn.readLoop()
	go func() {
		defer close(cn.stderrDone)
		if r := p.Stderr(); r != nil {
			logStderr(r, cn.logger, newLineLimiter(cn.clock.Now, stderrBurst, stderrPerSecond))
		}
	}()
	return cn
}

// fail ends the connection with err (the first reason wins).
func (cn *conn) fail(err error) {
	cn.once.Do(func() {
		cn.cause = err
		close(cn.dead)
		cn.cancel()
	})
}

// err is why the connection ended.
func (cn *conn) err() error {
	select {
	case <-cn.dead:
		return cn.cause
	default:
		return nil
	}
}

// errStopped ends a connection the daemon closes.
var errStopped = errors.New("the channel is stopping")

func (cn *conn) waitExit() {
	err := cn.p.Wait()
	if err == nil {
		err = errors.New("the plugin exited (status 0)")
	} else {
		err = fmt.Errorf("the plugin exited: %w", err)
	}
	cn.fail(err)
	close(cn.exited)
}

// write writes one line (newline included) to the plugin. A line the
// plugin does not take within the timeout resets the connection.
func (cn *conn) write(line []byte) error {
	req := writeReq{line: line, done: make(chan error, 1)}
	t := cn.clock.NewTimer(cn.timeout)
	defer t.Stop()
	select {
	case cn.wq <- req:
	case <-cn.dead:
		return cn.cause
	case <-t.C():
		cn.fail(fmt.Errorf("connection reset: the plugin took no line for %s (it does not read its stdin)", cn.timeout))
		return cn.cause
	}
	select {
	case err := <-req.done:
		return err
	case <-cn.dead:
		return cn.cause
	case <-t.C():
		select {
		case err := <-req.done: // written as the time ran out
			return err
		default:
		}
		cn.fail(fmt.Errorf("connection reset: the plugin took no line for %s (it does not read its stdin)", cn.timeout))
		return cn.cause
	}
}

func (cn *conn) writeLoop() {
	defer close(cn.writerDone)
	w := cn.p.Stdin()
	for {
		select {
		case <-cn.dead:
			return
		case req := <-cn.wq:
			_, err := w.Write(req.line)
			if err != nil {
				err = fmt.Errorf("writing to the plugin: %w", err)
				cn.fail(err)
			}
			req.done <- err
		}
	}
}

// readLoop reads the plugin's lines until the connection ends. A message
// is stored and acked before the next line is read.
func (cn *conn) readLoop() {
	defer close(cn.readerDone)
	br := bufio.NewReaderSize(cn.p.Stdout(), 64<<10)
	for {
		line, err := readLine(br, MaxLine)
		if err != nil {
			switch {
			case errors.Is(err, ErrLineTooLong):
				cn.fail(fmt.Errorf("connection reset: %w", err))
			case errors.Is(err, io.EOF):
				// Its exit status says more, when it exits.
				select {
				case <-cn.exited:
				case <-cn.dead:
				case <-cn.clock.After(time.Second):
					cn.fail(errors.New("the plugin closed its stdout"))
				}
			default:
				cn.fail(fmt.Errorf("reading from the plugin: %w", err))
			}
			return
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		f, err := ParseLine(line)
		if err != nil {
			cn.fail(fmt.Errorf("connection reset: %w: %q", err, clip.String(string(line), 80)))
			return
		}
		switch f.Type {
		case TypeMessage:
			if err := cn.c.receive(cn.ctx, cn, f.Message); err != nil {
				if cn.ctx.Err() == nil {
					cn.fail(err)
				}
				return
			}
		case TypeSent, TypeError:
			cn.answer(f)
		default:
			cn.note("line of an unknown type ignored", "type", clip.String(f.Type, 64))
		}
		if cn.ctx.Err() != nil {
			return
		}
	}
}

// note logs an ignored line, the first maxNotes of a connection.
func (cn *conn) note(msg string, args ...any) {
	cn.mu.Lock()
	cn.notes++
	n := cn.notes
	cn.mu.Unlock()
	if n <= maxNotes {
		cn.logger.Warn(msg, args...)
	}
}

// answer hands a sent or error to the send waiting for it.
func (cn *conn) answer(f Frame) {
	cn.mu.Lock()
	ch, ok := cn.pending[f.ID]
	delete(cn.pending, f.ID)
	cn.mu.Unlock()
	if !ok {
		cn.note("answer for an unknown send ignored", "type", f.Type, "id", clip.String(f.ID, 64))
		return
	}
	if f.Type == TypeSent {
		ch <- nil
		return
	}
	text := clip.String(f.Error, maxErrorText)
	if text == "" {
		text = "(no reason given)"
	}
	ch <- &SendError{Text: text}
}

// pause records that reading stopped (on) or resumed for back-pressure.
func (cn *conn) pause(on bool) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	now := cn.clock.Now()
	switch {
	case on && cn.pausedSince.IsZero():
		cn.pausedSince = now
	case !on && !cn.pausedSince.IsZero():
		cn.pausedTotal += now.Sub(cn.pausedSince)
		cn.pausedSince = time.Time{}
	}
}

// paused is how long reading has been stopped, up to now.
func (cn *conn) paused(now time.Time) time.Duration {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	d := cn.pausedTotal
	if !cn.pausedSince.IsZero() {
		d += now.Sub(cn.pausedSince)
	}
	return d
}

// send writes s and waits for its answer: nil for sent, *SendError for
// error. No answer within the timeout (not counting the time reading
// waited for back-pressure: the answer may be in the unread lines) resets
// the connection; then, as when the plugin exits, the error wraps
// ErrUnanswered.
func (cn *conn) send(ctx context.Context, s Send) error {
	ch := make(chan error, 1)
	cn.mu.Lock()
	cn.pending[s.ID] = ch
	cn.mu.Unlock()
	defer func() {
		cn.mu.Lock()
		delete(cn.pending, s.ID)
		cn.mu.Unlock()
	}()
	if err := cn.write(encode(s)); err != nil {
		return fmt.Errorf("%w: %v", ErrUnanswered, err)
	}
	start := cn.clock.Now()
	base := cn.paused(start)
	cn.mu.Lock()
	cn.awaiting++
	cn.mu.Unlock()
	defer func() {
		cn.mu.Lock()
		cn.awaiting--
		cn.mu.Unlock()
	}()
	for {
		select {
		case err := <-ch: // answered as a timer ran out
			return err
		default:
		}
		now := cn.clock.Now()
		deadline := start.Add(cn.timeout + cn.paused(now) - base)
		if !now.Before(deadline) {
			cn.fail(fmt.Errorf("connection reset: send %s unanswered for %s", s.ID, cn.timeout))
			return fmt.Errorf("%w: no answer within %s", ErrUnanswered, cn.timeout)
		}
		t := cn.clock.NewTimer(deadline.Sub(now))
		select {
		case err := <-ch:
			t.Stop()
			return err
		case <-cn.dead:
			t.Stop()
			select {
			case err := <-ch: // answered just before the end
				return err
			default:
			}
			return fmt.Errorf("%w: %v", ErrUnanswered, cn.cause)
		case <-ctx.Done():
			t.Stop()
			select {
			case <-cn.dead: // Run stops the outbox because the connection ended
				return fmt.Errorf("%w: %v", ErrUnanswered, cn.cause)
			default:
			}
			return ctx.Err()
		case <-t.C():
		}
	}
}

// stop ends the connection and the process: gracefully (stdin closed,
// StopGrace to exit) when the daemon stops, else at once; the process
// group is killed and every goroutine of the connection waited for.
func (cn *conn) stop(graceful bool) {
	cn.fail(errStopped)
	if graceful {
		_ = cn.p.CloseStdin()
		select {
		case <-cn.exited:
		case <-cn.clock.After(cn.c.o.StopGrace):
		}
	}
	cn.p.Kill()
	<-cn.exited
	cn.p.Close()
	<-cn.readerDone
	<-cn.writerDone
	<-cn.stderrDone
	cn.mu.Lock()
	n := cn.notes
	cn.mu.Unlock()
	if n > maxNotes {
		cn.logger.Warn("more lines ignored than logged", "ignored", n, "logged", maxNotes)
	}
}
