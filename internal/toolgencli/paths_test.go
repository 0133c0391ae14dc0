package toolgencli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/internal/cli"
)

// pathsModule writes a module whose tools/ holds a spec with one finding and the
// //go:generate package, and returns its root.
func pathsModule(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"go.mod":                "module example.com/m\n\ngo 1.26\n",
		"tools/generate.go":     "package tools\n",
		"tools/demo.read.yaml":  "name: demo.read\nversion: 1\ndescription: Read.\nside_effect: read\nidempotency: idempotent\nrisk: low\n",
		"tools/demo.write.yaml": "name: demo.write\nversion: 1\ndescription: Write.\nside_effect: write\nrisk: low\n",
	}
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func runIn(t *testing.T, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Chdir(dir)
	var out, errb bytes.Buffer
	code = Run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestPaths_GoGenerate_RelativeToModuleRoot: go generate runs toolgen in tools/ with
// the root "..": the finding prints as tools/demo.write.yaml, as from the module root.
func TestPaths_GoGenerate_RelativeToModuleRoot(t *testing.T) {
	root := pathsModule(t)
	t.Setenv("GOFILE", "generate.go")
	t.Setenv("GOPACKAGE", "tools")
	code, _, stderr := runIn(t, filepath.Join(root, "tools"), "generate", "-o", "../gen", "..")
	want := "tools/demo.write.yaml:4:1: idempotency is required when side_effect is write"
	if code != cli.ExitFailed || !strings.HasPrefix(stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant it to start with %s", code, stderr, want)
	}
}

// TestPaths_GoGenerate_StaleFilesRelativeToModuleRoot: -check names the stale files and
// the root relative to the module root too.
func TestPaths_GoGenerate_StaleFilesRelativeToModuleRoot(t *testing.T) {
	root := pathsModule(t)
	if err := os.Remove(filepath.Join(root, "tools", "demo.write.yaml")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOFILE", "generate.go")
	t.Setenv("GOPACKAGE", "tools")
	code, _, stderr := runIn(t, filepath.Join(root, "tools"), "generate", "-check", "-o", "../gen", "..")
	for _, want := range []string{
		filepath.Join("gen", "tool.demo.read.gen.go") + " is missing\n",
		"run go generate ./... (or toolgen generate .)",
	} {
		if code != cli.ExitFailed || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, stderr:\n%s\nwant it to hold %q", code, stderr, want)
		}
	}
	if strings.Contains(stderr, "../") {
		t.Errorf("a path still goes through ..:\n%s", stderr)
	}
}

// TestPaths_Direct_AsNamed: run directly, toolgen prints the root as the user named it,
// relative to where they ran it, even in a package directory of a module.
func TestPaths_Direct_AsNamed(t *testing.T) {
	root := pathsModule(t)
	t.Setenv("GOFILE", "")
	t.Setenv("GOPACKAGE", "")
	code, _, stderr := runIn(t, filepath.Join(root, "tools"), "check", "..")
	if want := "../tools/demo.write.yaml:4:1: "; code != cli.ExitFailed || !strings.HasPrefix(stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant it to start with %s", code, stderr, want)
	}
	code, _, stderr = runIn(t, root, "check", ".")
	if want := "tools/demo.write.yaml:4:1: "; code != cli.ExitFailed || !strings.HasPrefix(stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant it to start with %s", code, stderr, want)
	}
}

// TestPaths_GoGenerate_OutsideModuleRoot: a spec root outside the module root prints as
// named (there is no shorter honest path).
func TestPaths_GoGenerate_OutsideModuleRoot(t *testing.T) {
	specs := pathsModule(t)
	if err := os.Remove(filepath.Join(specs, "go.mod")); err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOFILE", "generate.go")
	t.Setenv("GOPACKAGE", "other")
	code, _, stderr := runIn(t, mod, "check", specs)
	if want := filepath.ToSlash(specs) + "/tools/demo.write.yaml:4:1: "; code != cli.ExitFailed || !strings.HasPrefix(stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant it to start with %s", code, stderr, want)
	}
}
