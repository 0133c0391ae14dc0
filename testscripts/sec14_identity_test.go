package testscripts

// Issue 14, findings 5, 6, 9 and 15, attacked against real toolrun processes: each test
// runs the `toolrun` command that TestMain (testscript.Main) puts on $PATH — the same
// in-process program the .txtar scripts exec — serving over real HTTP, with a real MCP
// client, two tenants in principals.yaml, and, where the store matters, two serving
// processes on one store, on SQLite and on PostgreSQL.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/identity"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
)

// sec14idWait bounds every wait of these tests (a failure guard, not an assertion).
const sec14idWait = 60 * time.Second

// sec14idRoot writes a spec root: the named builtin specs under tools/, then files.
func sec14idRoot(t *testing.T, tools []string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range tools {
		data, err := os.ReadFile(filepath.Join("..", "tools", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tools", name+".yaml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// sec14idToolrun runs one toolrun command to completion.
func sec14idToolrun(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sec14idWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, "toolrun", args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("toolrun %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), code
}

// sec14idServe starts `toolrun serve --http` in the background, on a port of its own
// choosing, and returns its base URL; the test's cleanup interrupts it and waits for
// it to exit.
func sec14idServe(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("toolrun", append([]string{"serve", "--http", "127.0.0.1:0", "--no-servers"}, args...)...)
	errb := &syncBuf{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done, exited := make(chan error, 1), make(chan struct{})
	go func() { done <- cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(sec14idWait):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("toolrun serve stderr:\n%s", errb.String())
		}
	})
	return strings.TrimSuffix(servingURL(t, errb, exited, sec14idWait), "/mcp")
}

type sec14idBearer struct{ token string }

func (b sec14idBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// sec14idConnect opens an MCP session to base's /mcp with a bearer token.
func sec14idConnect(t *testing.T, base, token string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sec14idWait)
	defer cancel()
	transport := &mcp.StreamableClientTransport{Endpoint: base + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: sec14idBearer{token}}}
	client := mcp.NewClient(&mcp.Implementation{Name: "attacker", Version: "v1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", base, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func sec14idCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, meta mcp.Meta) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sec14idWait)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
}

// sec14idText is every text item of a result, and its structured content.
func sec14idText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text + "\n")
		}
	}
	if res.StructuredContent != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		b.Write(raw)
	}
	return b.String()
}

func sec14idReason(res *mcp.CallToolResult) string {
	raw, _ := json.Marshal(res.StructuredContent)
	var shape struct {
		ReasonCode string `json:"reason_code"`
	}
	json.Unmarshal(raw, &shape)
	return shape.ReasonCode
}

func sec14idDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// sec14idStores are the stores a storage-dependent attack runs on: a SQLite file, and
// a fresh PostgreSQL schema when TOOLGEN_PG_DSN is set.
func sec14idStores(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return filepath.Join(t.TempDir(), "shared.db") },
		"postgres": func(t *testing.T) string {
			dsn := os.Getenv("TOOLGEN_PG_DSN")
			if dsn == "" {
				t.Skip("TOOLGEN_PG_DSN is not set: skipping the PostgreSQL case")
			}
			ctx, cancel := context.WithTimeout(context.Background(), sec14idWait)
			defer cancel()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			schema := "sec14_" + strings.ToLower(rand.Text())
			if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), sec14idWait)
				defer cancel()
				if conn, err := pgx.Connect(ctx, dsn); err == nil {
					conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
					conn.Close(ctx)
				}
			})
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set("search_path", schema)
			u.RawQuery = q.Encode()
			return u.String()
		},
	}
}

