package hosttest

import "github.com/toolgen/toolgen/internal/freeport"

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on, for a server a
// script starts (and restarts) on a port it chose before.
//
// A port the kernel picks for bind(":0") is in its ephemeral range, the range it also
// draws every outgoing connection's local port from. Between a server's exit and its
// restart on the same port, any connection on the machine (a PostgreSQL pool, another
// script's client) can take that port, and the restarted server cannot listen. So the
// port is drawn from below the ephemeral range, where the kernel assigns nothing by
// itself, and never twice in one test process, so that scripts running in parallel do
// not pick the same one. Where the range cannot be read (not Linux), the kernel picks.
func FreePort() (int, error) { return freeport.Pick() }
