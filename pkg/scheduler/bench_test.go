package scheduler

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkFireTime1000 schedules 1,000 one-shot jobs due at the same
// instant on the real clock and reports how late their actions started:
// p50/p99/max in milliseconds (fire-time error = start of the send minus
// the scheduled time).
//
//	go test -tags sqlite_fts5 -run '^$' -bench FireTime1000 -benchtime 3x ./pkg/scheduler/
func BenchmarkFireTime1000(b *testing.B) {
	const jobs = 1000
	st, _ := openDBB(b)
	var mu sync.Mutex
	var lates []time.Duration
	all := make(chan struct{}, 1)
	send := func(_ context.Context, _, _, text string) error {
		now := time.Now()
		slot, err := time.Parse(time.RFC3339, text)
		if err != nil {
			return err
		}
		mu.Lock()
		lates = append(lates, now.Sub(slot))
		if len(lates)%jobs == 0 {
			all <- struct{}{}
		}
		mu.Unlock()
		return nil
	}
	s, err := New(Config{DB: st.DB(), Send: send, Location: time.UTC, MaxPerOwner: jobs})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		slot := time.Now().Add(2 * time.Second).Truncate(time.Second)
		at := slot.UTC().Format(time.RFC3339)
		for k := 0; k < jobs; k++ {
			if _, err := s.Add(ctx, NewJob{Owner: fmt.Sprintf("wecom:u%d", k%10), Channel: "wecom", To: "x", At: at, Payload: at}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		select {
		case <-all:
		case <-time.After(time.Minute):
			b.Fatal("not every job fired within a minute")
		}
		b.StopTimer()
		s.inflight.Wait()
		if _, err := st.DB().Exec(`DELETE FROM sched_jobs`); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lates)
	q := func(p float64) float64 {
		return float64(lates[min(len(lates)-1, int(p*float64(len(lates))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(lates[len(lates)-1].Microseconds())/1000, "max-ms")
}

// BenchmarkStoredJobs10k stores 10,000 recurring jobs and reports the
// database bytes per job and the scheduler's Go heap per job while it
// waits (it keeps no per-job state in memory).
//
//	go test -tags sqlite_fts5 -run '^$' -bench StoredJobs10k -benchtime 1x ./pkg/scheduler/
func BenchmarkStoredJobs10k(b *testing.B) {
	const jobs = 10000
	for i := 0; i < b.N; i++ {
		st, path := openDBB(b)
		var ms0, ms1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		s, err := New(Config{DB: st.DB(), Send: func(context.Context, string, string, string) error { return nil }, Location: time.UTC})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		for k := 0; k < jobs; k++ {
			if _, err := s.Add(ctx, NewJob{Owner: fmt.Sprintf("wecom:user%03d", k%100), Channel: "wecom", To: fmt.Sprintf("user%03d", k%100),
				Cron: fmt.Sprintf("%d %d * * *", k%60, (k/60)%24), TZ: "Asia/Shanghai", Payload: "Good morning! Time for the daily stand-up."}); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Start(ctx); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&ms1)
		s.Close(ctx)
		if _, err := st.DB().Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			b.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(fi.Size())/jobs, "db-bytes/job")
		b.ReportMetric(float64(fi.Size())/(1<<20), "db-MiB/10k")
		b.ReportMetric(float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))/jobs, "heap-bytes/job")
	}
}
