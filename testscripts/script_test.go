package testscripts

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/toolgen/toolgen/host"
	"github.com/toolgen/toolgen/host/hostcli"
	"github.com/toolgen/toolgen/host/hosttest"
	"github.com/toolgen/toolgen/internal/hostile"
	"github.com/toolgen/toolgen/internal/toolgencli"
)

var update = flag.Bool("update", false, "rewrite the golden sections of failing scripts")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"toolgen": func() { os.Exit(toolgencli.Run(os.Args[1:], os.Stdout, os.Stderr)) },
		// hostile-mcp is the repository's hostile MCP test server on stdio (a device's
		// local server in toolrun_device).
		"hostile-mcp": func() {
			if err := hostile.ServeStdio(context.Background()); err != nil {
				fmt.Fprintln(os.Stderr, "hostile-mcp:", err)
				os.Exit(1)
			}
		},
		"toolrun": func() {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			code := hostcli.Run(ctx, hostcli.Config{Name: "toolrun", Builtins: host.AllBuiltins}, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
			stop()
			os.Exit(code)
		},
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
	// The real MCP client (the inspector's CLI mode) for the toolrun serve scripts: with
	// node installed it must be there (make node-deps); without node those scripts skip.
	inspector, everything := "", ""
	if _, err := exec.LookPath("node"); err == nil {
		modules := filepath.Join(repo, ".tooldeps", "node_modules", "@modelcontextprotocol")
		inspector = filepath.Join(modules, "inspector", "cli", "build", "cli.js")
		everything = filepath.Join(modules, "server-everything", "dist", "index.js")
		for _, f := range []string{inspector, everything} {
			if _, err := os.Stat(f); err != nil {
				t.Fatalf("%s is missing: run `make node-deps`", f)
			}
		}
	}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode":  cmdExitCode,
			"issuer":    cmdIssuer,
			"httpget":   cmdHTTPGet,
			"envfile":   cmdEnvFile,
			"modcached": cmdModCached,
			// hosttest's commands: its go-sdk client (scripts that need no node, the
			// sec14_ attacks), fresh PostgreSQL schemas, ports and waits.
			"mcp":        hosttest.Commands()["mcp"],
			"pgschema":   hosttest.Commands()["pgschema"],
			"freeport":   hosttest.Commands()["freeport"],
			"waitport":   hosttest.Commands()["waitport"],
			"waitfile":   hosttest.Commands()["waitfile"],
			"retryuntil": hosttest.Commands()["retryuntil"],
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
			// The external module's own scripts run their PostgreSQL cases with it.
			if dsn := os.Getenv("TOOLGEN_PG_DSN"); dsn != "" {
				env.Setenv("TOOLGEN_PG_DSN", dsn)
			}
			// WS is the workspace of the toolrun commands (TOOLRUN_WORKSPACE), beside the
			// script's directory, not in it: the script's directory is the spec root,
			// which a workspace must stay out of (SEC-1). The archive's ws/ files are
			// moved there.
			ws := env.WorkDir + "-ws"
			err := os.Rename(filepath.Join(env.WorkDir, "ws"), ws)
			if errors.Is(err, os.ErrNotExist) {
				err = os.Mkdir(ws, 0o755)
			}
			if err != nil {
				return err
			}
			env.Defer(func() { os.RemoveAll(ws) })
			env.Setenv("WS", ws)
			env.Setenv("TOOLRUN_WORKSPACE", ws)
			env.Setenv("INSPECTOR", inspector)
			env.Setenv("EVERYTHING", everything)
			// A free port for scripts that start a server (toolrun serve --http), one
			// they may restart on (see hosttest.FreePort).
			port, err := hosttest.FreePort()
			if err != nil {
				return err
			}
			env.Setenv("PORT", strconv.Itoa(port))
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "go":
				_, ok := goEnv["GOBIN_DIR"]
				return ok, nil
			case "node":
				return inspector != "", nil
			case "pg":
				return os.Getenv("TOOLGEN_PG_DSN") != "", nil
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

// cmdModCached is "modcached MODULE": the version of MODULE this module requires is in
// the module cache, for a script that builds another module offline (GOPROXY=off) —
// the released version, where this module replaces it (the go-sdk: an importing module
// gets the released one). It fails naming the make target that puts it there.
func cmdModCached(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: modcached MODULE")
	}
	list := exec.Command("go", "list", "-m", "-f", "{{.Version}}", args[0])
	list.Dir = ts.Getenv("REPO")
	out, err := list.Output()
	if err != nil {
		ts.Fatalf("modcached: go list -m %s: %v", args[0], err)
	}
	version := strings.TrimSpace(string(out))
	zip := filepath.Join(ts.Getenv("GOMODCACHE"), "cache", "download", args[0], "@v", version+".zip")
	if _, err := os.Stat(zip); err != nil {
		ts.Fatalf("modcached: %s@%s is not in the module cache, and this script builds offline: run make go-deps", args[0], version)
	}
}

