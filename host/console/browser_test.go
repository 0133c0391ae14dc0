package console_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/toolgen/toolgen/runtime/store"
)

var shotsDir = flag.String("screenshots", "", "write the browser test's screenshots into this directory (the README's: -screenshots ../../docs/console)")

// tab opens a tab of root's browser; fresh gives it a browser context of its own (no
// cookies shared with the other tabs).
func tab(t *testing.T, root context.Context, fresh bool) context.Context {
	t.Helper()
	var opts []chromedp.ContextOption
	if fresh {
		opts = append(opts, chromedp.WithNewBrowserContext())
	}
	ctx, cancel := chromedp.NewContext(root, opts...)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("a new tab: %v", err)
	}
	return ctx
}

func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

func text(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
	if err != nil {
		t.Fatalf("text of %s: %v", css, err)
	}
	return v
}

// waitLive waits until the page follows the event stream.
func waitLive(t *testing.T, ctx context.Context) {
	t.Helper()
	do(t, ctx, "the page goes live", chromedp.WaitVisible(chromedp.CSS(`#live-status.live-status:not(.off)`)))
}

// flashed waits for the message after a decision on call id.
func flashed(t *testing.T, ctx context.Context, words string, id int64) {
	t.Helper()
	do(t, ctx, words, chromedp.WaitVisible(chromedp.Search(fmt.Sprintf(`//p[@class="flash" and contains(., "%s %d:")]`, words, id))))
}

// inert checks that nothing untrusted on the page became markup or ran: the page has
// only the console's own script, no element the arguments or remote text spelled,
// and no attribute a script would have set.
func inert(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	js := `JSON.stringify({scripts: document.scripts.length, pwned: document.body.dataset.pwned || "",
		js: document.querySelectorAll('a[href^="javascript:"]').length, img: document.querySelectorAll('img').length,
		bold: document.querySelectorAll('main b, main i').length})`
	if got := eval[string](t, ctx, js); got != `{"scripts":1,"pwned":"","js":0,"img":0,"bold":0}` {
		t.Errorf("%s: untrusted text became markup or ran: %s", where, got)
	}
}

