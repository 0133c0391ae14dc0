package tooltest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolgen/toolgen/gen"
	"github.com/toolgen/toolgen/runtime"
)

// recorder is a TB that records what the suite reports instead of failing the test,
// so a test can assert that the suite catches a violation.
type recorder struct {
	t     *testing.T
	mu    sync.Mutex
	errs  []string
	fatal string
}

func (r *recorder) Helper()                         {}
func (r *recorder) Logf(format string, args ...any) { r.t.Logf(format, args...) }
func (r *recorder) TempDir() string                 { return r.t.TempDir() }
func (r *recorder) Cleanup(f func())                { r.t.Cleanup(f) }

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// Fatalf records and stops the goroutine running the suite, as testing.T does.
func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatal = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	goruntime.Goexit()
}

// checkWith runs Check against a recorder and returns what it reported.
func checkWith(t *testing.T, tool runtime.Tool, c Case) *recorder {
	t.Helper()
	r := &recorder{t: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Check(r, tempSQLite, tool, c)
	}()
	<-done
	if r.fatal != "" {
		t.Fatalf("the suite could not run: %s", r.fatal)
	}
	for _, e := range r.errs {
		t.Logf("reported: %s", e)
	}
	return r
}

// wantReported fails unless one reported error contains every fragment.
func (r *recorder) wantReported(t *testing.T, fragments ...string) {
	t.Helper()
	for _, e := range r.errs {
		all := true
		for _, f := range fragments {
			all = all && strings.Contains(e, f)
		}
		if all {
			return
		}
	}
	t.Errorf("no reported error contains %q; reported:\n%s", fragments, strings.Join(r.errs, "\n"))
}

func (r *recorder) wantClean(t *testing.T) {
	t.Helper()
	if len(r.errs) > 0 {
		t.Errorf("the suite reported %d violations, want none:\n%s", len(r.errs), strings.Join(r.errs, "\n"))
	}
}

// demoTool is a hand-written runtime.Tool (as an MCP adapter is): run does the work.
type demoTool struct {
	spec    runtime.ToolSpec
	effects *Effects     // wired by the case's Setup
	client  *http.Client // wired by the case's Setup
	run     func(d *demoTool, ctx context.Context, tc *runtime.ExecContext) (runtime.ToolResult, error)
}

func (d *demoTool) Spec() *runtime.ToolSpec { return &d.spec }
func (d *demoTool) Execute(ctx context.Context, tc *runtime.ExecContext, _ json.RawMessage) (runtime.ToolResult, error) {
	return d.run(d, ctx, tc)
}

const demoSchema = `{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer"}},"additionalProperties":false}`

func newDemo(name string, se runtime.SideEffect, idem runtime.Idempotency, run func(d *demoTool, ctx context.Context, tc *runtime.ExecContext) (runtime.ToolResult, error)) *demoTool {
	return &demoTool{spec: runtime.ToolSpec{
		Name: name, Version: 1, Kind: runtime.KindAction, SideEffect: se, Idempotency: idem,
		Risk: runtime.RiskLow, RequiredScopes: []string{"demo.use"}, OutputTrust: runtime.TrustTool,
		OutputMaxBytes: 65536, InputSchema: json.RawMessage(demoSchema), SchemaSHA256: "sha-" + name,
	}, run: run}
}

// wire is a Setup that hands the tool the case's doubles.
func (d *demoTool) wire(t TB, env *Env) {
	d.effects = env.Effects
	d.client = &http.Client{Transport: env.Effects.RoundTripper(nil)}
}

func writeOut(tc *runtime.ExecContext) error {
	return os.WriteFile(filepath.Join(tc.Workspace(), "out.txt"), []byte("sent"), 0o644)
}

func ok() (runtime.ToolResult, error) { return runtime.ToolResult{OK: true}, nil }

var demoArgs = `{"text": "hi", "n": 2}`

