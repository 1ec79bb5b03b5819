package metrics

import (
	"os"
	"strings"
	"testing"
)

func TestWriteText(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("agent_messages_total", "Messages handled.", Labels{"channel": "wecom"})
	c.Inc()
	c.Add(2)
	c.Add(-5) // ignored
	if again := r.Counter("agent_messages_total", "Messages handled.", Labels{"channel": "wecom"}); again != c {
		t.Fatal("re-registration returned a new counter")
	}
	r.Counter("agent_messages_total", "Messages handled.", Labels{"channel": "voice"})
	g := r.Gauge("agent_up", "1 when up.", nil)
	g.Set(1)
	r.GaugeFunc("agent_weird", "Odd \"label\" values.", Labels{"v": "a\"b\\c\nd"}, func() float64 { return 0.5 })
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP agent_messages_total Messages handled.
# TYPE agent_messages_total counter
agent_messages_total{channel="voice"} 0
agent_messages_total{channel="wecom"} 3
# HELP agent_up 1 when up.
# TYPE agent_up gauge
agent_up 1
# HELP agent_weird Odd "label" values.
# TYPE agent_weird gauge
agent_weird{v="a\"b\\c\nd"} 0.5
`
	if got := b.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestResidentBytes(t *testing.T) {
	if got := ResidentBytes(os.Getpagesize()); got <= 0 {
		t.Fatalf("ResidentBytes = %d", got)
	}
}
