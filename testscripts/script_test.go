package testscripts

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
