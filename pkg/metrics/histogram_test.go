package metrics

import (
	"strings"
	"testing"
)

func TestHistogramText(t *testing.T) {
	r := NewRegistry()
	h := r.Histogram("agent_turn_duration_seconds", "Turn latency.", Labels{"profile": "wecom"}, []float64{5, 1, 30})
	for _, v := range []float64{0.5, 1, 2, 40} {
		h.Observe(v)
	}
	if again := r.Histogram("agent_turn_duration_seconds", "Turn latency.", Labels{"profile": "wecom"}, nil); again != h {
		t.Fatal("second registration returned a new histogram")
	}
	var b strings.Builder
	r.WriteText(&b)
	want := `# HELP agent_turn_duration_seconds Turn latency.
# TYPE agent_turn_duration_seconds histogram
agent_turn_duration_seconds_bucket{profile="wecom",le="1"} 2
agent_turn_duration_seconds_bucket{profile="wecom",le="5"} 3
agent_turn_duration_seconds_bucket{profile="wecom",le="30"} 3
agent_turn_duration_seconds_bucket{profile="wecom",le="+Inf"} 4
agent_turn_duration_seconds_sum{profile="wecom"} 43.5
agent_turn_duration_seconds_count{profile="wecom"} 4
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
