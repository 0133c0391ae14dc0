package codegen

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedCodeCompiles writes the code generated from testdata/specs (and from
// testdata/edge) into a temporary module that uses this repository's runtime (through a replace directive),
// then runs go vet and the behaviour tests in testdata/compile/gen on it, and checks
// that the packages in testdata/compile/bad, which pass a Run-only implementation to a
// watermarked tool's constructor, do not compile (GEN-2).
func TestGeneratedCodeCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command; skipped with -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s has no go.mod: %v", root, err)
	}

	mod := t.TempDir()
	gomod := "module example.com/gentest\n\ngo 1.26\n\n" +
		"require github.com/toolgen/toolgen v0.0.0\n\n" +
		"replace github.com/toolgen/toolgen => " + filepath.ToSlash(root) + "\n"
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	// The replaced module's requirements are verified against its own go.sum.
	if sum, err := os.ReadFile(filepath.Join(root, "go.sum")); err == nil {
		if err := os.WriteFile(filepath.Join(mod, "go.sum"), sum, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.CopyFS(mod, os.DirFS("testdata/compile")); err != nil {
		t.Fatal(err)
	}
	files := generate(t, loadTree(t, specDir))
	if _, err := Sync(filepath.Join(mod, "gen"), files, false); err != nil {
		t.Fatal(err)
	}
	// testdata/edge: keywords as names, hostile descriptions, nested arrays, no args.
	edge, err := Generate(loadTree(t, "testdata/edge"), Options{Package: "edge"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Sync(filepath.Join(mod, "edge"), edge, false); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) (string, error) {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOPROXY=off")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	if out, err := run("build", "./gen", "./edge"); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if out, err := run("vet", "./gen", "./edge"); err != nil {
		t.Fatalf("go vet: %v\n%s", err, out)
	}
	if gofmt, err := exec.LookPath("gofmt"); err == nil {
		out, err := exec.Command(gofmt, "-s", "-l", filepath.Join(mod, "gen"), filepath.Join(mod, "edge")).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("gofmt -s -l lists generated files (%v):\n%s", err, out)
		}
	}
	if out, err := run("test", "-count=1", "./gen"); err != nil {
		t.Fatalf("go test ./gen: %v\n%s", err, out)
	}
	for _, c := range []struct{ pkg, want string }{
		{"./bad/infer", "NewWorkspaceWriteText"},
		{"./bad/explicit", "missing method Commit"},
	} {
		pkg, want := c.pkg, c.want
		out, err := run("build", pkg)
		if err == nil {
			t.Errorf("go build %s succeeded: a Run-only implementation was accepted for a watermarked tool", pkg)
			continue
		}
		t.Logf("go build %s (expected to fail):\n%s", pkg, out)
		if !strings.Contains(out, want) {
			t.Errorf("go build %s failed, but not because of the missing methods (want %q):\n%s", pkg, want, out)
		}
	}
}
