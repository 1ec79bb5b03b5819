//go:build !cgo || !linux

package cthread

import (
	"errors"
	"unsafe"
)

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("cthread: worker closed")

// Worker needs cgo on Linux; New fails elsewhere and callers make their
// native calls the ordinary way (there are none without cgo).
type Worker struct{}

// New fails: no native threads without cgo on Linux.
func New() (*Worker, error) { return nil, errors.New("cthread: needs cgo on Linux") }

// Do is never reached (New fails).
func (*Worker) Do(fn, arg unsafe.Pointer) error { return ErrClosed }

// Close does nothing.
func (*Worker) Close() error { return nil }
