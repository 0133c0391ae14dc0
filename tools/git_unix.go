//go:build unix

package tools

import (
	"os/exec"
	"syscall"
)

// killProcessGroup starts cmd in a process group of its own and makes cancellation kill
// the whole group: git starts children (a merge its helpers, a misconfigured one a
// filter), and killing git alone would leave them running past the deadline.
func killProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
