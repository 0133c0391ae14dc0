// Package hosttest is the testscript kit for an author's end-to-end tests of their own
// host: `.txtar` scripts (github.com/rogpeppe/go-internal/testscript) that start the
// author's host as a real process, call its tools with a real MCP client, approve held
// calls as another principal, kill the host with SIGKILL at a named pipeline step, let
// a peer's maintenance recover, and read the UNCERTAIN queue and the audit log.
//
// Wire it into the module's script test:
//
//	func TestMain(m *testing.M) {
//		testscript.Main(m, hosttest.Programs(map[string]hostcli.Config{
//			"acme-host": {Name: "acme-host", Tools: tools.All(), Builtins: []string{"protocol.dispatch"}},
//		}))
//	}
//
//	func TestScripts(t *testing.T) {
//		testscript.Run(t, testscript.Params{Dir: "testdata/script", Cmds: hosttest.Commands(),
//			Setup: hosttest.Setup("."), Condition: hosttest.Condition})
//	}
//
// Each program is the host's whole command line (package hostcli): `exec acme-host
// approve 3 --principal bob`, `exec acme-host uncertain`, `exec acme-host audit`, and
// `exec acme-host serve --http 127.0.0.1:$PORT &a&` in the background. Setting
// TOOLRUN_KILL_AT=STEP in the script's environment makes a program SIGKILL itself right
// after that pipeline step ("watermark", "execute", "settle", ...); the builtin `kill
// -KILL a` kills a background host from outside. The commands:
//
//	mcp URL list                                 tools/list over Streamable HTTP (wire names, one per line)
//	mcp URL call TOOL JSON                       tools/call; stdout is the result (see below); fails unless it succeeded
//	mcp --stdio 'PROG ARGS' list|call ...         the same, to a program started on stdio
//	    flags before URL: --session S (io.toolgen/session_id), --run R (io.toolgen/run_id),
//	    --token-file F (bearer token), --session-file F (the session named in F; when F
//	    does not exist, none is named and the one the result hands back, a session
//	    the server minted, is written to F)
//	waitmcp URL                                  wait (at most 60 s) until an MCP server answers at URL
//	waitport PORT                                wait (at most 60 s) until something listens on 127.0.0.1:PORT
//	waitfile FILE                                wait (at most 60 s) until FILE exists (a background process
//	                                             reached a point); the three waits fail at once when a
//	                                             background command started since the previous wait has exited
//	retryuntil REGEXP PROG ARGS...               run PROG (as exec) until its stdout matches, at most 60 s
//	freeport NAME                                set $NAME to a free TCP port on 127.0.0.1 (see FreePort)
//	pgschema NAME                                create a fresh schema in $TOOLGEN_PG_DSN's database (dropped
//	                                             when the script ends) and set $NAME to a DSN using it
//
// `mcp ... call` prints `ok` or `error STATUS REASON_CODE` on its first line, then one
// line per content item (`[trust] text`), then `structured: JSON` when the result has
// structured content. A call refused by the pipeline (denied, failed, unavailable,
// uncertain) fails the command, so scripts write `! mcp URL call ...` for it; a lost
// connection, or a request the server refuses (a JSON-RPC error), fails it too, with
// the error on stderr. `! mcp URL list` expects the list to be refused.
//
// hosttest is for tests only: production code must never import it.
package hosttest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/toolgen/toolgen/host/hostcli"
)

// Programs turns host programs into the commands of testscript.Main: each name becomes
// a program the scripts exec, running hostcli with its Config in a real process.
func Programs(programs map[string]hostcli.Config) map[string]func() {
	out := make(map[string]func(), len(programs))
	for name, cfg := range programs {
		if cfg.Name == "" {
			cfg.Name = name
		}
		out[name] = func() { hostcli.Main(cfg) }
	}
	return out
}

// Commands returns the kit's script commands, for testscript.Params.Cmds.
func Commands() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	return map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"mcp":        cmdMCP,
		"waitmcp":    cmdWaitMCP,
		"waitport":   cmdWaitPort,
		"waitfile":   cmdWaitFile,
		"retryuntil": cmdRetryUntil,
		"freeport":   cmdFreePort,
		"pgschema":   cmdPGSchema,
	}
}

// specRootEntries are what Setup copies of a spec root: the spec files a host reads.
var specRootEntries = []string{"tools", "servers", "protocols", "devices", "policy.yaml", "principals.yaml", "notifications.yaml"}

