package agent

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"agent/pkg/logging"
	"agent/pkg/tools"
)

// TestToolErrorScrubbed: a tool fails with an error quoting a configured
// secret and a URL with an access_token; the tool result the model gets,
// the stored session and the /verbose event hold neither.
func TestToolErrorScrubbed(t *testing.T) {
	const secret, token = "mcp-Header-Secret-99", "WeComTok3n0123456789"
	h := newHarness(t, Config{}, toolReply(tc{"c1", "leaky", `{}`}), textReply("sorry"))
	sc := &logging.Scrubber{}
	sc.Set([]string{secret})
	h.agent.d.Scrub = sc.Scrub
	mustRegister(t, h.reg, tools.Tool{Name: "leaky", Description: "fails", Handler: func(ctx context.Context, c tools.Call) (string, error) {
		return "", fmt.Errorf("upstream refused %s: %w", secret,
			&url.Error{Op: "Get", URL: "https://qyapi.weixin.qq.com/cgi-bin/user/get?access_token=" + token, Err: errors.New("EOF")})
	}})
	_, events := h.turn(t, "go")
	res := lastMsg(h.sentMessages(t, 1))["content"].(string)
	if !strings.HasPrefix(res, "error: ") || !strings.Contains(res, "access_token=***") {
		t.Fatalf("tool result %q", res)
	}
	texts := []string{res}
	for _, m := range h.checkSession(t) {
		texts = append(texts, m.Content)
	}
	for _, e := range events {
		texts = append(texts, e.Text)
	}
	for _, s := range texts {
		if strings.Contains(s, secret) || strings.Contains(s, token) {
			t.Errorf("a secret reached the model, the session or an event: %q", s)
		}
	}
}
