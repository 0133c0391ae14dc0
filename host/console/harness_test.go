package console_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/host"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/spec"
)

// The principals of the test deployment: acme's agent (the caller), acme's reviewer
// rita and ana (who both calls and reviews), globex's gus; olga signs in with the
// issuer.
const (
	agentToken = "agent-token-5d1c2f"
	ritaToken  = "rita-token-81aa0e"
	anaToken   = "ana-token-3c9e77"
	gusToken   = "gus-token-f00b4d"
	// clientSecretEnv holds the console's client secret at the test issuer.
	clientSecretEnv = "TOOLGEN_TEST_CONSOLE_SECRET"
	clientSecret    = "console-client-secret-9d8e"
	hookSecretEnv   = "TOOLGEN_TEST_WEBHOOK_KEY"
	hookSecret      = "webhook-signing-key-0123456789"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

const deployYAML = `name: demo.deploy
version: 1
description: Deploy a service.
side_effect: write
idempotency: non_idempotent
risk: medium
required_scopes: [demo.deploy]
args:
  service: {type: string, max_length: 100000}
  note: {type: string, max_length: 100000, default: ""}
  url: {type: string, max_length: 1000, default: ""}
result:
  ok: {type: boolean}
`

const failYAML = `name: demo.fail
version: 1
description: Call a remote system that fails.
side_effect: write
idempotency: non_idempotent
risk: low
required_scopes: [demo.deploy]
args:
  service: {type: string, max_length: 1000}
result:
  ok: {type: boolean}
`

const chargeYAML = `name: demo.charge
version: 1
description: Charge a card.
side_effect: write
idempotency: non_idempotent
risk: low
required_scopes: [demo.charge]
args:
  amount: {type: integer}
result:
  ok: {type: boolean}
`

// releaseYAML is the deployment's protocol: calls are made in mode build, and in mode
// ship after a dispatch, so the audit timeline attributes them to both (ADR 017).
const releaseYAML = `name: release
description: Build, then ship.
initial_mode: build
modes:
  build:
    description: Build and try.
    tools: [demo.deploy, demo.fail, demo.charge, protocol.dispatch]
  ship:
    description: Ship what was built.
    tools: [demo.deploy, protocol.dispatch]
`

const policyYAML = `rules:
  - name: deploys-need-review
    tools: [demo.deploy]
    approve_when: "true"
`

// remoteError is what demo.fail's remote system answers: HTML a page must show as text.
const remoteError = `<img src=x onerror="document.body.dataset.pwned=1"><a href="javascript:alert(1)">retry</a><script>document.body.dataset.pwned=2</script>`

// tool is a hand-made implementation of a spec (what a generated wrapper is, minus
// the generation). demo.fail fails with remoteError; the others succeed.
type tool struct {
	spec runtime.ToolSpec
	runs atomic.Int64
}

func (x *tool) Spec() *runtime.ToolSpec { return &x.spec }
func (x *tool) Execute(ctx context.Context, tc *runtime.ExecContext, args json.RawMessage) (runtime.ToolResult, error) {
	if err := tc.MarkEffectSent(ctx); err != nil {
		return runtime.ToolResult{}, err
	}
	x.runs.Add(1)
	if x.spec.Name == "demo.fail" {
		return runtime.ToolResult{OK: false, Failure: &runtime.ToolFailure{Code: "remote_error", Message: remoteError}}, nil
	}
	return runtime.StructuredResult(&x.spec, map[string]any{"ok": true})
}

func implOf(t *testing.T, tree *spec.Tree, name string) *tool {
	t.Helper()
	st := tree.Tool(name)
	in, out, sha := st.Schemas()
	var scopes []string
	for _, s := range st.RequiredScopes {
		scopes = append(scopes, s.Name)
	}
	return &tool{spec: runtime.ToolSpec{Name: name, Version: st.Version, Kind: runtime.KindAction,
		SideEffect: runtime.SideEffect(st.SideEffect), Idempotency: runtime.Idempotency(st.Idempotency),
		Risk: runtime.Risk(st.Risk), OutputTrust: runtime.TrustTool, InputSchema: in, OutputSchema: out,
		SchemaSHA256: sha, Source: st.File, RequiredScopes: scopes, OutputMaxBytes: 65536}}
}

// deployment is a spec root: the tools above, the policy, principals.yaml (unless
// local), and notifications.yaml when hookURL is set.
type deployment struct {
	dir   string
	tools map[string]*tool
}

func principalsYAML(issuerURL string) string {
	s := fmt.Sprintf(`tokens:
  - {id: agent, tenant: acme, scopes: [demo.deploy, demo.charge], token_sha256: %s}
  - {id: rita, tenant: acme, scopes: [approvals.decide], token_sha256: %s}
  - {id: ana, tenant: acme, scopes: [approvals.decide, demo.deploy], token_sha256: %s}
  - {id: gus, tenant: globex, scopes: [approvals.decide, demo.deploy], token_sha256: %s}
local:
  - {id: operator, tenant: acme, scopes: [approvals.decide]}
`, sha(agentToken), sha(ritaToken), sha(anaToken), sha(gusToken))
	if issuerURL != "" {
		s += `issuers:
  - name: login
    issuer: ` + issuerURL + `
    audience: toolgen
    jwks_url: ` + issuerURL + `/jwks
    tenant: acme
    console:
      client_id: toolgen-console
      client_secret_env: ` + clientSecretEnv + `
`
	}
	return s
}

func newDeployment(t *testing.T, principals, notifications string) *deployment {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"tools/demo.deploy.yaml": deployYAML, "tools/demo.fail.yaml": failYAML,
		"tools/demo.charge.yaml": chargeYAML, "policy.yaml": policyYAML, "protocols/release.yaml": releaseYAML}
	if principals != "" {
		files["principals.yaml"] = principals
	}
	if notifications != "" {
		files["notifications.yaml"] = notifications
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree, diags, err := spec.LoadDir(dir)
	if err != nil || len(diags) > 0 {
		t.Fatalf("spec root: %v %v", err, diags)
	}
	d := &deployment{dir: dir, tools: map[string]*tool{}}
	for _, name := range []string{"demo.deploy", "demo.fail", "demo.charge"} {
		d.tools[name] = implOf(t, tree, name)
	}
	return d
}

// server is a host serving the deployment over HTTP on a loopback port.
type server struct {
	t    *testing.T
	d    *deployment
	h    *host.Host
	base string // http://127.0.0.1:PORT
	addr string
	done chan error
}

// serve starts a host on d with store db ("" for its own) and returns when it serves.
func serve(t *testing.T, d *deployment, db string) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var tools []runtime.Tool
	for _, x := range d.tools {
		tools = append(tools, x)
	}
	cfg := host.Config{Dir: d.dir, Tools: tools, Store: db, StateDir: filepath.Join(t.TempDir(), "state"),
		ApprovalHold: 300 * time.Millisecond, Principal: "agent", Servers: []string{},
		Protocol: "release", Builtins: []string{"protocol.dispatch"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	// One recovery pass at the start, then only the tests' own (s.h.Recover): a pass of the
	// host's maintenance between a review and the test's look at the row would run a call
	// the test expects still to wait (TestBrowser, "did not happen": want PENDING).
	cfg.SweepInterval = time.Hour
	if os.Getenv("CONSOLE_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if _, err := os.Stat(filepath.Join(d.dir, "principals.yaml")); err == nil {
		cfg.Principal = "operator" // the local principal of principals.yaml
	}
	h, err := host.New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, d: d, h: h, addr: ln.Addr().String(), base: "http://" + ln.Addr().String(), done: make(chan error, 1)}
	go func() { s.done <- h.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-s.done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("the host did not stop within 30s")
		}
		h.Close()
	})
	return s
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// agent is an MCP client of the server as token's principal.
func (s *server) agent(token string) *mcp.ClientSession {
	s.t.Helper()
	var rt http.RoundTripper = http.DefaultTransport
	if token != "" {
		rt = bearer{token: token, next: rt}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: s.base + host.MCPPath,
		HTTPClient: &http.Client{Transport: rt}}, nil)
	if err != nil {
		s.t.Fatalf("MCP connect: %v", err)
	}
	s.t.Cleanup(func() { cs.Close() })
	return cs
}

