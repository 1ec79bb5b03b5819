package sandbox_test

import (
	"context"
	"strings"
	"testing"

	"agent/pkg/sandbox"
	"agent/pkg/sandbox/sandboxtest"
)

// A DataFile appears inside, read-only, from bytes: a credential the
// sandbox's account could not read on the host reaches the run, and the
// run cannot change it.
func TestDataFiles(t *testing.T) {
	s := sandboxtest.New(t, nil)
	spec := sandbox.Spec{
		Argv: []string{"/bin/sh", "-c", "cat /secrets/a.key; echo; cat /opt/skill/deep/b.txt; echo; echo x > /secrets/a.key && echo WROTE"},
		Files: []sandbox.DataFile{
			{Dst: "/secrets/a.key", Data: []byte("key-123")},
			{Dst: "/opt/skill/deep/b.txt", Data: []byte(strings.Repeat("b", 100_000))},
		},
	}
	res, err := s.Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Stdout)
	if !strings.HasPrefix(out, "key-123\n"+strings.Repeat("b", 100)) || strings.Contains(out, "WROTE") {
		t.Fatalf("exit %d stdout %.200q stderr %q", res.Exit, out, res.Stderr)
	}
	for _, dst := range []string{"/etc/x", "/work/k", "relative", "/usr/lib/k"} {
		if _, err := s.Run(context.Background(), sandbox.Spec{Argv: []string{"true"}, Files: []sandbox.DataFile{{Dst: dst, Data: []byte("x")}}}); err == nil {
			t.Errorf("file at %q accepted", dst)
		}
	}
	if _, err := s.Run(context.Background(), sandbox.Spec{Argv: []string{"true"}, Files: []sandbox.DataFile{{Dst: "/secrets/big", Data: make([]byte, sandbox.MaxDataFile+1)}}}); err == nil {
		t.Error("oversized file accepted")
	}
}
