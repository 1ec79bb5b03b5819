package embed

import (
	"context"
	"syscall"
	"testing"
	"time"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIdleAfterEmbed: the CPU the process uses in the second after
// one embedding: ONNX Runtime's threads must not spin on while idle
// (about 1000 ms of CPU per second and thread if they did).
func BenchmarkIdleAfterEmbed(b *testing.B) {
	e := bgeSmall(b)
	ctx := context.Background()
	var idle time.Duration
	for b.Loop() {
		if _, err := e.Embed(ctx, []string{benchSentence}); err != nil {
			b.Fatal(err)
		}
		c0 := cpuTime()
		time.Sleep(time.Second)
		idle += cpuTime() - c0
	}
	b.ReportMetric(float64(idle.Milliseconds())/float64(b.N), "idle-cpu-ms/s")
}