func TestCheck_MarkThenWritePasses(t *testing.T) {
	tool := newDemo("demo.send", runtime.SideEffectWrite, runtime.NonIdempotent, func(d *demoTool, ctx context.Context, tc *runtime.ExecContext) (runtime.ToolResult, error) {
		if err := tc.MarkEffectSent(ctx); err != nil {
			return runtime.ToolResult{}, err
		}
		if err := writeOut(tc); err != nil {
			return runtime.ToolResult{}, err
		}
		d.effects.Record("notify ops")
		return ok()
	})
	c := Case{Name: "send", Args: demoArgs, Setup: tool.wire}
	checkWith(t, tool, c).wantClean(t)
	// And through Run with a real *testing.T, as an author uses it.
	Run(t, tempSQLite, tool, c)
}

func TestCheck_WriteBeforeMarkIsReported(t *testing.T) {
	tool := newDemo("demo.send", runtime.SideEffectWrite, runtime.NonIdempotent, func(d *demoTool, ctx context.Context, tc *runtime.ExecContext) (runtime.ToolResult, error) {
		if err := writeOut(tc); err != nil { // the bug: the effect first
			return runtime.ToolResult{}, err
		}
		if err := tc.MarkEffectSent(ctx); err != nil {
			return runtime.ToolResult{}, err
		}
		return ok()
	})
	r := checkWith(t, tool, Case{Name: "broken", Args: demoArgs, Setup: tool.wire})
	r.wantReported(t, `demo.send, case "broken"`, "changed before the watermark", "workspace:out.txt appeared")
	// The same write also lands although the watermark write failed.
	r.wantReported(t, "with a failing watermark write", "MarkEffectSent returned an error and yet the tool changed", "workspace:out.txt appeared")
	r.wantReported(t, "with a lost lease", "workspace:out.txt appeared")
}

func TestCheck_HTTPRequestBeforeMarkIsReported(t *testing.T) {
	tool := newDemo("demo.charge", runtime.SideEffectWrite, runtime.NonIdempotent, func(d *demoTool, ctx context.Context, tc *runtime.ExecContext) (runtime.ToolResult, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.test/charge", strings.NewReader("{}"))
		resp, err := d.client.Do(req)
		if err != nil {
			return runtime.ToolResult{}, err
		}
		resp.Body.Close()
		if err := tc.MarkEffectSent(ctx); err != nil {
			return runtime.ToolResult{}, err
		}
		return ok()
	})
	r := checkWith(t, tool, Case{Name: "charge", Args: `{}`, Setup: tool.wire})
	r.wantReported(t, "changed before the watermark", "effect #1 appeared (HTTP POST https://api.example.test/charge)")
}

func TestCheck_RecordedEffectBeforeMarkIsReported(t *testing.T) {
	tool := newDemo("demo.mail", runtime.SideEffectWrite, runtime.ConditionallyIdempotent, func(d *demoTool, ctx context.Context, tc *runtime.ExecContext) (runtime.ToolResult, error) {
		d.effects.Record("send mail to ops")
		if err := tc.MarkEffectSent(ctx); err != nil {
			return runtime.ToolResult{}, err
		}
		return ok()
	})
	tool.spec.IdempotentWhen = "args.n == 1"
	r := checkWith(t, tool, Case{Name: "mail", Args: demoArgs, Setup: tool.wire})
	r.wantReported(t, "changed before the watermark", "effect #1 appeared (send mail to ops)", "conditionally_idempotent")
}

func TestCheck_NeverMarkingIsReported(t *testing.T) {
	tool := newDemo("demo.send", runtime.SideEffectWrite, runtime.NonIdempotent, func(d *demoTool, ctx context.Context, tc *runtime.ExecContext) (runtime.ToolResult, error) {
		if err := writeOut(tc); err != nil {
			return runtime.ToolResult{}, err
		}
		return ok()
	})
	r := checkWith(t, tool, Case{Name: "unmarked", Args: demoArgs, Setup: tool.wire})
	r.wantReported(t, "returned success without calling MarkEffectSent (RT-13)")
	r.wantReported(t, "changed the world without ever marking the watermark", "workspace:out.txt appeared")
	r.wantReported(t, "with a failing watermark write", "succeeded without asking for the watermark")
}

