package invisible

import (
	"strings"
	"testing"
)

// A 16 KiB tool result (the default cap) of mixed English and Chinese
// text: what Strip costs on every result that holds nothing to strip, and
// on one that does.
var (
	cleanText = strings.Repeat("The meeting is at 10:00 in room 3. 会议在三号房间。\n", 16<<10/64)
	dirtyText = strings.Repeat("The meeting\u200b is at 10:00 in room 3.\U000E0041 会议在三号房间。\n", 16<<10/72)
)

func BenchmarkStripNothingToStrip(b *testing.B) {
	b.SetBytes(int64(len(cleanText)))
	for b.Loop() {
		Strip(cleanText)
	}
}

func BenchmarkStripEveryLine(b *testing.B) {
	b.SetBytes(int64(len(dirtyText)))
	for b.Loop() {
		Strip(dirtyText)
	}
}

func BenchmarkEscapeCode(b *testing.B) {
	b.SetBytes(int64(len(dirtyText)))
	for b.Loop() {
		Escape(dirtyText)
	}
}
