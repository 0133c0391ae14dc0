// Package freeport picks a TCP port on 127.0.0.1 for a server that a test starts, or
// restarts, on a port chosen before it runs: a child process that must be told its
// port (PostgreSQL, server-everything, the conformance suite's reference server) or
// one killed and started again where its clients still connect.
//
// Why not the port the kernel picks for bind(":0"): that port is in the kernel's
// ephemeral range, which it also draws every outgoing connection's local port from.
// Between the pick and the server's listen, and between a server's exit and its
// restart, any connection on the machine (a PostgreSQL pool, a client of another
// test) can be given that port as its own, and the server then cannot listen there
// (last seen in CI as server-everything exiting on EADDRINUSE). Pick draws from
// below the ephemeral range, where the kernel assigns nothing by itself, and never
// hands out one port twice in a process, so tests running in parallel do not pick the
// same one. A server that can listen on port 0 and say where it listens needs none of
// this: let it.
//
// It imports the standard library only.
package freeport