func TestCheck_IgnoringAFailedWatermarkIsReported(t *testing.T) {
	tool := newDemo("demo.send", runtime.SideEffectWrite, runtime.NonIdempotent, func(d *demoTool, ctx context.Context, tc *runtime.ExecContext) (runtime.ToolResult, error) {
		_ = tc.MarkEffectSent(ctx) // the bug: the error is dropped
		if err := writeOut(tc); err != nil {
			return runtime.ToolResult{}, err
		}
		return ok()
	})
	r := checkWith(t, tool, Case{Name: "ignores", Args: demoArgs, Setup: tool.wire})
	r.wantReported(t, "with a failing watermark write", "MarkEffectSent returned an error and yet the tool changed", "workspace:out.txt appeared")
	r.wantReported(t, "with a failing watermark write", "want unavailable/watermark_failed")
	r.wantReported(t, "with a lost lease", "want unavailable/lease_lost")
	if len(r.errs) != 4 {
		// The first run is clean: the watermark was recorded before the write.
		t.Errorf("reported %d errors, want 4 (two per failed-watermark run):\n%s", len(r.errs), strings.Join(r.errs, "\n"))
	}
}

func TestCheck_ReadToolThatWritesIsReported(t *testing.T) {
	tool := newDemo("demo.peek", runtime.SideEffectRead, runtime.Idempotent, func(d *demoTool, ctx context.Context, tc *runtime.ExecContext) (runtime.ToolResult, error) {
		if err := writeOut(tc); err != nil {
			return runtime.ToolResult{}, err
		}
		return ok()
	})
	r := checkWith(t, tool, Case{Name: "peek", Args: `{}`})
	r.wantReported(t, "declares side_effect read but changed", "workspace:out.txt appeared")
}

func TestCheck_IdempotentWriteMayActWithoutMark(t *testing.T) {
	tool := newDemo("demo.put", runtime.SideEffectWrite, runtime.Idempotent, func(d *demoTool, ctx context.Context, tc *runtime.ExecContext) (runtime.ToolResult, error) {
		if err := writeOut(tc); err != nil {
			return runtime.ToolResult{}, err
		}
		return ok()
	})
	checkWith(t, tool, Case{Name: "put", Args: `{}`}).wantClean(t)
}

func TestCheck_HeldCallIsApprovedAndChecked(t *testing.T) {
	tool := newDemo("demo.deploy", runtime.SideEffectWrite, runtime.NonIdempotent, func(d *demoTool, ctx context.Context, tc *runtime.ExecContext) (runtime.ToolResult, error) {
		if err := writeOut(tc); err != nil { // before the mark: must be caught behind the hold too
			return runtime.ToolResult{}, err
		}
		if err := tc.MarkEffectSent(ctx); err != nil {
			return runtime.ToolResult{}, err
		}
		return ok()
	})
	tool.spec.Risk = runtime.RiskCritical // always needs approval (POL-1)
	r := checkWith(t, tool, Case{Name: "deploy", Args: `{}`})
	r.wantReported(t, "changed before the watermark", "workspace:out.txt appeared")
}

func TestCheck_AdapterToolInReservedDomain(t *testing.T) {
	tool := newDemo("mcp.demo.send", runtime.SideEffectWrite, runtime.NonIdempotent, func(d *demoTool, ctx context.Context, tc *runtime.ExecContext) (runtime.ToolResult, error) {
		// What MCP-8 asks of the adapter: marshal first, mark, then send.
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://mcp.example.test/", strings.NewReader(`{"method":"tools/call"}`))
		if err := tc.MarkEffectSent(ctx); err != nil {
			return runtime.ToolResult{}, err
		}
		resp, err := d.client.Do(req)
		if err != nil {
			return runtime.ToolResult{}, err
		}
		resp.Body.Close()
		return ok()
	})
	checkWith(t, tool, Case{Name: "tools/call", Args: `{}`, Setup: tool.wire}).wantClean(t)
}