// Setup returns a testscript Setup that gives each script a fresh copy of the spec root
// at root (its tools/, servers/, protocols/, devices/, policy.yaml and
// principals.yaml; relative to the test's package directory), so that the hosts a
// script starts in $WORK have their own store (.toolrun/) and workspace. It sets
// $PORT to a free port, for the script's first server, and passes TOOLGEN_PG_DSN on
// (see pgschema).
func Setup(root string) func(env *testscript.Env) error {
	return func(env *testscript.Env) error {
		for _, name := range specRootEntries {
			src, dst := filepath.Join(root, name), filepath.Join(env.WorkDir, name)
			st, err := os.Stat(src)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				continue
			case err != nil:
				return err
			case st.IsDir():
				err = os.CopyFS(dst, os.DirFS(src))
			default:
				var data []byte
				if data, err = os.ReadFile(src); err == nil {
					err = os.WriteFile(dst, data, 0o644)
				}
			}
			if err != nil {
				return fmt.Errorf("hosttest: copy the spec root: %w", err)
			}
		}
		port, err := FreePort()
		if err != nil {
			return err
		}
		env.Setenv("PORT", strconv.Itoa(port))
		if dsn := os.Getenv(EnvPostgresDSN); dsn != "" {
			env.Setenv(EnvPostgresDSN, dsn)
		}
		return nil
	}
}

// EnvPostgresDSN names the PostgreSQL database whose fresh schemas pgschema hands out;
// without it the "pg" condition is false.
const EnvPostgresDSN = "TOOLGEN_PG_DSN"

// Condition answers the kit's script conditions, for testscript.Params.Condition:
// "pg" holds when TOOLGEN_PG_DSN is set. Any other condition is an error.
func Condition(cond string) (bool, error) {
	if cond == "pg" {
		return os.Getenv(EnvPostgresDSN) != "", nil
	}
	return false, fmt.Errorf("unknown condition %q", cond)
}

// wait bounds every waiting command: a failure guard, never a measurement.
const wait = 60 * time.Second

func cmdMCP(ts *testscript.TestScript, neg bool, args []string) {
	const usage = "usage: mcp [--session S | --session-file F] [--run R] [--token-file F] (URL | --stdio 'PROG ARGS') list | call TOOL JSON"
	var session, sessionFile, run, token, stdio string
	for len(args) > 0 && strings.HasPrefix(args[0], "--") {
		if len(args) < 2 {
			ts.Fatalf(usage)
		}
		switch args[0] {
		case "--session":
			session = args[1]
		case "--session-file":
			sessionFile = ts.MkAbs(args[1])
			if b, err := os.ReadFile(sessionFile); err == nil {
				session = strings.TrimSpace(string(b))
			}
		case "--run":
			run = args[1]
		case "--token-file":
			token = strings.TrimSpace(ts.ReadFile(args[1]))
		case "--stdio":
			stdio = args[1]
		default:
			ts.Fatalf(usage)
		}
		args = args[2:]
	}
	var transport mcp.Transport
	switch {
	case stdio != "":
		words := strings.Fields(stdio)
		if len(words) == 0 {
			ts.Fatalf("mcp --stdio: %q is not a command", stdio)
		}
		cmd := exec.Command(lookPath(ts, words[0]), words[1:]...)
		cmd.Dir = ts.MkAbs(".")
		cmd.Env = environ(ts)
		cmd.Stderr = ts.Stderr()
		transport = &mcp.CommandTransport{Command: cmd}
	case len(args) > 0:
		t := &mcp.StreamableClientTransport{Endpoint: args[0], MaxRetries: -1}
		if token != "" {
			t.HTTPClient = &http.Client{Transport: bearer{token: token}}
		}
		transport, args = t, args[1:]
	default:
		ts.Fatalf(usage)
	}
	if len(args) == 0 {
		ts.Fatalf(usage)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "hosttest", Version: "v1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		ts.Fatalf("mcp: connect: %v", err)
	}
	defer cs.Close()
	var meta mcp.Meta
	for k, v := range map[string]string{"io.toolgen/session_id": session, "io.toolgen/run_id": run} {
		if v != "" {
			if meta == nil {
				meta = mcp.Meta{}
			}
			meta[k] = v
		}
	}
	switch {
	case args[0] == "list" && len(args) == 1:
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Meta: meta})
		if err != nil {
			fmt.Fprintf(ts.Stderr(), "mcp list: %v\n", err)
			if !neg {
				ts.Fatalf("mcp list: %v", err)
			}
			return
		}
		if neg {
			ts.Fatalf("mcp list succeeded")
		}
		handedBack(ts, sessionFile, res.Meta)
		for _, t := range res.Tools {
			fmt.Fprintln(ts.Stdout(), t.Name)
		}
	case args[0] == "call" && len(args) == 3:
		var arguments map[string]any
		if err := json.Unmarshal([]byte(args[2]), &arguments); err != nil {
			ts.Fatalf("mcp call: arguments: %v", err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: wireName(args[1]), Arguments: arguments, Meta: meta})
		if err != nil {
			fmt.Fprintf(ts.Stderr(), "mcp call: %v\n", err)
			if !neg {
				ts.Fatalf("mcp call %s: %v", args[1], err)
			}
			return
		}
		handedBack(ts, sessionFile, res.Meta)
		printResult(ts, res)
		if res.IsError != neg {
			if neg {
				ts.Fatalf("mcp call %s succeeded", args[1])
			}
			ts.Fatalf("mcp call %s did not succeed", args[1])
		}
	default:
		ts.Fatalf(usage)
	}
}

