package systemd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"agent/pkg/nativetest"
)

// TestUnitFilesVerify runs systemd's own checker over the shipped units
// (with ExecStart pointed at a binary that exists here), so a misspelt
// directive fails the build instead of the appliance's boot.
func TestUnitFilesVerify(t *testing.T) {
	analyze := nativetest.SystemdAnalyze(t)
	dir := t.TempDir()
	for _, name := range []string{"agent.service", "agent@.service"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		unit := strings.ReplaceAll(string(b), "/usr/local/bin/agent", "/bin/true")
		for _, want := range []string{"Type=notify", "WatchdogSec=", "Restart=on-failure", "RestartPreventExitStatus=78",
			"MemoryHigh=1600M", "MemoryMax=2G", "LimitNOFILE=65536", "ProtectSystem=strict", "StateDirectory=", "NoNewPrivileges=yes", "PrivateTmp=yes", "ProtectHome=yes"} {
			if !strings.Contains(unit, want) {
				t.Errorf("%s lacks %s", name, want)
			}
		}
		if strings.Contains(unit, "\nPrivateDevices=") {
			t.Errorf("%s sets PrivateDevices= (hides the Jetson GPU)", name)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(unit), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"agent.service", "agent@test.service"} {
		cmd := exec.Command(analyze, "verify", name)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "SYSTEMD_UNIT_PATH="+dir+":")
		out, err := cmd.CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", name, err, out)
		}
	}
}