func TestCheck_UnexpectedOutcomeIsReported(t *testing.T) {
	tool := newDemo("demo.send", runtime.SideEffectWrite, runtime.NonIdempotent, func(d *demoTool, ctx context.Context, tc *runtime.ExecContext) (runtime.ToolResult, error) {
		return runtime.FailureResult(runtime.Failf("quota", "over quota"))
	})
	r := checkWith(t, tool, Case{Name: "quota", Args: `{}`})
	r.wantReported(t, "outcome failed/tool_failure", "quota: over quota", "want success")

	r = checkWith(t, tool, Case{Name: "quota", Args: `{}`, WantFailure: "quota"})
	r.wantClean(t)
	r = checkWith(t, tool, Case{Name: "quota", Args: `{}`, WantFailure: "other"})
	r.wantReported(t, "the tool reported the failure quota", "want the failure other")
}

func TestCheck_DeniedCallIsNotAVacuousPass(t *testing.T) {
	tool := newDemo("demo.send", runtime.SideEffectWrite, runtime.NonIdempotent, func(d *demoTool, ctx context.Context, tc *runtime.ExecContext) (runtime.ToolResult, error) {
		return ok()
	})
	r := checkWith(t, tool, Case{Name: "no scope", Args: `{}`, Setup: func(t TB, env *Env) { env.Principal.Scopes = nil }})
	r.wantReported(t, "the pipeline never ran the tool (outcome denied/missing_scope)")
}

func TestCheck_SuspendingControlToolReplaysItsAnswer(t *testing.T) {
	tool := newDemo("demo.ask", runtime.SideEffectNone, runtime.Idempotent, func(d *demoTool, ctx context.Context, tc *runtime.ExecContext) (runtime.ToolResult, error) {
		tc.Suspend("which branch?")
		return ok()
	})
	tool.spec.Kind, tool.spec.Suspends = runtime.KindControl, true
	checkWith(t, tool, Case{Name: "ask", Args: `{}`, ResumeAnswer: `{"text": "main"}`}).wantClean(t)
}

// leakyPrepare is an author's implementation behind a generated wrapper (GEN-2) whose
// Prepare leaves a mark: the wrapper places the watermark correctly, but cannot stop
// Prepare from writing. Only the suite can.
type leakyPrepare struct{}

func (leakyPrepare) Prepare(ctx context.Context, tc *runtime.ExecContext, args gen.WorkspaceWriteTextArgs) (string, error) {
	// "Reserve" the name early: a mark before the watermark.
	p := filepath.Join(tc.Workspace(), args.Path+".lock")
	return p, os.WriteFile(p, nil, 0o644)
}

func (leakyPrepare) Commit(ctx context.Context, tc *runtime.ExecContext, lock string) (gen.WorkspaceWriteTextResult, error) {
	return gen.WorkspaceWriteTextResult{BytesWritten: 0, Sha256: "none"}, os.Remove(lock)
}

func TestCheck_GeneratedWrapperWithLeakyPrepareIsReported(t *testing.T) {
	tool := gen.NewWorkspaceWriteText[string](leakyPrepare{})
	r := checkWith(t, tool, Case{Name: "leaky", Args: `{"path": "a.txt", "text": "x"}`})
	r.wantReported(t, `workspace.write_text, case "leaky": changed before the watermark`, "workspace:a.txt.lock appeared")
	r.wantReported(t, "with a failing watermark write", "workspace:a.txt.lock appeared")
}

