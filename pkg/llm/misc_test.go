package llm

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"agent/pkg/llm/llmtest"
)

func TestClassifyStatus(t *testing.T) {
	tests := []struct {
		status int
		code   string
		want   error
	}{
		{400, "", ErrBadRequest},
		{404, "model_not_found", ErrBadRequest},
		{413, "", ErrBadRequest},
		{422, "", ErrBadRequest},
		{408, "", ErrServer},
		{429, "", ErrRateLimited},
		{401, "", ErrAuth},
		{403, "", ErrAuth},
		{500, "", ErrServer},
		{529, "", ErrServer},
		{400, "content_policy_violation", ErrContentFilter},
	}
	for _, tt := range tests {
		if got := classifyStatus(tt.status, tt.code); got != tt.want {
			t.Errorf("classifyStatus(%d, %q) = %v, want %v", tt.status, tt.code, got, tt.want)
		}
	}
}

func TestParseErrorBody(t *testing.T) {
	tests := []struct{ body, code, msg string }{
		{`{"error":{"message":"bad","type":"invalid_request_error","code":null}}`, "invalid_request_error", "bad"},
		{`{"error":{"message":"x","code":429}}`, "429", "x"},
		{`{"error":"model \"llama\" not found"}`, "", `model "llama" not found`},
		{`{"code":"InvalidApiKey","message":"Invalid API-key provided."}`, "InvalidApiKey", "Invalid API-key provided."},
		{"<html>\n  502 Bad Gateway\n</html>", "", "<html> 502 Bad Gateway </html>"},
	}
	for _, tt := range tests {
		code, msg := parseErrorBody([]byte(tt.body))
		if code != tt.code || msg != tt.msg {
			t.Errorf("parseErrorBody(%q) = %q, %q; want %q, %q", tt.body, code, msg, tt.code, tt.msg)
		}
	}
}

func TestConcurrentCalls(t *testing.T) {
	f := newFakeServer(t, llmtest.Reply{Status: 500}, body(completion("ok", "stop", "")))
	c := newTestClient(t, "openai", f, newFakeClock(t), nil)
	var acc Accounting
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Chat(context.Background(), Request{Messages: userMsg("hi")})
			if err != nil {
				errs <- err
				return
			}
			acc.Add(fmt.Sprintf("user%d", i%2), resp.Usage)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Chat: %v", err)
	}
	snap := acc.Snapshot()
	if snap["user0"].Requests+snap["user1"].Requests != 16 || snap["user0"].TotalTokens != 8*15 {
		t.Errorf("accounting = %+v", snap)
	}
}
