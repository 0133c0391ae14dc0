// Package mcppeers finds the real MCP peers the tests talk to: the reference server
// @modelcontextprotocol/server-everything and the reference client
// @modelcontextprotocol/inspector, pinned in .tooldeps/package.json and installed by
// `make node-deps` (which .ci/run runs through `make test`).
//
// A test that needs one calls [Everything] or [Inspector]: without node on PATH the
// test is skipped and says why; with node but without the packages it fails, naming
// the command that installs them — a missing peer must never pass silently.
//
// mcppeers is for tests only; it must never import the runtime or the mcp packages.
package mcppeers

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Root returns the repository root (the directory of go.mod), walking up from the
// working directory.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("mcppeers: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Node returns the path of node, skipping the test when there is none.
func Node(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("skipping: node is not installed, so the real MCP peers (npm) cannot run")
	}
	return node
}

func script(t testing.TB, rel string) (node, path string) {
	t.Helper()
	node = Node(t)
	path = filepath.Join(Root(t), ".tooldeps", "node_modules", filepath.FromSlash(rel))
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("mcppeers: %s is missing: run `make node-deps` (npm ci in .tooldeps)", path)
	}
	return node, path
}

// Everything returns node and the entry script of server-everything. Its first
// argument selects the transport: "stdio" or "streamableHttp" (port from $PORT,
// endpoint /mcp).
func Everything(t testing.TB) (node, entry string) {
	t.Helper()
	return script(t, "@modelcontextprotocol/server-everything/dist/index.js")
}

// Inspector returns node and the entry script of the inspector's CLI mode: run it as
// `node CLI --cli COMMAND ARGS... --method tools/list` (stdio) or
// `node CLI --cli URL --transport http --method tools/list`.
func Inspector(t testing.TB) (node, cli string) {
	t.Helper()
	return script(t, "@modelcontextprotocol/inspector/cli/build/cli.js")
}