// The replay check itself: a call that is not deduplicated (here, because the second
// pipeline runs over another database) is reported as executed again and not replayed.
func TestCheckReplay_ReportsAReexecution(t *testing.T) {
	tool := newDemo("demo.send", runtime.SideEffectWrite, runtime.NonIdempotent, func(d *demoTool, ctx context.Context, tc *runtime.ExecContext) (runtime.ToolResult, error) {
		if err := tc.MarkEffectSent(ctx); err != nil {
			return runtime.ToolResult{}, err
		}
		d.effects.Record("send")
		return ok()
	})
	r := &recorder{t: t}
	s := &suite{t: r, db: tempSQLite, tool: tool, spec: tool.Spec(), c: Case{Name: "send", Args: demoArgs, Setup: tool.wire}, name: "demo.send"}
	env := s.newEnv()
	first := s.call(s.newWorker(env), demoArgs).Outcome
	after := s.observe(env)
	other := s.newWorker(env) // a new database
	s.checkReplay(other, env, first, after, "a pipeline over another database")
	for _, e := range r.errs {
		t.Logf("reported: %s", e)
	}
	r.wantReported(t, "executed the tool again (1 more times)")
	r.wantReported(t, "Outcome.Replayed is false")
	r.wantReported(t, "replay through a pipeline over another database changed", "effect #2 appeared (send)")
}

// The pipeline's side of RT-13: a watermark-requiring call that returned without
// marking is flagged on its row.
func TestPipeline_FlagsMissingWatermarkOnTheRow(t *testing.T) {
	tool := newDemo("demo.send", runtime.SideEffectWrite, runtime.NonIdempotent, func(d *demoTool, ctx context.Context, tc *runtime.ExecContext) (runtime.ToolResult, error) {
		return ok()
	})
	w := NewWorker(t, tool, WorkerOptions{Database: tempSQLite(t)})
	r := w.Call(context.Background(), `{}`)
	if o := r.Outcome; o.Status != runtime.OutcomeSucceeded {
		t.Fatalf("outcome %s/%s", o.Status, o.ReasonCode)
	}
	inv := r.Row
	if inv == nil {
		t.Fatal("no row recorded")
	}
	if !inv.WatermarkMissing || inv.EffectSentAt != nil {
		t.Errorf("row: watermark_missing %v, effect_sent_at %v; want true and unset", inv.WatermarkMissing, inv.EffectSentAt)
	}
}

func TestReshuffle_SameCanonicalArgsOtherBytes(t *testing.T) {
	for _, args := range []string{`{}`, `{"a":1}`, `{"b": [1, {"y": 2, "x": 1}], "a": "<&>", "c": {"k": null}}`} {
		got, err := reshuffle(args)
		if err != nil {
			t.Fatal(err)
		}
		if got == args {
			t.Errorf("reshuffle(%s) did not change the bytes", args)
		}
		want, _ := runtime.CanonicalJSON([]byte(args))
		canon, err := runtime.CanonicalJSON([]byte(got))
		if err != nil || !bytes.Equal(canon, want) {
			t.Errorf("reshuffle(%s) = %s: canonical %s (%v), want %s", args, got, canon, err, want)
		}
	}
	if _, err := reshuffle(`[1]`); err == nil {
		t.Error("reshuffle accepted an array")
	}
}

func TestStateDiff(t *testing.T) {
	before := State{"a": "1", "b": "2", "c": "3"}
	after := State{"a": "1", "b": "x", "d": "4"}
	got := strings.Join(after.Diff(before), "\n")
	want := "b changed (2 -> x)\nd appeared (4)\nc disappeared (was 3)"
	if got != want {
		t.Errorf("Diff:\n%s\nwant:\n%s", got, want)
	}
}

