package onnxrt_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"agent/pkg/onnxrt"
	"agent/pkg/onnxrt/onnxrttest"
)

func TestCandidates(t *testing.T) {
	tests := []struct {
		configured, exeDir string
		want               []string
	}{
		{"/opt/ort/libonnxruntime.so.1", "/usr/bin", []string{"/opt/ort/libonnxruntime.so.1"}},
		{"", "/opt/agent/bin", []string{"/opt/agent/bin/lib/libonnxruntime.so.1", "/opt/agent/lib/libonnxruntime.so.1", "libonnxruntime.so.1"}},
		{"", "", []string{"libonnxruntime.so.1"}},
	}
	for _, tt := range tests {
		if got := onnxrt.Candidates(tt.configured, tt.exeDir); !slices.Equal(got, tt.want) {
			t.Errorf("Candidates(%q, %q) = %q, want %q", tt.configured, tt.exeDir, got, tt.want)
		}
	}
}

// TestLoadMissing runs in a fresh process, as ONNX Runtime is
// process-global and other tests load it.
func TestLoadMissing(t *testing.T) {
	if os.Getenv("ONNXRT_TEST_CHILD") == "missing-runtime" {
		_, _, err := onnxrt.Load([]string{"/nonexistent/lib/libonnxruntime.so.1", "libno-such-onnxruntime.so.1"})
		switch {
		case err == nil:
			fmt.Println("FAIL: no error")
		case !errors.Is(err, onnxrt.ErrRuntimeMissing):
			fmt.Println("FAIL: not ErrRuntimeMissing:", err)
		case !strings.Contains(err.Error(), "/nonexistent/lib/libonnxruntime.so.1: not found") ||
			!strings.Contains(err.Error(), "libno-such-onnxruntime.so.1:") ||
			!strings.Contains(err.Error(), "make deps"):
			fmt.Println("FAIL: message lacks the paths or the fix:", err)
		default:
			fmt.Println("OK:", err)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoadMissing$", "-test.count=1")
	cmd.Env = append(os.Environ(), "ONNXRT_TEST_CHILD=missing-runtime")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK:") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("%s", strings.SplitN(string(out), "\n", 2)[0])
}

func TestLoadIdempotent(t *testing.T) {
	lib := onnxrttest.Library(t)
	if _, _, err := onnxrt.Load([]string{lib}); err != nil {
		onnxrttest.RequireNative(t, "ONNX Runtime ("+err.Error()+")", "`make deps`")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			v, p, err := onnxrt.Load([]string{"/ignored/because/already/loaded.so"})
			if err != nil || v == "" || p == "" {
				t.Errorf("Load again: %q %q %v", v, p, err)
			}
		})
	}
	wg.Wait()
	v, p, _ := onnxrt.Load(nil)
	if p != lib && p != "(initialised elsewhere)" {
		t.Errorf("loaded from %q, want %q", p, lib)
	}
	t.Logf("ONNX Runtime %s from %s", v, p)
}