// handedBack writes the session a result hands back to file, unless file is "" or
// exists already.
func handedBack(ts *testscript.TestScript, file string, meta mcp.Meta) {
	if file == "" {
		return
	}
	if _, err := os.Stat(file); err == nil {
		return
	}
	session, _ := meta["io.toolgen/session_id"].(string)
	if session == "" {
		ts.Fatalf("mcp: the result hands back no session (_meta io.toolgen/session_id)")
	}
	if err := os.WriteFile(file, []byte(session+"\n"), 0o644); err != nil {
		ts.Fatalf("mcp: %v", err)
	}
}

// wireName is the served name of a registry name: "." is "__" (SPEC-1); a wire name
// passes unchanged.
func wireName(name string) string { return strings.ReplaceAll(name, ".", "__") }

func printResult(ts *testscript.TestScript, res *mcp.CallToolResult) {
	w := ts.Stdout()
	if res.IsError {
		status, _ := res.Meta["io.toolgen/status"].(string)
		var shape struct {
			ReasonCode string `json:"reason_code"`
		}
		if raw, err := json.Marshal(res.StructuredContent); err == nil {
			_ = json.Unmarshal(raw, &shape)
		}
		fmt.Fprintf(w, "error %s %s\n", status, shape.ReasonCode)
	} else {
		fmt.Fprintln(w, "ok")
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			trust, _ := t.Meta["io.toolgen/trust"].(string)
			fmt.Fprintf(w, "[%s] %s\n", trust, t.Text)
		}
	}
	if !res.IsError && res.StructuredContent != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		fmt.Fprintf(w, "structured: %s\n", raw)
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// environ is the environment of a process the kit starts itself: the script's values
// of this process's variables and of those a host program reads. (testscript does not
// list a script's variables, so one a script invents is not passed on.)
func environ(ts *testscript.TestScript) []string {
	seen := map[string]bool{}
	var env []string
	add := func(k string) {
		if v := ts.Getenv(k); v != "" && !seen[k] {
			seen[k] = true
			env = append(env, k+"="+v)
		}
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		add(k)
	}
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "WORK", hostcli.KillAtEnv, "TOOLRUN_DB", "TOOLGEN_PG_DSN"} {
		add(k)
	}
	return env
}

// lookPath finds prog on the script's PATH (where testscript puts the programs of
// testscript.Main), or as a path relative to the script's directory.
func lookPath(ts *testscript.TestScript, prog string) string {
	if strings.Contains(prog, "/") {
		return ts.MkAbs(prog)
	}
	for _, dir := range filepath.SplitList(ts.Getenv("PATH")) {
		p := filepath.Join(dir, prog)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	ts.Fatalf("mcp --stdio: %s is not on the script's PATH", prog)
	return ""
}

func cmdWaitMCP(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitmcp URL")
	}
	client := &http.Client{Timeout: time.Second}
	waitFor(ts, "waitmcp "+args[0], func() error {
		// An MCP server answers a GET without a session with an HTTP status, whatever it
		// is: that it answers is what is waited for.
		resp, err := client.Get(args[0])
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
}

func cmdRetryUntil(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: retryuntil REGEXP PROGRAM ARGS...")
	}
	re, err := regexp.Compile("(?m)" + args[0]) // multi-line, as stdout's pattern is
	if err != nil {
		ts.Fatalf("retryuntil: %v", err)
	}
	for deadline := time.Now().Add(wait); ; time.Sleep(200 * time.Millisecond) {
		_ = ts.Exec(args[1], args[2:]...)
		if re.MatchString(ts.ReadFile("stdout")) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("retryuntil: %s never printed a match of %q within %s", args[1], args[0], wait)
		}
	}
}

func cmdFreePort(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: freeport NAME")
	}
	port, err := FreePort()
	ts.Check(err)
	ts.Setenv(args[0], strconv.Itoa(port))
}

func cmdPGSchema(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: pgschema NAME")
	}
	dsn := ts.Getenv(EnvPostgresDSN)
	if dsn == "" {
		ts.Fatalf("pgschema: %s is not set (guard the script with [pg])", EnvPostgresDSN)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		ts.Fatalf("pgschema: %v", err)
	}
	defer conn.Close(ctx)
	schema := "hosttest_" + strings.ToLower(rand.Text())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		ts.Fatalf("pgschema: %v", err)
	}
	ts.Defer(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if conn, err := pgx.Connect(ctx, dsn); err == nil {
			conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			conn.Close(ctx)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		ts.Fatalf("pgschema: %s is not a URL: %v", EnvPostgresDSN, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	ts.Setenv(args[0], u.String())
}
