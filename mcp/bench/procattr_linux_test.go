package bench

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill cmd's process when this one dies without running
// its cleanups (a panic, a -timeout), so that no gateway outlives the benchmark; the
// upstreams below the gateways then see their input end and exit.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
