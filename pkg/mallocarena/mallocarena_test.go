package mallocarena

import (
	"runtime"
	"testing"
)

func TestLimit(t *testing.T) {
	got := Limit(2)
	if runtime.GOOS == "linux" && !got {
		t.Skip("not glibc (or cgo off): nothing to limit")
	}
}
