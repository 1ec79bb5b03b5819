package doctor

import (
	"context"
	"fmt"

	"agent/pkg/sandbox"
)

// checkCgroups says how a sandboxed run is bounded on this box: as a
// whole, in a cgroup of its own (cgroup v2 with the memory and pids
// controllers; the shipped unit delegates them to the service), or per
// process only (a plain container, cgroup v1), where one run of several
// processes may hold sandbox.memory_mb each.
func (e Env) checkCgroups(context.Context) Result {
	mem := e.Config.Sandbox.MemoryMB
	if mem <= 0 {
		mem = sandbox.DefaultLimits.MemoryMB
	}
	if err := sandbox.CgroupSupport(); err != nil {
		return Result{Level: Warn,
			Detail: fmt.Sprintf("runs are bounded per process only: %v; a run of several processes may hold %d MB in each", err, mem),
			Fix:    "boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1) and run the packaged service (Delegate=), or lower sandbox.memory_mb and sandbox.max_processes"}
	}
	return Result{Level: OK, Detail: fmt.Sprintf("cgroup v2 with memory and pids: under the service (Delegate=) each run gets a cgroup of its own (%d MB, %d processes and all cores but one for the whole run)",
		mem, e.Config.Sandbox.MaxProcesses)}
}