// call makes one tools/call with explicit session, run and call ids; it returns the
// result's status meta ("ok" when it succeeded) and reason.
func call(t *testing.T, cs *mcp.ClientSession, tool, callID string, args map[string]any) (string, string) {
	t.Helper()
	return callIn(t, cs, "s-review", tool, callID, args)
}

// callIn is call in another session.
func callIn(t *testing.T, cs *mcp.ClientSession, session, tool, callID string, args map[string]any) (string, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: strings.ReplaceAll(tool, ".", "__"), Arguments: args,
		Meta: mcp.Meta{"io.toolgen/session_id": session, "io.toolgen/run_id": "r-1", "io.toolgen/call_id": callID}})
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	if !res.IsError {
		return "ok", ""
	}
	var o struct {
		Status     string `json:"status"`
		ReasonCode string `json:"reason_code"`
	}
	if b, err := json.Marshal(res.StructuredContent); err == nil {
		json.Unmarshal(b, &o)
	}
	return o.Status, o.ReasonCode
}

// waitFor polls cond until it holds, or fails the test shortly before the test's own
// deadline (-timeout; 5 minutes without one).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline, ok := t.Deadline()
	if !ok {
		deadline = time.Now().Add(5 * time.Minute)
	}
	deadline = deadline.Add(-15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen before the test's deadline", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// heldID waits until a call of tool is held in tenant and returns its invocation id.
func (s *server) heldID(tenant, tool string) int64 {
	s.t.Helper()
	var id int64
	waitFor(s.t, "a held "+tool, func() bool {
		rows, err := s.h.Store().InvocationList(context.Background(), store.InvocationFilter{Tenant: tenant, AwaitingApproval: true})
		if err != nil {
			s.t.Fatal(err)
		}
		for _, r := range rows {
			if r.Tool == tool {
				id = r.ID
				return true
			}
		}
		return false
	})
	return id
}

func (s *server) tools() map[string]*tool { return s.d.tools }

// lastOf is the id of the latest call of tool in tenant.
func (s *server) lastOf(tenant, tool string) int64 {
	s.t.Helper()
	rows, err := s.h.Store().InvocationList(context.Background(), store.InvocationFilter{Tenant: tenant})
	if err != nil {
		s.t.Fatal(err)
	}
	var id int64
	for _, r := range rows {
		if r.Tool == tool {
			id = r.ID
		}
	}
	if id == 0 {
		s.t.Fatalf("no call of %s", tool)
	}
	return id
}

func (s *server) row(id int64) *store.Invocation {
	s.t.Helper()
	inv, err := s.h.Store().InvocationGet(context.Background(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return inv
}

// uncertainCall leaves a demo.charge call as a crashed worker leaves it — recorded
// RUNNING under a lease that is not renewed, its watermark set — and has the host's
// recovery find it: UNCERTAIN, for a person. It returns the row's id.
func (s *server) uncertainCall(tenant, callID string) int64 {
	s.t.Helper()
	ctx := context.Background()
	var sp *runtime.ToolSpec
	for _, x := range s.h.Registry().Current() {
		if x.Name == "demo.charge" {
			sp = x
		}
	}
	args := json.RawMessage(`{"amount":4200}`)
	key := runtime.IdempotencyKey(runtime.KeyInput{Tenant: tenant, RunID: "r-1", Step: 0, CallID: callID, Tool: "demo.charge",
		ToolVersion: 1, CanonicalArgs: args})
	inv, _, err := s.h.Store().InvocationInsert(ctx, store.InsertRunning(store.Call{Key: key, Tenant: tenant, Principal: "agent",
		SessionID: "s-review", RunID: "r-1", CallID: callID, Tool: "demo.charge", ToolVersion: 1, ToolSHA256: sp.SchemaSHA256,
		Idempotency: store.IdempotencyNonIdempotent, Args: args, OriginTrust: "user", ArgumentTrust: "external_untrusted",
		Mode: "build", Decision: store.DecisionAllow}, "crashed-worker", 300*time.Millisecond))
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.h.Store().InvocationMarkEffectSentIfLeased(ctx, inv.Fence(), "tok-"+callID); err != nil {
		s.t.Fatal(err)
	}
	waitFor(s.t, "the crashed call to be found UNCERTAIN", func() bool {
		if _, err := s.h.Recover(ctx); err != nil {
			s.t.Fatal(err)
		}
		return s.row(inv.ID).Status == store.StatusUncertain
	})
	return inv.ID
}

// browser is an HTTP client with a cookie jar: a person's browser, minus the page.
type browser struct {
	t      *testing.T
	c      *http.Client
	origin string // the Origin header of posts ("" for none)
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, c: &http.Client{Jar: jar, Timeout: 60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, u string, form url.Values, hdr map[string]string) (int, string, http.Header) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if b.origin != "" {
			req.Header.Set("Origin", b.origin)
		}
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, string(data), resp.Header
}

func (b *browser) get(u string) (int, string) {
	b.t.Helper()
	code, body, _ := b.do(http.MethodGet, u, nil, nil)
	return code, body
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token of the page at u.
func (b *browser) csrf(u string) string {
	b.t.Helper()
	code, body := b.get(u)
	m := csrfField.FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		b.t.Fatalf("GET %s: %d, no CSRF token:\n%.2000s", u, code, body)
	}
	return m[1]
}

// signIn signs the browser in to s's console with a token.
func (b *browser) signIn(s *server, token string) {
	b.t.Helper()
	b.origin = s.base
	tok := b.csrf(s.base + "/console/signin")
	code, body, hdr := b.do(http.MethodPost, s.base+"/console/signin", url.Values{"csrf": {tok}, "token": {token}}, nil)
	if code != http.StatusSeeOther || hdr.Get("Location") != "/console/held" {
		b.t.Fatalf("token sign-in: %d %s\n%.2000s", code, hdr.Get("Location"), body)
	}
}