// cmdIssuer is a test OIDC issuer whose keys the script generates:
//
//	issuer init DIR                     an RSA key: DIR/key.json (private, JWK) and DIR/pub.pem
//	issuer sign DIR FILE CLAIMS [ALG]   a JWT of the JSON CLAIMS into FILE; "exp": "+1h" or "-1h"
//	                                    is relative to now; ALG RS256 (default), none (unsigned)
//	                                    or HS256-PUB (HMAC keyed with the public key PEM: the
//	                                    algorithm-confusion attack)
func cmdIssuer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: issuer init DIR | issuer sign DIR FILE CLAIMS [ALG]")
	}
	dir := ts.MkAbs(args[1])
	switch {
	case args[0] == "init" && len(args) == 2:
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		ts.Check(err)
		priv, err := json.Marshal(jose.JSONWebKey{Key: key, Algorithm: string(jose.RS256)})
		ts.Check(err)
		der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		ts.Check(err)
		ts.Check(os.MkdirAll(dir, 0o755))
		ts.Check(os.WriteFile(filepath.Join(dir, "key.json"), priv, 0o600))
		ts.Check(os.WriteFile(filepath.Join(dir, "pub.pem"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644))
	case args[0] == "sign" && (len(args) == 4 || len(args) == 5):
		var claims map[string]any
		if err := json.Unmarshal([]byte(args[3]), &claims); err != nil {
			ts.Fatalf("issuer sign: claims: %v", err)
		}
		for _, k := range []string{"exp", "nbf", "iat"} {
			if rel, ok := claims[k].(string); ok {
				d, err := time.ParseDuration(rel)
				ts.Check(err)
				claims[k] = time.Now().Add(d).Unix()
			}
		}
		payload, err := json.Marshal(claims)
		ts.Check(err)
		alg := "RS256"
		if len(args) == 5 {
			alg = args[4]
		}
		b64 := base64.RawURLEncoding.EncodeToString
		var token string
		switch alg {
		case "RS256":
			raw, err := os.ReadFile(filepath.Join(dir, "key.json"))
			ts.Check(err)
			var jwk jose.JSONWebKey
			ts.Check(jwk.UnmarshalJSON(raw))
			signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jwk.Key}, (&jose.SignerOptions{}).WithType("JWT"))
			ts.Check(err)
			sig, err := signer.Sign(payload)
			ts.Check(err)
			token, err = sig.CompactSerialize()
			ts.Check(err)
		case "none":
			token = b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + b64(payload) + "."
		case "HS256-PUB":
			pub, err := os.ReadFile(filepath.Join(dir, "pub.pem"))
			ts.Check(err)
			head := b64([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + b64(payload)
			mac := hmac.New(sha256.New, pub)
			mac.Write([]byte(head))
			token = head + "." + b64(mac.Sum(nil))
		default:
			ts.Fatalf("issuer sign: unknown ALG %s", alg)
		}
		ts.Check(os.WriteFile(ts.MkAbs(args[2]), []byte(token), 0o600))
	default:
		ts.Fatalf("usage: issuer init DIR | issuer sign DIR FILE CLAIMS [ALG]")
	}
}

// cmdHTTPGet is "httpget URL [TOKENFILE]": a GET (with the bearer token read from
// TOKENFILE), printing the status line, the WWW-Authenticate header and the body to
// stdout. It fails only when the request cannot be made.
func cmdHTTPGet(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: httpget URL [TOKENFILE]")
	}
	req, err := http.NewRequest(http.MethodGet, args[0], nil)
	ts.Check(err)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if len(args) == 2 {
		tok, err := os.ReadFile(ts.MkAbs(args[1]))
		ts.Check(err)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	ts.Check(err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	fmt.Fprintf(ts.Stdout(), "%s\nWWW-Authenticate: %s\n%s\n", resp.Status, resp.Header.Get("WWW-Authenticate"), body)
}

// cmdEnvFile is "envfile NAME FILE": it sets NAME to FILE's content, trimmed (a token a
// script generated, for a header argument).
func cmdEnvFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: envfile NAME FILE")
	}
	ts.Setenv(args[0], strings.TrimSpace(ts.ReadFile(args[1])))
}
