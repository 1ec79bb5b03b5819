package doctor

import (
	"context"
	"strings"
	"testing"

	"agent/pkg/nativetest"
)

func TestSandboxCheck(t *testing.T) {
	nativetest.LookPath(t, "bwrap", "bubblewrap")
	nativetest.LookPath(t, "pdftotext", "poppler-utils")
	nativetest.FFmpeg(t)
	nativetest.EspeakNG(t)
	e := baseEnv(t, "[sandbox]\nnetwork = \"on\"\nmemory_mb = 300\n", nil)
	r := e.checkSandbox(context.Background())
	if r.Level != OK || !strings.Contains(r.Detail, "bubblewrap works (network on when a run asks") || !strings.Contains(r.Detail, "300 MB") {
		t.Errorf("working sandbox: %+v", r)
	}
	e.Bwrap = "/nonexistent/bwrap"
	r = e.checkSandbox(context.Background())
	if r.Level != Warn || !strings.Contains(r.Detail, "NOT offered") || r.Fix != "apt install bubblewrap" {
		t.Errorf("no bwrap: %+v", r)
	}
}
