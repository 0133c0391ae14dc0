package console_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/toolgen/toolgen/host"
	"github.com/toolgen/toolgen/host/hostcli"
	"github.com/toolgen/toolgen/runtime/store"
)

// TestSecurity (issue 18): the console's promises, against a host serving HTTP on a real
// loopback port with principals.yaml of two tenants.
func TestSecurity(t *testing.T) {
	d := newDeployment(t, principalsYAML(""), "")
	s := serve(t, d, "")
	agent := s.agent(agentToken)
	hostile := map[string]any{"service": `<script>document.body.dataset.pwned=3</script>"><b>bold</b>`,
		"url": "javascript:alert(document.cookie)", "note": strings.Repeat("<i>long</i> ", 100)}
	if st, reason := call(t, agent, "demo.deploy", "c-hostile", hostile); reason != "approval_pending" {
		t.Fatalf("the hostile call: %s %s, want held", st, reason)
	}
	heldID := s.heldID("acme", "demo.deploy")
	inv := strconv.FormatInt(heldID, 10)
	if st, _ := call(t, agent, "demo.fail", "c-fail", map[string]any{"service": "web"}); st != "failed" {
		t.Fatalf("demo.fail: %s", st)
	}
	var failID int64
	rows, _ := s.h.Store().InvocationList(t.Context(), store.InvocationFilter{Tenant: "acme"})
	for _, r := range rows {
		if r.Tool == "demo.fail" {
			failID = r.ID
		}
	}

	rita := newBrowser(t)
	rita.signIn(s, ritaToken)

	t.Run("untrusted text renders inert", func(t *testing.T) {
		for _, page := range []string{"/console/held", "/console/invocations/" + inv, "/console/invocations/" + strconv.FormatInt(failID, 10), "/console/audit"} {
			code, body := rita.get(s.base + page)
			if code != http.StatusOK {
				t.Fatalf("%s: %d\n%.1000s", page, code, body)
			}
			for _, raw := range []string{"<script>document", "<b>bold", "<img src=x", `href="javascript:`, "<i>long", "onerror=\""} {
				if strings.Contains(body, raw) {
					t.Errorf("%s carries %q unescaped", page, raw)
				}
			}
			if got := strings.Count(body, "<script"); got != 1 {
				t.Errorf("%s has %d script elements, want the console's own 1", page, got)
			}
		}
		_, held := rita.get(s.base + "/console/held")
		for _, want := range []string{"&lt;script&gt;document.body.dataset.pwned=3&lt;/script&gt;", "javascript:alert(document.cookie)",
			"operator rule deploys-need-review", "rule deploys-need-review requires approval"} {
			if !strings.Contains(held, want) {
				t.Errorf("the held page does not show %q", want)
			}
		}
		_, failed := rita.get(s.base + "/console/invocations/" + strconv.FormatInt(failID, 10))
		if !strings.Contains(failed, "&lt;img src=x onerror=") || !strings.Contains(failed, "external_untrusted") {
			t.Errorf("the remote error is not shown as untrusted text:\n%.3000s", failed)
		}
	})

	t.Run("cross-site posts are refused", func(t *testing.T) {
		tok := rita.csrf(s.base + "/console/held")
		decide := s.base + "/console/invocations/" + inv + "/decide"
		for name, c := range map[string]struct {
			form url.Values
			hdr  map[string]string
			want int
		}{
			"no CSRF token":         {url.Values{"decision": {"approve"}}, nil, http.StatusForbidden},
			"another CSRF token":    {url.Values{"decision": {"approve"}, "csrf": {tok + "x"}}, nil, http.StatusForbidden},
			"from another site":     {url.Values{"decision": {"approve"}, "csrf": {tok}}, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
			"marked cross-site":     {url.Values{"decision": {"approve"}, "csrf": {tok}}, map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
			"another loopback name": {url.Values{"decision": {"approve"}, "csrf": {tok}}, map[string]string{"Origin": "http://localhost:1"}, http.StatusForbidden},
		} {
			code, body, _ := rita.do(http.MethodPost, decide, c.form, c.hdr)
			if code != c.want {
				t.Errorf("%s: %d, want %d\n%.500s", name, code, c.want, body)
			}
		}
		if r := s.row(heldID); r.Status != store.StatusPending {
			t.Fatalf("a refused post decided the call: %s", r.Status)
		}
	})

	t.Run("another tenant's call is invisible", func(t *testing.T) {
		gus := newBrowser(t)
		gus.signIn(s, gusToken)
		_, held := gus.get(s.base + "/console/held")
		if strings.Contains(held, "demo.deploy") || !strings.Contains(held, "No call waits") {
			t.Errorf("globex's held page shows acme's call")
		}
		if code, _ := gus.get(s.base + "/console/invocations/" + inv); code != http.StatusNotFound {
			t.Errorf("acme's call to globex: %d, want 404", code)
		}
		if code, _ := gus.get(s.base + "/console/invocations/999999"); code != http.StatusNotFound {
			t.Errorf("a call that does not exist: %d, want 404", code)
		}
		tok := gus.csrf(s.base + "/console/held")
		if code, _, _ := gus.do(http.MethodPost, s.base+"/console/invocations/"+inv+"/decide", url.Values{"decision": {"approve"}, "csrf": {tok}}, nil); code != http.StatusNotFound {
			t.Errorf("globex approving acme's call: %d, want 404", code)
		}
		_, audit := gus.get(s.base + "/console/audit")
		if strings.Contains(audit, "demo.deploy") {
			t.Errorf("globex's audit shows acme's call")
		}
		_, other := gus.get(s.base + "/console/audit?tenant=acme")
		if strings.Contains(other, "demo.deploy") || !strings.Contains(other, "own tenant") {
			t.Errorf("globex naming acme in the filter sees acme's audit")
		}
		if r := s.row(heldID); r.Status != store.StatusPending {
			t.Fatalf("another tenant decided the call: %s", r.Status)
		}
	})

	t.Run("the caller cannot approve its own call", func(t *testing.T) {
		ana := s.agent(anaToken)
		if _, reason := call(t, ana, "demo.deploy", "c-ana", map[string]any{"service": "ana's"}); reason != "approval_pending" {
			t.Fatalf("ana's call: %s", reason)
		}
		var anaID int64
		waitFor(t, "ana's held call", func() bool {
			rows, _ := s.h.Store().InvocationList(t.Context(), store.InvocationFilter{Tenant: "acme", AwaitingApproval: true})
			for _, r := range rows {
				if r.Principal == "ana" {
					anaID = r.ID
				}
			}
			return anaID != 0
		})
		b := newBrowser(t)
		b.signIn(s, anaToken)
		_, page := b.get(s.base + "/console/invocations/" + strconv.FormatInt(anaID, 10))
		if !strings.Contains(page, "You made this call") || strings.Contains(page, `value="approve"`) {
			t.Errorf("ana is offered to approve her own call")
		}
		tok := b.csrf(s.base + "/console/held")
		code, body, _ := b.do(http.MethodPost, s.base+"/console/invocations/"+strconv.FormatInt(anaID, 10)+"/decide", url.Values{"decision": {"approve"}, "csrf": {tok}}, nil)
		if code != http.StatusForbidden || !strings.Contains(body, "another principal must decide it") {
			t.Errorf("ana approving her own call: %d\n%.500s", code, body)
		}
		if r := s.row(anaID); r.Status != store.StatusPending {
			t.Fatalf("ana approved her own call: %s", r.Status)
		}
	})

	t.Run("a session works only where it was made", func(t *testing.T) {
		other := serve(t, newDeployment(t, principalsYAML(""), ""), "")
		stolen := rita.c.Jar.Cookies(mustURL(t, s.base))
		if len(stolen) == 0 {
			t.Fatal("rita has no cookie")
		}
		var cookie string
		for _, c := range stolen {
			if c.Name == "toolgen-console" {
				cookie = c.Name + "=" + c.Value
			}
		}
		b := newBrowser(t)
		for name, c := range map[string]struct{ url, host string }{
			"another server":    {other.base + "/console/held", ""},
			"another name of s": {s.base + "/console/held", "localhost:" + port(s.addr)},
		} {
			code, body, hdr := b.do(http.MethodGet, c.url, nil, map[string]string{"Cookie": cookie, "Host": c.host})
			if code == http.StatusOK || (code == http.StatusSeeOther && !strings.HasPrefix(hdr.Get("Location"), "/console/signin")) {
				t.Errorf("%s: %d %s: the cookie signed in\n%.300s", name, code, hdr.Get("Location"), body)
			}
		}
	})

	t.Run("DNS-rebinding Host headers are refused", func(t *testing.T) {
		for _, h := range []string{"evil.example.com", "evil.example.com:" + port(s.addr), "127.0.0.1.nip.io"} {
			code, _, _ := rita.do(http.MethodGet, s.base+"/console/held", nil, map[string]string{"Host": h})
			if code != http.StatusForbidden {
				t.Errorf("Host %s: %d, want 403", h, code)
			}
			code, _, _ = rita.do(http.MethodGet, s.base+"/console/events", nil, map[string]string{"Host": h})
			if code != http.StatusForbidden {
				t.Errorf("Host %s, the live stream: %d, want 403", h, code)
			}
		}
	})

	t.Run("signed out is signed out", func(t *testing.T) {
		b := newBrowser(t)
		b.signIn(s, ritaToken)
		tok := b.csrf(s.base + "/console/held")
		if code, _, _ := b.do(http.MethodPost, s.base+"/console/signout", url.Values{"csrf": {tok}}, nil); code != http.StatusOK {
			t.Fatalf("sign-out: %d", code)
		}
		if code, _ := b.get(s.base + "/console/held"); code != http.StatusSeeOther {
			t.Errorf("after sign-out: %d, want the sign-in redirect", code)
		}
		if code, _ := newBrowser(t).get(s.base + "/console/events"); code != http.StatusUnauthorized {
			t.Errorf("the live stream without a session: %d", code)
		}
	})
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func port(addr string) string { return addr[strings.LastIndex(addr, ":")+1:] }

// syncBuffer is an io.Writer several goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

// TestToolrunServe (issue 18): a real `toolrun serve --http` (hostcli, with every
// builtin) serves the console: a token signs in, a rebinding Host is refused, a post
// without the CSRF token is refused.
func TestToolrunServe(t *testing.T) {
	d := newDeployment(t, principalsYAML(""), "")
	for _, f := range []string{"tools", "policy.yaml", "protocols"} {
		os.RemoveAll(filepath.Join(d.dir, f)) // the builtins only
	}
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- hostcli.Run(ctx, hostcli.Config{Name: "toolrun", Builtins: host.AllBuiltins},
			[]string{"serve", "--http", "127.0.0.1:0", "--no-servers", "--dir", d.dir, "--principal", "operator", "--log", "error"},
			strings.NewReader(""), io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != hostcli.ExitOK {
			t.Errorf("toolrun serve exited %d:\n%s", code, stderr.String())
		}
	})
	waitFor(t, "toolrun serve to listen", func() bool {
		select {
		case code := <-done:
			done <- code
			t.Fatalf("toolrun serve exited %d:\n%s", code, stderr.String())
		default:
		}
		_, ok := hostcli.ServingAddr(stderr.String())
		return ok
	})
	addr, _ := hostcli.ServingAddr(stderr.String()) // port 0: the kernel picked the port
	if !strings.Contains(stderr.String(), "the console at http://"+addr+"/console/") {
		t.Errorf("toolrun serve does not say where the console is:\n%s", stderr.String())
	}
	s := &server{t: t, base: "http://" + addr, addr: addr}
	b := newBrowser(t)
	b.signIn(s, ritaToken)
	if code, body := b.get(s.base + "/console/held"); code != http.StatusOK || !strings.Contains(body, "No call waits") {
		t.Errorf("the held page: %d", code)
	}
	if code, _, _ := b.do(http.MethodGet, s.base+"/console/held", nil, map[string]string{"Host": "rebound.example.net"}); code != http.StatusForbidden {
		t.Errorf("a rebinding Host: %d, want 403", code)
	}
	if code, _, _ := b.do(http.MethodPost, s.base+"/console/invocations/1/decide", url.Values{"decision": {"approve"}}, nil); code != http.StatusForbidden {
		t.Errorf("a post without the CSRF token: %d, want 403", code)
	}
}
