package toolgencli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/internal/cli"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// hostModule is a module example.com/acme/v2 whose spec root is specs/, with one tool
// implemented in specs/tools.
func hostModule(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"go.mod":                      "module example.com/acme/v2\n\ngo 1.26\n",
		"specs/tools/acme.read.yaml":  "name: acme.read\nversion: 1\ndescription: Read.\nside_effect: read\nidempotency: idempotent\nrisk: low\n",
		"specs/tools/generate.go":     "package tools\n\n//go:generate go tool toolgen generate -o ../gen ..\n",
		"specs/tools/read.go":         "package tools\n\nimport \"example.com/acme/v2/specs/gen\"\n\ntype read struct{}\n\nfunc (read) Run(_, _ any, _ gen.AcmeReadArgs) (gen.AcmeReadResult, error) { return gen.AcmeReadResult{}, nil }\n",
		"specs/protocols/acme.yaml":   "name: acme\ninitial_mode: m\nmodes:\n  m:\n    tools: [acme.read, identity.whoami]\n",
		"specs/unrelated/notes.txt":   "",
		"specs/tools/acme.read.notes": "",
	})
	return root
}

// TestHost_SpecRootBelowTheModuleRoot: cmd/NAME goes to the module root, all.go to the
// tools package, and the next command runs from the module root with --dir.
func TestHost_SpecRootBelowTheModuleRoot(t *testing.T) {
	root := hostModule(t)
	code, stdout, stderr := runIn(t, filepath.Join(root, "specs"), "host")
	if code != cli.ExitOK || stderr != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	want := "wrote ../cmd/acme-host/main.go\nwrote tools/all.go\n" +
		"serve the tools over MCP: cd .. && go run ./cmd/acme-host serve --stdio --dir specs\n"
	if stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout, want)
	}
	main, err := os.ReadFile(filepath.Join(root, "cmd", "acme-host", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"\"example.com/acme/v2/specs/tools\"", "Builtins: []string{\"identity.whoami\"}", "--dir specs"} {
		if !strings.Contains(string(main), s) {
			t.Errorf("main.go lacks %s:\n%s", s, main)
		}
	}
	all, err := os.ReadFile(filepath.Join(root, "specs", "tools", "all.go"))
	if err != nil || !strings.Contains(string(all), "gen.NewAcmeRead(read{}),") || !strings.Contains(string(all), "\"example.com/acme/v2/specs/gen\"") {
		t.Errorf("all.go (%v):\n%s", err, all)
	}
	// Written once: a second run refuses, naming the file; -name writes another program.
	code, _, stderr = runIn(t, root, "host", "specs")
	if code != cli.ExitFailed || !strings.HasPrefix(stderr, "toolgen host: cmd/acme-host/main.go exists") {
		t.Errorf("second run: exit %d, stderr:\n%s", code, stderr)
	}
	code, stdout, _ = runIn(t, root, "host", "-name", "other", "specs")
	if code != cli.ExitOK || stdout != "wrote cmd/other/main.go\nserve the tools over MCP: go run ./cmd/other serve --stdio --dir specs\n" {
		t.Errorf("-name other: exit %d, stdout:\n%s", code, stdout)
	}
}

func TestHost_UsageAndIOErrors_Exit2(t *testing.T) {
	root := hostModule(t)
	for _, args := range [][]string{
		{"host", "-name", "../x", "specs"},
		{"host", "-name", "", "specs", "more"},
		{"host", "-bogus"},
		{"host", "missing"},
	} {
		if code, stdout, stderr := runIn(t, root, args...); code != cli.ExitTrouble || stdout != "" || !strings.Contains(stderr, "toolgen") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "cmd")); err == nil {
		t.Error("a usage error wrote cmd/")
	}

	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"tools/a.b.yaml": "name: a.b\nversion: 1\ndescription: d\nside_effect: none\nrisk: low\n"})
	code, _, stderr := runIn(t, outside, "host")
	if strings.Contains(stderr, "not inside a Go module") {
		if code != cli.ExitTrouble {
			t.Errorf("outside a module: exit %d", code)
		}
	} else if code == cli.ExitOK {
		t.Skipf("the temporary directory is inside a Go module")
	}
}

// TestHost_BadAll: an All that is not func All() []runtime.Tool is a finding where it
// is declared, since main.go would not compile against it.
func TestHost_BadAll(t *testing.T) {
	root := hostModule(t)
	writeFiles(t, root, map[string]string{"specs/tools/all_other.go": "package tools\n\nfunc All() []string { return nil }\n"})
	code, stdout, stderr := runIn(t, root, "host", "specs")
	want := "specs/tools/all_other.go:3:6: All is declared here, but not as func All() []runtime.Tool, which cmd/acme-host/main.go calls"
	if code != cli.ExitFailed || stdout != "" || !strings.HasPrefix(stderr, want) {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}
