// Package diskuse says what a file holds of the disk: the blocks the
// filesystem allocated to it (st_blocks), not its size. A sparse file
// holds less than its size, a file preallocated with fallocate
// --keep-size holds more; a quota that counts sizes is wrong both ways.
package diskuse

import (
	"io/fs"
	"syscall"
)

// MinEntry is the least any entry costs (an inode and its directory
// entry): a million empty files fill a disk too.
const MinEntry = 4096

// Of is what fi holds of the disk: its allocated blocks in bytes, at
// least MinEntry. Without the system's stat data (not a Linux file) it
// falls back to the size.
func Of(fi fs.FileInfo) int64 {
	n := fi.Size()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		n = st.Blocks * 512 // st_blocks is in 512-byte units whatever the block size
	}
	return max(n, MinEntry)
}

// Size and Blocks of fi as the system reports them (Blocks in bytes).
func Size(fi fs.FileInfo) (size, blocks int64) {
	size = fi.Size()
	blocks = size
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		blocks = st.Blocks * 512
	}
	return size, blocks
}
