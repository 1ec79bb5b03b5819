package doctor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"agent/pkg/sandbox"
)

// sandboxPrograms are what the sandboxed tools run inside, from the box's
// /usr: without one, that tool fails (and says so) while the rest work.
var sandboxPrograms = []struct{ bin, pkg, what string }{
	{"pdftotext", "poppler-utils", "read_document cannot read PDFs"},
	{"ffmpeg", "ffmpeg", "the video tools fail"},
	{"ffprobe", "ffmpeg", "the video tools fail"},
	{"espeak-ng", "espeak-ng", "generate_video cannot speak narration"},
}

// checkSandbox builds a sandbox as [sandbox] describes and runs a shell
// and Python in it, as the daemon does before it offers exec, PDF reading
// and the video tools. It runs as doctor's user: as root, the sandbox runs
// as nobody, as the daemon does when it runs as root; under the shipped
// unit the daemon's own probe is on /healthz (component "sandbox").
func (e Env) checkSandbox(ctx context.Context) Result {
	tmp, err := os.MkdirTemp("", "agent-doctor-sandbox-")
	if err != nil {
		return Result{Level: Warn, Detail: "cannot make a temporary directory: " + err.Error()}
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o750); err != nil {
		return Result{Level: Warn, Detail: err.Error()}
	}
	cfg := sandbox.FromConfig(e.Config.Sandbox, sandbox.Config{Bwrap: e.Bwrap, TempDir: tmp})
	sb, err := sandbox.New(cfg)
	if err == nil {
		err = sb.Probe(ctx)
	}
	if err != nil {
		fix := "see the detail: it names the cause and the fix"
		if strings.Contains(err.Error(), "not installed") {
			fix = "apt install bubblewrap"
		}
		return Result{Level: Warn, Detail: "exec, read_document (PDFs) and the video tools are NOT offered: " + err.Error(), Fix: fix}
	}
	lim := sb.Limits()
	net := "off"
	if sb.NetworkAllowed() {
		net = "on when a run asks"
	}
	res := Result{Level: OK, Detail: fmt.Sprintf("bubblewrap works (network %s; per run %s, %d CPU s, %d MB, %d processes, %d KB output); exec, read_document and the video tools are offered",
		net, lim.Timeout, lim.CPUSeconds, lim.MemoryMB, lim.MaxProcs, lim.OutputKB)}
	var missing, fixes []string
	for _, p := range sandboxPrograms {
		if _, err := exec.LookPath("/usr/bin/" + p.bin); err != nil {
			missing = append(missing, p.bin+" missing: "+p.what)
			fixes = append(fixes, "apt install "+p.pkg)
		}
	}
	if len(missing) > 0 {
		res.Level = Warn
		res.Detail += "; but " + strings.Join(missing, "; ")
		res.Fix = strings.Join(fixes, "; ")
	}
	return res
}