// TestBrowser (issue 18): the console in a real headless Chromium against a host
// serving HTTP on loopback, with principals.yaml's static tokens and an OIDC issuer
// the test runs: sign in both ways, see a held call appear live, approve it and watch
// the agent's retry succeed, deny one without JavaScript, resolve UNCERTAIN calls both
// ways, read the modes in the audit timeline, and decide from a phone-sized screen.
// With -screenshots DIR it writes the README's screenshots there.
func TestBrowser(t *testing.T) {
	issuer := newTestIssuer(t, "toolgen-console", clientSecret)
	t.Setenv(clientSecretEnv, clientSecret)
	s := serve(t, newDeployment(t, principalsYAML(issuer.url), ""), "")
	agent := s.agent(agentToken)
	root := chrome(t)
	ctx := tab(t, root, true)
	// The viewer's zone is not the server's: the script shows times in it.
	if _, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Tokyo"}); err != nil {
		t.Fatal(err)
	}

	// Sign in with a static token.
	do(t, ctx, "the sign-in page", chromedp.Navigate(s.base+"/console/held"), chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)))
	screenshot(t, ctx, "signin")
	do(t, ctx, "token sign-in", chromedp.SendKeys(chromedp.CSS(`input[name=token]`), ritaToken),
		chromedp.Click(chromedp.CSS(`form[action="/console/signin"] button`)), chromedp.WaitVisible(chromedp.CSS(`.who .principal`)))
	if who := text(t, ctx, `.who .principal`); who != "rita" {
		t.Fatalf("signed in as %q, want rita", who)
	}

	// A held call appears without a reload.
	waitLive(t, ctx)
	args := map[string]any{"service": `checkout <script>document.body.dataset.pwned=1</script>`,
		"url": "javascript:alert(document.cookie)", "note": "Roll out v2.4.1 to the eu-west pool. <img src=x onerror=alert(2)> " +
			strings.Repeat("The canary passed on 3 of 3 hosts; error rate 0.02 %, p99 latency 184 ms. ", 4)}
	if _, reason := call(t, agent, "demo.deploy", "c-ship-1", args); reason != "approval_pending" {
		t.Fatalf("the deploy: %s, want approval_pending", reason)
	}
	held := s.heldID("acme", "demo.deploy")
	card := fmt.Sprintf(`article[data-key="inv-%d"]`, held)
	do(t, ctx, "the held call appears live", chromedp.WaitVisible(chromedp.CSS(card)))
	inert(t, ctx, "the held calls")
	if why := text(t, ctx, card+` .facts dd`); !strings.Contains(why, "operator rule deploys-need-review") {
		t.Errorf("why held: %q", why)
	}
	tz := eval[string](t, ctx, `(function(){var e=document.querySelector('time[datetime]');return e.title+' | '+e.textContent})()`)
	if title, shown, _ := strings.Cut(tz, " | "); !strings.HasSuffix(title, "UTC") || strings.Contains(shown, "UTC") || shown == "" {
		t.Errorf("times are not in the viewer's zone: %q", tz)
	}
	screenshot(t, ctx, "held")

	// Approve it; the agent's retry succeeds, watched on the call's page.
	do(t, ctx, "approve", chromedp.SendKeys(chromedp.CSS(card+` textarea`), "canary looks good"),
		chromedp.Click(chromedp.CSS(card+` button[value=approve]`)))
	flashed(t, ctx, "Approved call", held)
	do(t, ctx, "the approved call's page", chromedp.Navigate(fmt.Sprintf("%s/console/invocations/%d", s.base, held)),
		chromedp.WaitVisible(chromedp.CSS(`#status.status-pending`)))
	waitLive(t, ctx)
	if st, reason := call(t, agent, "demo.deploy", "c-ship-1", args); st != "ok" {
		t.Fatalf("the agent's retry: %s %s, want it to succeed", st, reason)
	}
	do(t, ctx, "the retry's success appears live", chromedp.WaitVisible(chromedp.CSS(`#status.status-succeeded`)))
	inert(t, ctx, "the call's page")
	screenshot(t, ctx, "invocation")
	if n := s.tools()["demo.deploy"].runs.Load(); n != 1 {
		t.Errorf("demo.deploy ran %d times, want 1", n)
	}

	// Deny one, without JavaScript: the forms are plain forms, the times UTC.
	nojs := tab(t, ctx, false)
	if _, err := chromedp.Call(nojs, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	if _, reason := call(t, agent, "demo.deploy", "c-ship-2", map[string]any{"service": "payments"}); reason != "approval_pending" {
		t.Fatalf("the second deploy: %s", reason)
	}
	denied := s.heldID("acme", "demo.deploy")
	card = fmt.Sprintf(`article[data-key="inv-%d"]`, denied)
	do(t, nojs, "the held page without JavaScript", chromedp.Navigate(s.base+"/console/held"), chromedp.WaitVisible(chromedp.CSS(card)))
	if shown := text(t, nojs, card+` time`); !strings.HasSuffix(shown, "UTC") {
		t.Errorf("without JavaScript a time shows %q, want UTC", shown)
	}
	do(t, nojs, "deny", chromedp.SendKeys(chromedp.CSS(card+` textarea`), "not during the freeze"),
		chromedp.Click(chromedp.CSS(card+` button[value=deny]`)))
	flashed(t, nojs, "Denied call", denied)
	if st, reason := call(t, agent, "demo.deploy", "c-ship-2", map[string]any{"service": "payments"}); st != "denied" || reason != "approval_denied" {
		t.Errorf("the denied call's retry: %s %s", st, reason)
	}

	// A remote error is text.
	if st, _ := call(t, agent, "demo.fail", "c-fail-1", map[string]any{"service": "web"}); st != "failed" {
		t.Fatalf("demo.fail: %s", st)
	}
	failed := s.lastOf("acme", "demo.fail")
	do(t, ctx, "the failed call's page", chromedp.Navigate(fmt.Sprintf("%s/console/invocations/%d", s.base, failed)),
		chromedp.WaitVisible(chromedp.CSS(`.untrusted pre`)))
	inert(t, ctx, "the remote error")
	if got := text(t, ctx, `.untrusted pre`); !strings.Contains(got, `<img src=x onerror=`) {
		t.Errorf("the remote error is not shown as text: %q", got)
	}

	// Sign in with the OIDC issuer (authorization code + PKCE), in a browser of its own.
	oc := tab(t, root, true)
	do(t, oc, "the issuer's sign-in", chromedp.Navigate(s.base+"/console/signin"),
		chromedp.Click(chromedp.CSS(`a.button[href*="issuer=login"]`)), chromedp.WaitVisible(chromedp.CSS(`#as-olga`)),
		chromedp.Click(chromedp.CSS(`#as-olga`)), chromedp.WaitVisible(chromedp.CSS(`.who .principal`)))
	if who := text(t, oc, `.who .principal`); who != "login/olga" {
		t.Fatalf("the issuer signed in %q, want login/olga", who)
	}

	// Resolve UNCERTAIN calls, one each way.
	happened := s.uncertainCall("acme", "c-charge-1")
	notHappened := s.uncertainCall("acme", "c-charge-2")
	do(t, oc, "the UNCERTAIN queue", chromedp.Navigate(s.base+"/console/uncertain"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`article[data-key="inv-%d"]`, happened))),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`article[data-key="inv-%d"]`, notHappened))))
	screenshot(t, oc, "uncertain")
	card = fmt.Sprintf(`article[data-key="inv-%d"]`, happened)
	do(t, oc, "resolve: happened", chromedp.SendKeys(chromedp.CSS(card+` textarea`), "the processor shows the charge"),
		chromedp.Click(chromedp.CSS(card+` button[value=happened]`)))
	flashed(t, oc, "Resolved call", happened)
	card = fmt.Sprintf(`article[data-key="inv-%d"]`, notHappened)
	do(t, oc, "resolve: did not happen", chromedp.SendKeys(chromedp.CSS(card+` textarea`), "no charge at the processor"),
		chromedp.Click(chromedp.CSS(card+` button[value=did_not_happen]`)))
	flashed(t, oc, "Resolved call", notHappened)
	if r := s.row(happened); r.Status != store.StatusSucceeded || r.ResolvedBy != "login/olga" {
		t.Errorf("happened: %s by %q, want SUCCEEDED by login/olga", r.Status, r.ResolvedBy)
	}
	if r := s.row(notHappened); r.Status != store.StatusPending {
		t.Errorf("did not happen: %s, want PENDING (to run once more)", r.Status)
	}
	if _, err := s.h.Recover(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := s.row(notHappened); r.Status != store.StatusSucceeded {
		t.Errorf("did not happen, after a recovery pass: %s, want SUCCEEDED", r.Status)
	}
	if n := s.tools()["demo.charge"].runs.Load(); n != 1 {
		t.Errorf("demo.charge ran %d times after the reviews, want 1 (the call that did not happen)", n)
	}

	// The audit timeline says which mode every entry was made in.
	if st, reason := call(t, agent, "protocol.dispatch", "c-dispatch", map[string]any{"mode": "ship", "reason": "built and tried"}); st != "ok" {
		t.Fatalf("dispatch: %s %s", st, reason)
	}
	if _, reason := call(t, agent, "demo.deploy", "c-ship-3", map[string]any{"service": "checkout"}); reason != "approval_pending" {
		t.Fatalf("the deploy in ship: %s", reason)
	}
	do(t, ctx, "the session's audit", chromedp.Navigate(s.base+"/console/audit?session=s-review"),
		chromedp.WaitVisible(chromedp.CSS(`table.audit tbody tr`)))
	modes := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('table.audit tbody tr')).map(r => r.cells[1].textContent + ' ' + r.cells[2].textContent)`)
	for _, want := range []string{"tool_call build", "held build", "approval build", "dispatch_request build", "tool_call ship", "held ship"} {
		if !slices.Contains(modes, want) {
			t.Errorf("the audit timeline has no %q line: %q", want, modes)
		}
	}
	links := eval[int](t, ctx, `Array.from(document.querySelectorAll('table.audit tbody tr')).filter(r => r.cells[0].textContent && r.cells[7].querySelector('a[href^="/console/invocations/"]')).length`)
	if links < 6 {
		t.Errorf("only %d audit lines link to their invocation", links)
	}
	screenshot(t, ctx, "audit")

	// On a phone.
	phone := tab(t, ctx, false)
	shipped := s.heldID("acme", "demo.deploy")
	card = fmt.Sprintf(`article[data-key="inv-%d"]`, shipped)
	do(t, phone, "the held page on a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch),
		chromedp.Navigate(s.base+"/console/held"), chromedp.WaitVisible(chromedp.CSS(card)))
	if w := eval[int](t, phone, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the held page is %d px wide on a 390 px screen", w)
	}
	screenshot(t, phone, "phone")
	do(t, phone, "approve on a phone", chromedp.Click(chromedp.CSS(card+` button[value=approve]`)))
	flashed(t, phone, "Approved call", shipped)
}
