package testscripts

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/toolgen/toolgen/internal/toolgencli"
)

var update = flag.Bool("update", false, "rewrite the golden sections of failing scripts")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"toolgen": func() { os.Exit(toolgencli.Run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

func TestScripts(t *testing.T) {
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	goEnv := map[string]string{}
	if gobin, err := exec.LookPath("go"); err == nil {
		out, err := exec.Command(gobin, "env", "GOCACHE", "GOMODCACHE", "GOPATH", "GOROOT").Output()
		if err == nil {
			vals := strings.Split(strings.TrimSpace(string(out)), "\n")
			for i, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOROOT"} {
				if i < len(vals) {
					goEnv[k] = vals[i]
				}
			}
		}
		goEnv["GOBIN_DIR"] = filepath.Dir(gobin)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 ".",
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": cmdExitCode,
		},
		Setup: func(env *testscript.Env) error {
			// REPO is this checkout, for the replace directive of external-module scripts.
			env.Setenv("REPO", repo)
			for k, v := range goEnv {
				if k == "GOBIN_DIR" {
					env.Setenv("PATH", v+string(os.PathListSeparator)+env.Getenv("PATH"))
					continue
				}
				env.Setenv(k, v)
			}
			// Build offline from the module cache, with the installed toolchain only.
			env.Setenv("GOPROXY", "off")
			env.Setenv("GOFLAGS", "-mod=mod")
			env.Setenv("GOTOOLCHAIN", "local")
			env.Setenv("GOOS", runtime.GOOS)
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "go":
				_, ok := goEnv["GOBIN_DIR"]
				return ok, nil
			}
			return false, nil
		},
	})
}

// cmdExitCode is "exitcode N program [args...]": it runs program like exec (stdout and
// stderr are kept for the stdout, stderr and cmp commands that follow) and requires its
// exit status to be exactly N, so that a script can tell findings (1) from usage
// errors (2), which "! exec" cannot.
func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! exitcode")
	}
	if len(args) < 2 {
		ts.Fatalf("usage: exitcode N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: %q is not a number", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exitcode: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}
