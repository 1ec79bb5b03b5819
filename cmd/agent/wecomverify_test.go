package main

import (
	"io"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"agent/pkg/wecom/wecomtest"
)

// A URL verification recorded earlier (correctly signed, an hour old) is
// refused by the daemon like a replayed message, and reveals nothing; a
// fresh one is answered.
func TestWeComVerifyReplayRefused(t *testing.T) {
	api := wecomtest.NewServer(e2eCorpID, "secret", e2eAgent)
	defer api.Close()
	dir := t.TempDir()
	writeConfig(t, dir, wecomConfig(echoLLM(t).URL(), api.URL, "pairing"))
	in, base, crypto := startWeCom(t, dir)
	verify := func(ts time.Time) (int, string) {
		t.Helper()
		req, err := wecomtest.VerifyRequest(crypto, base+"/wecom/callback", "echo-777", strconv.FormatInt(ts.Unix(), 10), "n", false)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := verify(time.Now().Add(-time.Hour)); code != http.StatusForbidden || body == "echo-777" {
		t.Fatalf("replayed verification: %d %q, want 403", code, body)
	}
	if code, body := verify(time.Now().Add(time.Hour)); code != http.StatusForbidden {
		t.Fatalf("future verification: %d %q, want 403", code, body)
	}
	if code, body := verify(time.Now()); code != http.StatusOK || body != "echo-777" {
		t.Fatalf("fresh verification: %d %q", code, body)
	}
	in.cmd.Process.Signal(syscall.SIGTERM)
	if code := in.wait(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