// sec14idEvents reads every event the token may see, as the JSON lines of
// `toolrun events --json --once`.
func sec14idEvents(t *testing.T, base, tokenFile string) []map[string]any {
	t.Helper()
	out, errs, code := sec14idToolrun(t, "events", "--url", base, "--token-file", tokenFile, "--once", "--json")
	if code != 0 {
		t.Fatalf("toolrun events: exit %d\n%s", code, errs)
	}
	var evs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("event line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// TestAttack14_05_ReplayWithoutScope: tenant-mates a-reader (holds workspace.read) and
// b-noscope (does not) on two `toolrun serve --http` processes sharing one store. a
// reads a secret file without sending a call id; b reads the session, run and call ids
// from /events, replays them on both processes, and must get missing_scope — never a's
// recorded file contents. The call id b saw is no offline oracle: the plain hash of the
// tool and the guessed arguments (what the id used to be) does not match it, while a's
// own retry through the other process derives the same id and finds its record. No
// event carries the arguments or the result. A third token, of tenant beta, fares no
// better.
func TestAttack14_05_ReplayWithoutScope(t *testing.T) {
	for name, open := range sec14idStores(t) {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			tokens := map[string]string{"a": "a-reader-token-51", "b": "b-noscope-token-52", "c": "beta-reader-token-53"}
			dir := sec14idRoot(t, []string{"workspace.read_text"}, map[string]string{
				"principals.yaml": `tokens:
  - {id: a-reader, tenant: acme, scopes: [workspace.read], token_sha256: ` + sec14idDigest(tokens["a"]) + `}
  - {id: b-noscope, tenant: acme, scopes: [notes.read], token_sha256: ` + sec14idDigest(tokens["b"]) + `}
  - {id: c-beta, tenant: beta, scopes: [notes.read], token_sha256: ` + sec14idDigest(tokens["c"]) + `}
local:
  - {id: op, tenant: acme, scopes: [approvals.decide]}
`,
			})
			// Each tenant's workspace, outside the spec root (SEC-1).
			wsRoot := t.TempDir()
			if err := os.MkdirAll(filepath.Join(wsRoot, "acme", "plans"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(wsRoot, "acme", "plans", "merger.txt"), []byte("the launch codes are 0000"), 0o644); err != nil {
				t.Fatal(err)
			}
			tokenFile := map[string]string{}
			for k, v := range tokens {
				tokenFile[k] = filepath.Join(dir, k+".token")
				os.WriteFile(tokenFile[k], []byte(v), 0o600)
			}
			common := []string{"--dir", dir, "--db", db, "--workspace", filepath.Join(wsRoot, "{tenant}"), "--principal", "op"}
			p1 := sec14idServe(t, common...)
			p2 := sec14idServe(t, common...)

			const tool = "workspace__read_text"
			args := map[string]any{"path": "plans/merger.txt"}
			a := sec14idConnect(t, p1, tokens["a"])
			res, err := sec14idCall(t, a, tool, args, mcp.Meta{"io.toolgen/session_id": "a-session"})
			if err != nil || res.IsError || !strings.Contains(sec14idText(res), "launch codes") {
				t.Fatalf("a's read (the precondition): %v %s", err, sec14idText(res))
			}

			// b reads the ids from the event stream: its tenant's events.
			evs := sec14idEvents(t, p1, tokenFile["b"])
			var session, run, callID string
			for _, ev := range evs {
				raw, _ := json.Marshal(ev)
				if bytes.Contains(raw, []byte("merger")) || bytes.Contains(raw, []byte("launch")) {
					t.Fatalf("an event carries the arguments or the result: %s", raw)
				}
				if ev["tool"] == "workspace.read_text" && ev["call_id"] != nil {
					session, _ = ev["session_id"].(string)
					run, _ = ev["run_id"].(string)
					callID, _ = ev["call_id"].(string)
				}
			}
			if session != "a-session" || callID == "" {
				t.Fatalf("b did not learn a's ids from /events: %v", evs)
			}
			// The old derived id, a plain hash of the tool and the canonical arguments,
			// would confirm a guess of the path offline; the keyed one does not.
			plain := sha256.Sum256([]byte(`workspace.read_text{"path":"plans/merger.txt"}`))
			if callID == "auto-"+hex.EncodeToString(plain[:])[:16] {
				t.Fatalf("the derived call id %s is a plain hash of the tool and the arguments", callID)
			}

			meta := mcp.Meta{"io.toolgen/session_id": session, "io.toolgen/run_id": run, "io.toolgen/step": 0, "io.toolgen/call_id": callID}
			for _, p := range []string{p1, p2} {
				for _, attacker := range []struct{ who, token string }{{"b (tenant-mate)", tokens["b"]}, {"c (tenant beta)", tokens["c"]}} {
					who, tok := attacker.who, attacker.token
					if who == "c (tenant beta)" {
						// Another tenant cannot use a's session at all (ID-2); with a
						// session of its own the key still is not a's.
						meta = mcp.Meta{"io.toolgen/session_id": "beta-session", "io.toolgen/run_id": run, "io.toolgen/call_id": callID}
					}
					cs := sec14idConnect(t, p, tok)
					for range 2 { // a refusal is re-decided every time, never replayed
						res, err := sec14idCall(t, cs, tool, args, meta)
						if err != nil {
							t.Fatalf("%s on %s: %v", who, p, err)
						}
						// The breaker counts the attacker's own refusals (rows of its own
						// tenant, SEC-3): after two it answers repeated_denial — a refusal too,
						// and still nothing of a's.
						reason := sec14idReason(res)
						if !res.IsError || reason != "missing_scope" && reason != "repeated_denial" || strings.Contains(sec14idText(res), "launch") || res.Meta["io.toolgen/replayed"] == true {
							t.Fatalf("%s replaying a's key on %s: %s (meta %v), want denied/missing_scope and nothing of a's", who, p, sec14idText(res), res.Meta)
						}
					}
					meta = mcp.Meta{"io.toolgen/session_id": session, "io.toolgen/run_id": run, "io.toolgen/step": 0, "io.toolgen/call_id": callID}
				}
			}

			// a's own call again, through the other process, derives the same call id
			// (the store's secret): it finds the first as its previous generation and,
			// being a read, reads again as the next one (SES-2).
			a2 := sec14idConnect(t, p2, tokens["a"])
			res, err = sec14idCall(t, a2, tool, args, mcp.Meta{"io.toolgen/session_id": "a-session"})
			if err != nil || res.IsError || res.Meta["io.toolgen/replayed"] == true || res.Meta["io.toolgen/call_id"] != callID+"-1" {
				t.Fatalf("a's call again through the second process: %v %v %s", err, res.Meta, sec14idText(res))
			}

			// The refused replays are in the audit view, under b.
			out, errs, code := sec14idToolrun(t, "audit", "--dir", dir, "--db", db, "--principal", "op")
			if code != 0 || !strings.Contains(out, "replay_refused") || !strings.Contains(out, "b-noscope") {
				t.Fatalf("toolrun audit: exit %d\n%s%s", code, out, errs)
			}
		})
	}
}

// sec14idIssuer is an identity provider whose RSA key the test holds.
type sec14idIssuer struct {
	url string
	key *rsa.PrivateKey
	kid string
}

func newSec14idIssuer(t *testing.T, url string) *sec14idIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &sec14idIssuer{url: url, key: key, kid: "k1"}
}

