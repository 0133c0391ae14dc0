package hosttest

import "github.com/toolgen/toolgen/internal/freeport"

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on, for a server a
// script starts (and restarts) on a port it chose before: one below the kernel's
// ephemeral range, which outgoing connections draw their local ports from, and never
// twice in one test process (internal/freeport says why). Where the range cannot be
// read (not Linux), the kernel picks.
func FreePort() (int, error) { return freeport.Pick() }
