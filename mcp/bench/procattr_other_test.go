//go:build !linux

package bench

import "os/exec"

// dieWithParent does nothing off Linux (no parent-death signal).
func dieWithParent(*exec.Cmd) {}
