//go:build !unix

package tools

import "os/exec"

// killProcessGroup leaves cmd as it is where process groups are not available: at the
// deadline exec kills git itself, and WaitDelay bounds the wait for its children.
func killProcessGroup(cmd *exec.Cmd) {}
