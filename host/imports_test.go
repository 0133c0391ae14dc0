package host

import (
	"os/exec"
	"strings"
	"testing"
)

// doc.go: host is the composition root — nothing it assembles may import it (or its
// command line, or its test kit), and the test kit is for tests only. Checked over the
// whole dependency graph of each package, not only direct imports.
func TestImports_NothingHostAssemblesImportsHost(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command")
	}
	const module = "github.com/toolgen/toolgen/"
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}",
		module+"runtime/...", module+"mcp/...", module+"protocol/...", module+"spec/...", module+"tools",
		module+"internal/events", module+"internal/identity").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == module+"host" || strings.HasPrefix(dep, module+"host/") {
			t.Errorf("a package host assembles depends on %s", dep)
		}
	}
	out, err = exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+"cmd/...", module+"host", module+"host/hostcli").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == module+"host/hosttest" || strings.Contains(dep, "runtime/tooltest") {
			t.Errorf("production code depends on the test kit %s", dep)
		}
	}
}
