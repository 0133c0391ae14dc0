// Package mcp is the home of toolgen's two MCP directions (DESIGN.md section 7), both
// built on github.com/modelcontextprotocol/go-sdk with no hand-written JSON-RPC:
// mcp/upstream adapts operator- and tenant-classified upstream servers into registry
// tools that run through the one pipeline (MCP-1..8), and the serving side exposes the
// registry to agents, filtered by the active protocol mode (MCP-9); mcp/device brings in
// the tools of devices that dial the gateway, through the same adapter (DEV-1..3).
// internal/hostile is a deliberately misbehaving server for tests. This package itself
// holds no code; its subpackages must never import a store driver, codegen or cmd.
package mcp
