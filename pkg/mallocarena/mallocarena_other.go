//go:build !cgo || !linux

package mallocarena

// Limit does nothing without cgo on Linux (no glibc arenas to bound).
func Limit(int) bool { return false }

// Trim does nothing without cgo on Linux.
func Trim() bool { return false }
