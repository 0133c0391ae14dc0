package hostcli_test

// Issue 14, the HTTP findings (3, 8, 11, 17): each test performs the attack against a
// real toolrun — hostcli.Run with every builtin, exactly what cmd/toolrun runs — serving
// --http on a real TCP port, with two tenants in principals.yaml where the finding
// involves principals, and asserts that the attack fails.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/host"
	"github.com/toolgen/toolgen/host/hostcli"
	"github.com/toolgen/toolgen/runtime/store/postgres/pgtest"
)

// Tokens of the two tenants' principals: acme has the operator's monitoring (ops, with
// metrics.read) and an agent (ana); globex has an agent (bob) holding no scope at all.
const (
	opsToken = "ops-token-6b1f"
	anaToken = "ana-token-93ce"
	bobToken = "bob-token-2d7a"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

var twoTenants = fmt.Sprintf(`tokens:
  - {id: ops, tenant: acme, scopes: [%s], token_sha256: %s}
  - {id: ana, tenant: acme, scopes: [workspace.read], token_sha256: %s}
  - {id: bob, tenant: globex, scopes: [], token_sha256: %s}
local:
  - {id: operator, tenant: acme, scopes: [approvals.decide]}
`, host.MetricsScope, sha(opsToken), sha(anaToken), sha(bobToken))

// specRoot writes a spec root of files (name -> content) and returns its directory.
func specRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// syncBuffer is an io.Writer several goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// server is one `toolrun serve --http` running in this process.
type server struct {
	t      *testing.T
	addr   string // 127.0.0.1:PORT
	cancel context.CancelFunc
	done   chan int
	stderr *syncBuffer
}

// serve starts `toolrun serve --http 127.0.0.1:0 --no-servers --dir DIR [--db DB]
// ARGS...` and returns once it listens, at the address its serving line names (a port
// picked before it started could be taken by then).
func serve(t *testing.T, dir, db string, args ...string) *server {
	t.Helper()
	argv := append([]string{"serve", "--http", "127.0.0.1:0", "--no-servers", "--dir", dir, "--log", "error"}, args...)
	if db != "" {
		argv = append(argv, "--db", db)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{t: t, cancel: cancel, done: make(chan int, 1), stderr: &syncBuffer{}}
	go func() {
		s.done <- hostcli.Run(ctx, hostcli.Config{Name: "toolrun", Builtins: host.AllBuiltins}, argv, strings.NewReader(""), io.Discard, s.stderr)
	}()
	t.Cleanup(func() { s.stop() })
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if addr, ok := hostcli.ServingAddr(s.stderr.String()); ok {
			s.addr = addr
			return s
		}
		select {
		case code := <-s.done:
			s.done <- code
			t.Fatalf("toolrun serve exited with %d:\n%s", code, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("toolrun serve is not serving after 60s:\n%s", s.stderr.String())
		}
	}
}

// stop ends the server as SIGINT would (graceful shutdown, then host.Close) and waits.
func (s *server) stop() {
	s.cancel()
	select {
	case code := <-s.done:
		s.done <- code
		if code != hostcli.ExitOK {
			s.t.Errorf("toolrun serve exited with %d:\n%s", code, s.stderr.String())
		}
	case <-time.After(60 * time.Second):
		s.t.Errorf("toolrun serve did not stop within 60s")
	}
}

func (s *server) url(path string) string { return "http://" + s.addr + path }

// toolrun runs one other toolrun command on the spec root and store.
func toolrun(t *testing.T, dir, db string, args ...string) (int, string) {
	t.Helper()
	args = append(args, "--dir", dir)
	if db != "" {
		args = append(args, "--db", db)
	}
	var stdout, stderr bytes.Buffer
	code := hostcli.Run(context.Background(), hostcli.Config{Name: "toolrun", Builtins: host.AllBuiltins}, args, strings.NewReader(""), &stdout, &stderr)
	if code != hostcli.ExitOK {
		t.Fatalf("toolrun %v exited with %d:\n%s", args, code, stderr.String())
	}
	return code, stdout.String()
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

// noKeepAlive is a transport whose connections end with their request, so the server's
// connection count sees only the connections a test holds.
func noKeepAlive() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	return tr
}

// mcpSession connects the go-sdk's MCP client to the server as token's principal
// ("": none).
func mcpSession(t *testing.T, s *server, token string) *mcp.ClientSession {
	t.Helper()
	var rt http.RoundTripper = noKeepAlive()
	if token != "" {
		rt = bearer{token: token, next: rt}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "attacker", Version: "v1"}, nil)
	// At 2025-11-25, where a tool's name travels in the body only: at 2026-07-28 the
	// go-sdk client copies it into the Mcp-Name header too, and a 4 MiB name never
	// leaves the client (431 from any HTTP server).
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.url(host.MCPPath), HTTPClient: &http.Client{Transport: rt}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("MCP connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// get makes one request, the Host header set to hostHeader unless it is "", and returns
// the status and at most 1 MiB of the body.
func get(t *testing.T, method, u, token, hostHeader string, header http.Header, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if hostHeader != "" {
		req.Host = hostHeader
	}
	resp, err := (&http.Client{Transport: noKeepAlive(), Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// TestAttack14_03_MetricLabelsAreBounded (finding 3): twenty calls with 4 MiB tool
// names no registry knows, by globex's bob (no scope), then a scrape. The names never
// become label values: the exposition stays small and counts the calls under
// gen_ai_tool_name="unknown". /metrics is not open: without a token it is a 401, with a
// token lacking metrics.read a 403; acme's ops (metrics.read) reads it.
func TestAttack14_03_MetricLabelsAreBounded(t *testing.T) {
	dir := specRoot(t, map[string]string{"principals.yaml": twoTenants})
	s := serve(t, dir, "", "--principal", "operator")

	bob := mcpSession(t, s, bobToken)
	const calls = 20
	for i := range calls {
		name := fmt.Sprintf("x%d", i) + strings.Repeat("a", 4<<20)
		res, err := bob.CallTool(t.Context(), &mcp.CallToolParams{Name: name})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if !res.IsError {
			t.Fatalf("call %d of an unknown tool succeeded", i)
		}
	}

	if code, body := get(t, "GET", s.url(host.MetricsPath), "", "", nil, ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /metrics without a token: %d %.200s, want 401", code, body)
	}
	if code, body := get(t, "GET", s.url(host.MetricsPath), bobToken, "", nil, ""); code != http.StatusForbidden {
		t.Fatalf("GET /metrics as bob (no %s): %d %.200s, want 403", host.MetricsScope, code, body)
	}
	if code, body := get(t, "GET", s.url(host.MetricsPath), anaToken, "", nil, ""); code != http.StatusForbidden {
		t.Fatalf("GET /metrics as ana (no %s): %d %.200s, want 403", host.MetricsScope, code, body)
	}
	code, body := get(t, "GET", s.url(host.MetricsPath), opsToken, "", nil, "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics as ops: %d %.200s", code, body)
	}
	if len(body) > 64<<10 {
		t.Fatalf("the exposition after %d calls with 4 MiB names is %d bytes", calls, len(body))
	}
	if strings.Contains(body, strings.Repeat("a", 64)) {
		t.Fatal("a caller's tool name is in the exposition")
	}
	want := regexp.MustCompile(`(?m)^toolgen_tool_calls_total\{[^}]*gen_ai_tool_name="unknown"[^}]*\} ` + strconv.Itoa(calls) + `$`)
	if !want.MatchString(body) {
		t.Fatalf("no toolgen_tool_calls_total of %d for gen_ai_tool_name=\"unknown\" in:\n%s", calls, body)
	}
	t.Logf("exposition after the attack: %d bytes", len(body))
}

// slowRequest sends a request's header and the first byte of a body it announces as
// 100 kB, then nothing: a slow-body (slowloris) request of token's principal.
func slowRequest(t *testing.T, s *server, token string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n{", s.addr, token)
	return c
}

// outcome is how a held connection ended: the response status (0: none, the server
// closed it) or the client's own error.
type outcome struct {
	status int
	err    error
}

// await reads c's response (or its end), with a failure guard far beyond every server
// deadline of the test.
func await(c net.Conn) outcome {
	_ = c.SetReadDeadline(time.Now().Add(90 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return outcome{err: err} // the server never cut it
		}
		return outcome{} // closed without a response
	}
	resp.Body.Close()
	return outcome{status: resp.StatusCode}
}

// TestAttack14_08_SlowlorisIsCut (finding 8): globex's bob, with a valid token and no
// scope, opens slow-body connections. Only as many as the per-principal cap are held;
// the others are answered 429 at once. Meanwhile acme's ana is answered; the held ones
// are cut by the body deadline, after which bob is answered again. Then raw connections
// that never finish their header fill the total cap: the ones over it are answered 503
// and closed (no file descriptor is spent on them), the held ones are cut by the header
// deadline, and new clients are answered again.
func TestAttack14_08_SlowlorisIsCut(t *testing.T) {
	const perPrincipal, total = 5, 24
	dir := specRoot(t, map[string]string{"principals.yaml": twoTenants})
	s := serve(t, dir, "", "--principal", "operator", "--max-conns-per-principal", strconv.Itoa(perPrincipal), "--max-conns", strconv.Itoa(total),
		"--body-timeout", "8s", "--read-header-timeout", "8s")
	events := s.url(host.EventsPath + "?once=1")

	// Per principal.
	const attempts = perPrincipal + 3
	results := make(chan outcome, attempts)
	for range attempts {
		c := slowRequest(t, s, bobToken)
		go func() { results <- await(c) }()
	}
	var got []outcome
	for len(got) < attempts-perPrincipal { // the refusals come first: the held ones wait for their deadline
		got = append(got, <-results)
	}
	for _, o := range got {
		if o.status != http.StatusTooManyRequests {
			t.Fatalf("bob's slow request beyond the cap of %d: %+v, want 429", perPrincipal, got)
		}
	}
	if code, body := get(t, "GET", events, anaToken, "", nil, ""); code != http.StatusOK {
		t.Fatalf("ana during bob's attack: %d %.200s", code, body)
	}
	for range perPrincipal {
		o := <-results
		if o.err != nil || o.status == http.StatusTooManyRequests {
			t.Fatalf("a held slow request was not cut by the body deadline: %+v", o)
		}
	}
	if code, body := get(t, "GET", events, bobToken, "", nil, ""); code != http.StatusOK {
		t.Fatalf("bob after his slow requests were cut: %d %.200s", code, body)
	}

	// In total: connections that never finish their header, unauthenticated.
	const raw = total + 6
	conns := make(chan outcome, raw)
	for range raw {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatalf("dial: %v (the server ran out of something)", err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "GET /events HTTP/1.1\r\nHost: %s\r\n", s.addr)
		go func() { conns <- await(c) }()
	}
	refused, cut := 0, 0
	for range raw {
		switch o := <-conns; {
		case o.status == http.StatusServiceUnavailable:
			refused++
		case o.err != nil:
			t.Fatalf("a connection was neither refused nor cut by the header deadline: %v", o.err)
		default:
			cut++
		}
	}
	if cut > total || refused < raw-total {
		t.Fatalf("%d connections held (cap %d), %d refused 503", cut, total, refused)
	}
	t.Logf("total cap: %d held and cut by the header deadline, %d refused 503", cut, refused)
	// Once they are gone new clients are answered (the server notices each close).
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", events, nil)
		req.Header.Set("Authorization", "Bearer "+anaToken)
		resp, err := (&http.Client{Transport: noKeepAlive(), Timeout: 30 * time.Second}).Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new client answered after the attack: %v", err)
		}
	}
}

// TestAttack14_11_HostAndOriginChecked (finding 11): a DNS-rebinding page reaches the
// server under the attacker's name. Every endpoint — MCP, the event stream, the
// metrics, the device channel and the OAuth metadata — answers a request with Host:
// attacker.example (or an Origin of it) 403, with none of the session, run and call ids
// the event stream holds; the names the server is reached by still work.
func TestAttack14_11_HostAndOriginChecked(t *testing.T) {
	endpoints := func(s *server) []struct {
		method, path, body string
		header             http.Header
	} {
		return []struct {
			method, path, body string
			header             http.Header
		}{
			{"POST", host.MCPPath, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
				http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}},
			{"GET", host.EventsPath + "?once=1", "", nil},
			{"GET", host.MetricsPath, "", nil},
			{"GET", host.DevicesPath, "", http.Header{"Connection": {"Upgrade"}, "Upgrade": {"toolgen-mcp/1"}, "Toolgen-Device-Id": {"ghost"}}},
			{"GET", host.MetadataPath, "", nil},
		}
	}
	leak := func(t *testing.T, s *server, token string) string {
		t.Helper()
		cs := mcpSession(t, s, token)
		if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "identity__whoami",
			Meta: mcp.Meta{"io.toolgen/session_id": "sess-rebind-7", "io.toolgen/run_id": "run-rebind-7", "io.toolgen/call_id": "call-rebind-7"}}); err != nil {
			t.Fatal(err)
		}
		code, body := get(t, "GET", s.url(host.EventsPath+"?once=1"), token, "", nil, "")
		if code != http.StatusOK || !strings.Contains(body, "sess-rebind-7") {
			t.Fatalf("the event stream, reached as it should be: %d %.300s", code, body)
		}
		return body
	}
	attack := func(t *testing.T, s *server, token string) {
		t.Helper()
		_, port, _ := net.SplitHostPort(s.addr)
		for _, e := range endpoints(s) {
			for _, forged := range []struct{ host, origin string }{
				{"attacker.example:" + port, ""},
				{"attacker.example", ""},
				{s.addr, "http://attacker.example:" + port},
				{s.addr, "null"},
			} {
				h := http.Header{}
				for k, v := range e.header {
					h[k] = v
				}
				if forged.origin != "" {
					h.Set("Origin", forged.origin)
				}
				code, body := get(t, e.method, s.url(e.path), token, forged.host, h, e.body)
				if code != http.StatusForbidden {
					t.Errorf("%s %s with Host %q Origin %q: %d %.200s, want 403", e.method, e.path, forged.host, forged.origin, code, body)
				}
				for _, id := range []string{"sess-rebind-7", "run-rebind-7", "call-rebind-7"} {
					if strings.Contains(body, id) {
						t.Errorf("%s %s with Host %q: the answer holds %s", e.method, e.path, forged.host, id)
					}
				}
			}
		}
	}

	t.Run("loopback without principals", func(t *testing.T) {
		dir := specRoot(t, map[string]string{})
		s := serve(t, dir, "")
		leak(t, s, "")
		attack(t, s, "")
		_, port, _ := net.SplitHostPort(s.addr)
		for _, ok := range []string{s.addr, "localhost:" + port, "LOCALHOST:" + port} {
			if code, body := get(t, "GET", s.url(host.MetricsPath), "", ok, nil, ""); code != http.StatusOK {
				t.Errorf("GET /metrics with Host %q: %d %.200s", ok, code, body)
			}
		}
		if code, _ := get(t, "GET", s.url(host.MetricsPath), "", "", http.Header{"Origin": {"http://localhost:6274"}}, ""); code != http.StatusOK {
			t.Errorf("GET /metrics with a loopback Origin: %d", code)
		}
		// On a loopback listener an IP literal that is not loopback is refused too (as
		// the go-sdk refuses it on /mcp).
		if code, _ := get(t, "GET", s.url(host.MetricsPath), "", "192.0.2.7:"+port, nil, ""); code != http.StatusForbidden {
			t.Errorf("GET /metrics with Host 192.0.2.7 on a loopback listener: %d, want 403", code)
		}
		s.stop()
		// The device channel refused them before anything was audited.
		if _, out := toolrun(t, dir, "", "audit"); strings.Contains(out, "device_refused") {
			t.Errorf("a forged-Host device request reached the gateway:\n%s", out)
		}
	})

	t.Run("principals with allowed hosts", func(t *testing.T) {
		dir := specRoot(t, map[string]string{"principals.yaml": twoTenants + "resource: https://tools.acme.example/mcp\n"})
		s := serve(t, dir, "", "--principal", "operator", "--allowed-host", "gw.acme.example,gw2.acme.example:8443")
		leak(t, s, opsToken)
		attack(t, s, opsToken)
		for _, ok := range []string{"gw.acme.example", "GW.acme.example:1234", "gw2.acme.example:8443", "tools.acme.example", s.addr} {
			if code, body := get(t, "GET", s.url(host.MetricsPath), opsToken, ok, nil, ""); code != http.StatusOK {
				t.Errorf("GET /metrics with Host %q: %d %.200s", ok, code, body)
			}
		}
		if code, _ := get(t, "GET", s.url(host.MetricsPath), opsToken, "gw2.acme.example:9999", nil, ""); code != http.StatusForbidden {
			t.Errorf("GET /metrics with Host gw2.acme.example on another port than allowed: %d, want 403", code)
		}
		if code, _ := get(t, "GET", s.url(host.MetricsPath), opsToken, "gw.acme.example", http.Header{"Origin": {"https://gw.acme.example"}}, ""); code != http.StatusOK {
			t.Errorf("GET /metrics with an allowed Origin: %d", code)
		}
	})
}

// refusedDevice makes one unauthenticated device connection attempt.
func refusedDevice(t *testing.T, s *server, id, token string) {
	t.Helper()
	h := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"toolgen-mcp/1"}, "Toolgen-Device-Id": {id}}
	if code, body := get(t, "GET", s.url(host.DevicesPath), token, "", h, ""); code != http.StatusUnauthorized {
		t.Fatalf("device %s: %d %.200s, want 401", id, code, body)
	}
}

