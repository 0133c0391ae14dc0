package console

import (
	"os/exec"
	"strings"
	"testing"
)

// doc.go: the console never depends on a store driver, on anything under mcp/, or on
// host (which mounts it) — checked over its whole dependency graph.
func TestImports_NoDriverNoMCPNoHost(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command")
	}
	const module = "github.com/toolgen/toolgen/"
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+"host/console").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(dep, module+"runtime/store/") && !strings.HasPrefix(dep, module+"runtime/store/internal"),
			strings.HasPrefix(dep, module+"mcp/"), dep == module+"host", dep == module+"host/hostcli", dep == module+"codegen":
			t.Errorf("host/console depends on %s", dep)
		}
	}
}
