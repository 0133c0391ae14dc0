// Package hostile is a deliberately misbehaving MCP server (go-sdk) for the tests of the
// MCP client adapter (mcp/upstream): annotations that lie, names that collide after
// normalization, a description that changes mid-session (the "rug pull") and a tool that
// is withdrawn, requests for roots, sampling and elicitation (direct requests under
// 2025-11-25, inputRequests results under 2026-07-28), a 20 MB result, error strings
// carrying a prompt injection, a tool that hangs, a tool that ends the process mid-call,
// and tools/list answers with schemas a client must refuse.
//
// It runs in-process over [Pipes] (which, unlike mcp.NewInMemoryTransports, carry
// messages above 16 MiB), over any go-sdk transport (stateless Streamable HTTP speaks
// 2026-07-28), and as a stdio subprocess ([ServeStdio], cmd/hostile, or a test binary
// that re-executes itself). It records what it observed, for assertions.
//
// It is for tests only and must never import the runtime, the store, or any mcp package
// of this module: it is the other side of the wire.
package hostile