// TestAttack14_17_DeviceRefusalsDoNotGrowTheStore (finding 17): 500 refused,
// unauthenticated device connection attempts — invented ids, and a real device's id
// with wrong tokens. The audit log holds a bounded number of device_refused entries
// (the first ten per device and reason, then one summary with the count), and their
// counts add up to the 500 attempts: the refusals are on record, the store did not grow
// by one row each. On SQLite, and on PostgreSQL when TOOLGEN_PG_DSN is set; with one
// toolrun serve, and with two on the one store taking turns (each bounds its own
// entries: the bound is per server).
func TestAttack14_17_DeviceRefusalsDoNotGrowTheStore(t *testing.T) {
	for _, c := range []struct {
		store string
		procs int
	}{{"sqlite", 1}, {"sqlite", 2}, {"postgres", 1}, {"postgres", 2}} {
		store := c.store
		t.Run(fmt.Sprintf("%s/%d_servers", c.store, c.procs), func(t *testing.T) {
			db := ""
			if store == "postgres" {
				_, schema := pgtest.Open(t)
				u, err := url.Parse(pgtest.DSN(t))
				if err != nil {
					t.Fatal(err)
				}
				q := u.Query()
				q.Set("search_path", schema)
				u.RawQuery = q.Encode()
				db = u.String()
			}
			dir := specRoot(t, map[string]string{"devices/lab.yaml": fmt.Sprintf(`device_id: lab
tenant: default
token_sha256: %s
classification: {side_effect: read, risk: low, idempotency: idempotent, required_scopes: [device.lab]}
`, sha("lab-token-77aa"))})
			var servers []*server
			for range c.procs {
				servers = append(servers, serve(t, dir, db))
			}
			const attempts = 500
			for i := range attempts {
				s := servers[(i/2)%len(servers)]
				if i%2 == 0 {
					refusedDevice(t, s, fmt.Sprintf("ghost%d", i), "whatever")
				} else {
					refusedDevice(t, s, "lab", fmt.Sprintf("not-the-token-%d", i))
				}
			}
			for _, s := range servers {
				s.stop() // the summaries of the open windows are written on close
			}

			_, out := toolrun(t, dir, db, "audit", "--json")
			var entries []struct {
				Kind   string          `json:"kind"`
				Detail json.RawMessage `json:"detail"`
			}
			if err := json.Unmarshal([]byte(out), &entries); err != nil {
				t.Fatalf("toolrun audit --json: %v\n%.500s", err, out)
			}
			rows, counted, summaries := 0, 0, 0
			for _, e := range entries {
				if e.Kind != "device_refused" {
					continue
				}
				rows++
				var d struct {
					Reason  string `json:"reason"`
					Summary bool   `json:"summary"`
					Count   int    `json:"count"`
				}
				if err := json.Unmarshal(e.Detail, &d); err != nil {
					t.Fatal(err)
				}
				if d.Summary {
					summaries++
					counted += d.Count
				} else {
					counted++
				}
			}
			// Two keys (unknown ids, lab's bad tokens), at most burst + 1 entries each per
			// window and server; the attempts may straddle two windows.
			if maxRows := c.procs * 2 * 2 * 11; rows > maxRows || summaries == 0 {
				t.Fatalf("%d device_refused entries (%d summaries) for %d attempts, want at most %d", rows, summaries, attempts, maxRows)
			}
			if counted != attempts {
				t.Fatalf("the device_refused entries account for %d refusals, want %d", counted, attempts)
			}
			t.Logf("%d attempts: %d audit entries, %d of them summaries", attempts, rows, summaries)
		})
	}
}