func TestWorkspaceState_SeesContentModeAndSymlinks(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	s0, err := WorkspaceState(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, change := range []func() error{
		func() error { return os.WriteFile(p, []byte("b"), 0o644) },
		func() error { return os.Chmod(p, 0o600) },
		func() error { return os.Symlink("f", filepath.Join(dir, "l")) },
		func() error { return os.Mkdir(filepath.Join(dir, "d"), 0o755) },
	} {
		if err := change(); err != nil {
			t.Fatal(err)
		}
		s1, err := WorkspaceState(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(s1.Diff(s0)) != 1 {
			t.Errorf("diff %v, want exactly one change", s1.Diff(s0))
		}
		s0 = s1
	}
}

// remotePrepare is an implementation behind a generated wrapper (GEN-2) that talks to
// a remote service: Prepare sends prepare (a lookup, or — the bug — a reservation),
// Commit uploads. Its client is wired to the case's Effects in Setup.
type remotePrepare struct {
	client  *http.Client
	prepare func(path string) *http.Request
}

func (r *remotePrepare) Prepare(ctx context.Context, tc *runtime.ExecContext, args gen.WorkspaceWriteTextArgs) (string, error) {
	resp, err := r.client.Do(r.prepare(args.Path).WithContext(ctx))
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	return args.Path, nil
}

func (r *remotePrepare) Commit(ctx context.Context, tc *runtime.ExecContext, path string) (gen.WorkspaceWriteTextResult, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.test/upload?path="+path, strings.NewReader("x"))
	resp, err := r.client.Do(req)
	if err != nil {
		return gen.WorkspaceWriteTextResult{}, err
	}
	resp.Body.Close()
	return gen.WorkspaceWriteTextResult{BytesWritten: 1, Sha256: "2d711642b726"}, nil
}

func request(method, url string) func(string) *http.Request {
	return func(path string) *http.Request {
		req, _ := http.NewRequest(method, url+"?path="+path, nil)
		return req
	}
}

// remoteCase is a case whose Setup wires impl's client to the run's Effects through
// RoundTripper(nil, isRead...), and keeps the last run's Effects in *last.
func remoteCase(impl *remotePrepare, last **Effects, isRead ...func(*http.Request) bool) Case {
	return Case{Name: "upload", Args: `{"path": "a.txt", "text": "x", "mode": "overwrite"}`,
		Setup: func(t TB, env *Env) {
			impl.client = &http.Client{Transport: env.Effects.RoundTripper(nil, isRead...)}
			*last = env.Effects
		}}
}

// The issue: a Prepare that only looks (GET, HEAD, OPTIONS) was counted as an effect
// before the watermark. It is not; the Commit's POST still is an effect, after it.
func TestCheck_ReadInPrepareIsNotAnEffect(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodOptions} {
		t.Run(method, func(t *testing.T) {
			impl := &remotePrepare{prepare: request(method, "https://api.example.test/quota")}
			var last *Effects
			checkWith(t, gen.NewWorkspaceWriteText[string](impl), remoteCase(impl, &last)).wantClean(t)
			if got, want := last.Reads(), []string{"HTTP " + method + " https://api.example.test/quota?path=a.txt"}; !slices.Equal(got, want) {
				t.Errorf("reads %q, want %q", got, want)
			}
			// The last run is the lost-lease one: the Commit never ran, so no effect.
			if got := last.List(); len(got) != 0 {
				t.Errorf("effects %q after a lost lease, want none", got)
			}
		})
	}
}

func TestCheck_WriteInPrepareIsStillAnEffect(t *testing.T) {
	impl := &remotePrepare{prepare: request(http.MethodPost, "https://api.example.test/reserve")}
	var last *Effects
	r := checkWith(t, gen.NewWorkspaceWriteText[string](impl), remoteCase(impl, &last))
	r.wantReported(t, "changed before the watermark", "effect #1 appeared (HTTP POST https://api.example.test/reserve?path=a.txt)")
	r.wantReported(t, "with a failing watermark write", "effect #1 appeared (HTTP POST https://api.example.test/reserve?path=a.txt)")
	if got := last.Reads(); len(got) != 0 {
		t.Errorf("reads %q, want none: a POST is not a read", got)
	}
}

// The author's own classification: a query sent as POST is a read, and — when the
// default is left out — a GET that acts is an effect.
func TestCheck_AuthorClassifiesReads(t *testing.T) {
	search := func(r *http.Request) bool { return r.Method == http.MethodPost && r.URL.Path == "/v1/search" }

	impl := &remotePrepare{prepare: request(http.MethodPost, "https://api.example.test/v1/search")}
	var last *Effects
	checkWith(t, gen.NewWorkspaceWriteText[string](impl), remoteCase(impl, &last, ReadMethod, search)).wantClean(t)

	impl = &remotePrepare{prepare: request(http.MethodGet, "https://legacy.example.test/reserve")}
	r := checkWith(t, gen.NewWorkspaceWriteText[string](impl), remoteCase(impl, &last, search))
	r.wantReported(t, "changed before the watermark", "effect #1 appeared (HTTP GET https://legacy.example.test/reserve?path=a.txt)")
}

func TestRoundTripper_ClassifiesAndForwards(t *testing.T) {
	e := &Effects{}
	var forwarded []string
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		forwarded = append(forwarded, r.Method)
		return &http.Response{StatusCode: http.StatusTeapot, Body: http.NoBody, Request: r}, nil
	})
	client := &http.Client{Transport: e.RoundTripper(next)}
	for _, method := range []string{"", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		req, _ := http.NewRequest(http.MethodGet, "https://h.example.test/x", nil)
		req.Method = method // "" is GET to net/http
		resp, err := client.Transport.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusTeapot {
			t.Fatalf("%q: %v, %v: want next's response", method, resp, err)
		}
	}
	if want := []string{"", "GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"}; !slices.Equal(forwarded, want) {
		t.Errorf("forwarded %q, want %q", forwarded, want)
	}
	wantReads := []string{"HTTP GET https://h.example.test/x", "HTTP GET https://h.example.test/x", "HTTP HEAD https://h.example.test/x", "HTTP OPTIONS https://h.example.test/x"}
	if got := e.Reads(); !slices.Equal(got, wantReads) {
		t.Errorf("reads %q, want %q", got, wantReads)
	}
	wantEffects := []string{"HTTP POST https://h.example.test/x", "HTTP PUT https://h.example.test/x", "HTTP PATCH https://h.example.test/x", "HTTP DELETE https://h.example.test/x"}
	if got := e.List(); !slices.Equal(got, wantEffects) {
		t.Errorf("effects %q, want %q", got, wantEffects)
	}
	st := State{}
	e.state(st)
	if len(st) != len(wantEffects) {
		t.Errorf("observed state %v: reads must not be part of it", st)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// POL-3 holds inside the Worker too: an Approver who is the caller cannot approve, and
// the test is told so instead of waiting out the hold.
func TestWorker_ApproverWhoIsTheCallerFailsTheTest(t *testing.T) {
	tool := newDemo("demo.deploy", runtime.SideEffectWrite, runtime.NonIdempotent, func(d *demoTool, ctx context.Context, tc *runtime.ExecContext) (runtime.ToolResult, error) {
		t.Error("the tool ran although nobody else approved it")
		return ok()
	})
	tool.spec.Risk = runtime.RiskCritical
	r := &recorder{t: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w := NewWorker(r, tool, WorkerOptions{Database: tempSQLite(r), Approver: runtime.Principal{ID: DefaultCaller}})
		w.Call(context.Background(), `{}`)
	}()
	<-done
	if !strings.Contains(r.fatal, "approve the held call as "+DefaultCaller) || !strings.Contains(r.fatal, runtime.ErrSelfApproval.Error()) {
		t.Errorf("fatal %q, want the self-approval named", r.fatal)
	}
}
