package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestDiagnose(t *testing.T) {
	for msg, want := range map[string]string{
		"bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces": "user namespaces",
		"bwrap: Can't mount proc on /newroot/proc: Operation not permitted":                                                      "ProtectKernelTunables",
		"bwrap: setting up uid map: Permission denied":                                                                           "user namespaces",
	} {
		err := diagnose(fmt.Errorf("%w: %s", ErrUnavailable, msg))
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", msg, err)
		}
	}
}