func (is *sec14idIssuer) pubPEM(t *testing.T) string {
	der, err := x509.MarshalPKIXPublicKey(&is.key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func (is *sec14idIssuer) jwks(t *testing.T) []byte {
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &is.key.PublicKey, KeyID: is.kid, Algorithm: string(jose.RS256), Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sign mints a token with the key (kid names it in the header).
func (is *sec14idIssuer) sign(t *testing.T, key *rsa.PrivateKey, kid string, extra map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(signer).Claims(jwt.Claims{Issuer: is.url, Audience: jwt.Audience{"toolgen"},
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now)}).Claims(extra).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestAttack14_06_IssuerSpeaksOnlyForItsTenant: tenant beta's identity provider mints
// a token for tenant acme's approver id (sub a-op, tenant claim acme, the approving
// scope) and tries to approve acme's held call, over toolrun approve and over the
// event stream. The token proves beta-login/a-op of tenant beta: acme's call is not
// visible to it. A shared provider bound to [acme, beta] cannot claim a third tenant.
// A static token principal of acme that holds the approving scope cannot be named
// without its token. acme's own approver, with its own provider's token, approves.
func TestAttack14_06_IssuerSpeaksOnlyForItsTenant(t *testing.T) {
	acme := newSec14idIssuer(t, "https://login.acme.example")
	beta := newSec14idIssuer(t, "https://login.beta.example")
	shared := newSec14idIssuer(t, "https://sso.example")
	dir := sec14idRoot(t, []string{"workspace.write_text"}, map[string]string{
		"principals.yaml": `tokens:
  - {id: a-bot, tenant: acme, scopes: [workspace.write, approvals.decide], token_sha256: ` + sec14idDigest("a-bot-token") + `}
local:
  - {id: a-agent, tenant: acme, scopes: [workspace.write]}
  - {id: op, tenant: acme, scopes: []}
issuers:
  - {name: acme-login, issuer: "https://login.acme.example", audience: toolgen, key_file: keys/acme.pem, tenant: acme}
  - {name: beta-login, issuer: "https://login.beta.example", audience: toolgen, key_file: keys/beta.pem, tenant: beta}
  - {name: sso, issuer: "https://sso.example", audience: toolgen, key_file: keys/sso.pem, tenants: [acme, beta]}
`,
		"keys/acme.pem": acme.pubPEM(t), "keys/beta.pem": beta.pubPEM(t), "keys/sso.pem": shared.pubPEM(t),
	})
	db := filepath.Join(dir, "store.db")
	write := func(name, token string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	approver := map[string]any{"sub": "a-op", "tenant": "acme", "scope": "approvals.decide workspace.write"}
	forged := write("forged.jwt", beta.sign(t, beta.key, "k1", approver))
	ssoOther := write("sso-globex.jwt", shared.sign(t, shared.key, "k1", map[string]any{"sub": "a-op", "tenant": "globex", "scope": "approvals.decide"}))
	real := write("real.jwt", acme.sign(t, acme.key, "k1", approver))

	// acme's held call (a write under .git/ needs an approval).
	out, errs, code := sec14idToolrun(t, "call", "--dir", dir, "--db", db, "--principal", "a-agent", "--hold", "50ms",
		"workspace.write_text", `{"path":".git/NOTE","text":"x","mode":"overwrite"}`)
	if code != 1 || !strings.Contains(out, "approval_pending") {
		t.Fatalf("the held call (precondition): exit %d\n%s%s", code, out, errs)
	}
	base := []string{"--dir", dir, "--db", db}
	// beta's provider speaks for acme's approver: refused, the call is not in its tenant.
	out, errs, code = sec14idToolrun(t, append([]string{"approve", "1", "--token-file", forged}, base...)...)
	if code != 1 || !strings.Contains(errs, "no invocation 1 waits for a decision in tenant beta") {
		t.Fatalf("beta's token for a-op approving acme's call: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = sec14idToolrun(t, append([]string{"approvals", "--token-file", forged}, base...)...)
	if code != 0 || strings.Contains(out, "workspace.write_text") {
		t.Fatalf("beta's token lists acme's held call: exit %d\n%s%s", code, out, errs)
	}
	// The shared provider may speak for acme and beta, not for a tenant it is not bound to.
	out, errs, code = sec14idToolrun(t, append([]string{"approvals", "--token-file", ssoOther}, base...)...)
	if code != 2 || !strings.Contains(errs, "invalid token") || !strings.Contains(errs, "a tenant issuer sso does not speak for") {
		t.Fatalf("the shared provider claiming globex: exit %d\n%s%s", code, out, errs)
	}
	// A token principal is never borrowed by naming it.
	out, errs, code = sec14idToolrun(t, append([]string{"approve", "1", "--principal", "a-bot"}, base...)...)
	if code != 2 || !strings.Contains(errs, "a-bot is a token principal") {
		t.Fatalf("--principal a-bot (a token principal) approving: exit %d\n%s%s", code, out, errs)
	}

	// Over HTTP the forged token is beta's: it cannot follow acme's events.
	p := sec14idServe(t, append(base, "--principal", "op")...)
	if _, errs, code := sec14idToolrun(t, "events", "--url", p, "--token-file", forged, "--tenant", "acme", "--once"); code == 0 || !strings.Contains(errs, "403") {
		t.Fatalf("beta's token following acme's events: exit %d\n%s", code, errs)
	}
	evOut, _, _ := sec14idToolrun(t, "events", "--url", p, "--token-file", forged, "--once")
	if strings.Contains(evOut, "workspace.write_text") {
		t.Fatalf("beta's token sees acme's events:\n%s", evOut)
	}

	// Still held; acme's own approver, proven by acme's provider, decides.
	out, errs, code = sec14idToolrun(t, append([]string{"approvals", "--principal", "a-agent"}, base...)...)
	if code != 0 || !strings.Contains(out, "PENDING") {
		t.Fatalf("the held call after the attack: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = sec14idToolrun(t, append([]string{"approve", "1", "--token-file", real}, base...)...)
	if code != 0 || !strings.Contains(out, "approved by acme-login/a-op") {
		t.Fatalf("acme's approver: exit %d\n%s%s", code, out, errs)
	}
	out, _, _ = sec14idToolrun(t, append([]string{"audit", "--principal", "a-agent"}, base...)...)
	if !strings.Contains(out, "acme-login/a-op") || strings.Contains(out, "beta-login") {
		t.Fatalf("the audit names the approver by its namespaced id, and nothing of beta:\n%s", out)
	}
}

// sec14idHostile is text that would forge and erase lines on a terminal.
const sec14idHostile = "x\n2026-01-01T00:00:00Z  approval  -  root  FORGED\r\x1b[2K\x1b[1A\x1b[2K\u202egnp.exe\x07"

// sec14idClean reports the first byte of out a terminal would act on: every control
// character but the newline that ends a line, and the bidirectional override.
func sec14idClean(out string) error {
	for i, r := range out {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u202e' {
			return fmt.Errorf("byte %d is %U: %q", i, r, out)
		}
	}
	return nil
}

// TestAttack14_09_ControlCharactersNeverReachTheTerminal: newlines, carriage returns,
// ANSI escapes and a bidirectional override in _meta ids and in a JWT subject are
// refused at the edge (JSON-RPC invalid params, HTTP 401); and rows, audit entries,
// catalog changes and file contents that already hold them (recorded before the edge
// checked, or written by tools and remote systems) are shown escaped by toolrun
// audit, approvals, uncertain, events, catalog and call — one line per row, nothing a
// terminal would obey.
func TestAttack14_09_ControlCharactersNeverReachTheTerminal(t *testing.T) {
	is := newSec14idIssuer(t, "https://login.example.com")
	dir := sec14idRoot(t, []string{"workspace.read_text", "workspace.write_text"}, map[string]string{
		"principals.yaml": `tokens:
  - {id: a-bot, tenant: acme, scopes: [workspace.read, workspace.write], token_sha256: ` + sec14idDigest("a-bot-token") + `}
  - {id: b-bot, tenant: beta, scopes: [workspace.read], token_sha256: ` + sec14idDigest("b-bot-token") + `}
local:
  - {id: op, tenant: acme, scopes: [approvals.decide, workspace.read]}
issuers:
  - {name: login, issuer: "https://login.example.com", audience: toolgen, key_file: keys/login.pem, tenants: [acme, beta]}
`,
		"keys/login.pem": is.pubPEM(t),
	})
	// acme's workspace, outside the spec root (SEC-1). JSON escapes C0 controls in a
	// structured result; DEL, C1 controls and the bidirectional override it leaves as
	// they are.
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "acme"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "acme", "evil.txt"), []byte("report\r\x1b[2K\x1b[1AOK: all checks passed\x7f\u009b2J\u202egnp.exe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "store.db")
	base := []string{"--dir", dir, "--db", db, "--workspace", filepath.Join(ws, "{tenant}")}
	p := sec14idServe(t, append(base, "--principal", "op")...)

	// The edge: hostile _meta ids are invalid params; nothing is recorded.
	cs := sec14idConnect(t, p, "a-bot-token")
	for _, key := range []string{"io.toolgen/session_id", "io.toolgen/run_id", "io.toolgen/call_id"} {
		for _, bad := range []string{"c1\nFORGED", "c1\r\x1b[2K", "\x1b[31mred", "rtl\u202etxt", "two words"} {
			_, err := sec14idCall(t, cs, "workspace__read_text", map[string]any{"path": "evil.txt"}, mcp.Meta{key: bad})
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams || strings.ContainsAny(je.Message, "\n\r\x1b") {
				t.Fatalf("_meta %s = %q: %v, want invalid params that do not repeat it", key, bad, err)
			}
		}
	}
	// A JWT whose subject carries the same is a 401.
	for _, sub := range []string{"ana\nFORGED", "ana\x1b[2K", "ana\u202e"} {
		tok := is.sign(t, is.key, "k1", map[string]any{"sub": sub, "tenant": "acme", "scope": "workspace.read"})
		req, _ := http.NewRequest(http.MethodGet, p+"/events?once=1", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || bytes.ContainsAny(body, "\x1b\u202e") {
			t.Fatalf("a JWT with subject %q: %s %q, want 401", sub, resp.Status, body)
		}
	}

	// What is already stored: rows and entries written before the edge checked.
	st, err := sqlite.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, status := range []store.Status{store.StatusPending, store.StatusUncertain} {
		call := store.Call{Key: fmt.Sprintf("hostile-%d", i), Tenant: "acme", Principal: "mallory" + sec14idHostile,
			SessionID: "s" + sec14idHostile, RunID: "r" + sec14idHostile, CallID: "c" + sec14idHostile, Tool: "workspace.write_text",
			ToolVersion: 1, Idempotency: "non_idempotent", Args: json.RawMessage(`{}`), Decision: store.DecisionNeedsApproval,
			Mode: "m" + sec14idHostile, OriginTrust: "external_untrusted", ArgumentTrust: "external_untrusted"}
		params := store.InsertHeld(call)
		if status == store.StatusUncertain {
			call.Decision = store.DecisionAllow
			params = store.InsertSettled(call, store.SettleUncertain(store.ReasonEffectMayHaveHappened, json.RawMessage(`{"status":"uncertain"}`)))
		}
		if _, _, err := st.InvocationInsert(ctx, params); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.AuditAppend(ctx, store.AuditEntry{Tenant: "acme", Kind: "approval" + sec14idHostile, Principal: "p" + sec14idHostile,
		SessionID: "s" + sec14idHostile, Tool: "t" + sec14idHostile, Detail: json.RawMessage(`{"reason":"ok"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CatalogHistoryAppend(ctx, store.CatalogChange{ServerID: "srv" + sec14idHostile, Change: "added", Tool: "mcp.srv.x" + sec14idHostile}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	for _, c := range []struct {
		args  []string
		lines int // rows the command prints for the hostile data: the header plus one each
	}{
		{[]string{"approvals", "--principal", "op"}, 2},
		{[]string{"uncertain", "--principal", "op"}, 2},
		{[]string{"audit", "--principal", "op"}, 0},
		{[]string{"catalog", "--principal", "op"}, 0},
		{[]string{"events", "--url", p, "--token-file", filepath.Join(dir, "a.token"), "--once"}, 0},
		{[]string{"call", "--principal", "op", "--scopes", "workspace.read", "workspace.read_text", `{"path":"evil.txt"}`}, 0},
	} {
		if c.args[0] == "events" {
			os.WriteFile(filepath.Join(dir, "a.token"), []byte("a-bot-token"), 0o600)
		}
		args := c.args
		if args[0] != "events" {
			args = append(append([]string{}, args...), base...)
		}
		out, errs, code := sec14idToolrun(t, args...)
		if code != 0 {
			t.Fatalf("toolrun %s: exit %d\n%s%s", c.args[0], code, out, errs)
		}
		if err := sec14idClean(out + errs); err != nil {
			t.Fatalf("toolrun %s prints a control character: %v", c.args[0], err)
		}
		if strings.Contains(out, "\nFORGED") || strings.Contains(out, "\n2026-01-01T00:00:00Z  approval") {
			t.Fatalf("toolrun %s: a forged line starts a line:\n%s", c.args[0], out)
		}
		if c.lines > 0 {
			if n := strings.Count(strings.TrimRight(out, "\n"), "\n") + 1; n != c.lines {
				t.Fatalf("toolrun %s: %d lines, want %d (one per row):\n%s", c.args[0], n, c.lines, out)
			}
		}
		if c.args[0] == "call" && (!strings.Contains(out, `\u202e`) || !strings.Contains(out, "all checks passed")) {
			t.Fatalf("toolrun call: the file's text is not shown, escaped:\n%s", out)
		}
	}
	// The events stream of the other tenant holds none of it either way.
	os.WriteFile(filepath.Join(dir, "b.token"), []byte("b-bot-token"), 0o600)
	out, _, _ := sec14idToolrun(t, "events", "--url", p, "--token-file", filepath.Join(dir, "b.token"), "--once")
	if strings.Contains(out, "mallory") {
		t.Fatalf("tenant beta's stream shows acme's rows:\n%s", out)
	}
}

// TestAttack14_15_JWKSRefetchRateLimited: a `toolrun serve --http` whose issuer is
// configured by jwks_url, behind which an httptest server counts the fetches. One
// real token fetches the keys once; 100 unauthenticated requests, each with a token
// signed by an attacker's key under a fresh random key id, are all 401 and fetch
// nothing more inside the refetch window: at most one fetch per issuer per
// identity.JWKSRefetchInterval, however many requests come.
func TestAttack14_15_JWKSRefetchRateLimited(t *testing.T) {
	is := newSec14idIssuer(t, "https://login.example.com")
	var fetches atomic.Int64
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write(is.jwks(t))
	}))
	defer jwks.Close()
	other := newSec14idIssuer(t, "https://login.beta.example")
	jwksBeta := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(other.jwks(t))
	}))
	defer jwksBeta.Close()
	dir := sec14idRoot(t, []string{"workspace.read_text"}, map[string]string{
		"principals.yaml": `local:
  - {id: op, tenant: acme, scopes: []}
issuers:
  - {name: login, issuer: "https://login.example.com", audience: toolgen, jwks_url: "` + jwks.URL + `/jwks", tenant: acme}
  - {name: beta, issuer: "https://login.beta.example", audience: toolgen, jwks_url: "` + jwksBeta.URL + `/jwks", tenant: beta}
`,
	})
	p := sec14idServe(t, "--dir", dir, "--db", filepath.Join(dir, "store.db"), "--principal", "op")
	get := func(token string) int {
		req, _ := http.NewRequest(http.MethodGet, p+"/events?once=1", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	start := time.Now()
	if code := get(is.sign(t, is.key, is.kid, map[string]any{"sub": "ana"})); code != http.StatusOK {
		t.Fatalf("a real token: %d", code)
	}
	attacker, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	forged := make([]string, 100)
	for i := range forged {
		forged[i] = is.sign(t, attacker, "kid-"+rand.Text(), map[string]any{"sub": "mallory"})
	}
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for _, tok := range forged {
		wg.Go(func() {
			if get(tok) != http.StatusUnauthorized {
				accepted.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if n := accepted.Load(); n > 0 {
		t.Fatalf("%d tokens of an unknown key were accepted", n)
	}
	// One fetch per window: with the 100 requests inside one window (the usual case)
	// that is exactly the first one.
	allowed := 1 + int64(elapsed/identity.JWKSRefetchInterval)
	if n := fetches.Load(); n < 1 || n > allowed {
		t.Fatalf("%d JWKS fetches for 1 real and 100 forged tokens in %s, want at most %d", n, elapsed, allowed)
	}
	// The other issuer's keys are fetched on their own: its tokens still verify.
	if code := get(other.sign(t, other.key, other.kid, map[string]any{"sub": "bob"})); code != http.StatusOK {
		t.Fatalf("the other issuer's real token after the flood: %d", code)
	}
}
