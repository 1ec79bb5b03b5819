package daemon

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"agent/pkg/llm/llmtest"
	"agent/pkg/wecom/aibot"
	"agent/pkg/wecom/aibottest"
)

// BenchmarkWeComBotFirstText is the time from a message frame arriving to
// the first reply stream frame carrying the model's words, through the
// real daemon with an instant local model (a streamed "Hello there").
func BenchmarkWeComBotFirstText(b *testing.B) {
	llmSrv := llmtest.NewFunc(b, func(*llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Chunks: []string{"Hello", " there"}}
	})
	bot := aibottest.New(b)
	t := &testing.T{}
	_, stop := startDaemonIn(t, b.TempDir(), botConfig(llmSrv.BaseURL(), bot.URL()))
	defer stop()
	if !bot.WaitReady(20 * time.Second) {
		b.Fatal("not subscribed")
	}
	var lat []time.Duration
	i := 0
	for b.Loop() {
		i++
		after := bot.Count()
		t0 := time.Now()
		req := bot.Text(fmt.Sprintf("bench-%d", i), fmt.Sprintf("user%d", i%8), "single", "", "hi")
		_, ok := bot.Await(20*time.Second, after, func(f aibot.Frame) bool {
			if f.Cmd != aibot.CmdRespond || f.Headers.ReqID != req {
				return false
			}
			var sf streamFrame
			_ = json.Unmarshal(f.Body, &sf)
			return sf.Stream.Content != "…"
		})
		lat = append(lat, time.Since(t0))
		if !ok {
			b.Fatal("no frame with the model's text")
		}
		waitFinished(t, bot, req)
	}
	reportLatency(b, lat)
}

// BenchmarkWeComBotReconnect is the time from WeCom dropping the
// connection to the daemon being subscribed again (the first retry waits
// a jittered 0.5-1 s by design: boxes restarted together do not dial
// together).
func BenchmarkWeComBotReconnect(b *testing.B) {
	llmSrv := llmtest.New(b)
	bot := aibottest.New(b)
	t := &testing.T{}
	_, stop := startDaemonIn(t, b.TempDir(), botConfig(llmSrv.BaseURL(), bot.URL()))
	defer stop()
	if !bot.WaitReady(20 * time.Second) {
		b.Fatal("not subscribed")
	}
	var lat []time.Duration
	for b.Loop() {
		time.Sleep(100 * time.Millisecond) // let the new connection settle before the next drop
		t0 := time.Now()
		bot.Drop()
		if !bot.WaitReady(20 * time.Second) {
			b.Fatal("not subscribed again")
		}
		lat = append(lat, time.Since(t0))
	}
	reportLatency(b, lat)
}
