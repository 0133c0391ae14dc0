package tooltest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/runtime"
)

// TB is the part of testing.TB the suite uses. *testing.T satisfies it; the suite's
// own tests run it against a recorder to prove that it reports violations.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	// Fatalf is used only when the suite itself cannot run (the store cannot be
	// opened, the tool cannot be registered, Setup failed); a contract violation is
	// always an Errorf, so one run reports every violation it finds.
	Fatalf(format string, args ...any)
	TempDir() string
	Cleanup(func())
}

var _ TB = (*testing.T)(nil)

// Case is one call of the tool under test.
type Case struct {
	// Name names the case in subtests and failure messages.
	Name string
	// Args are the call's JSON arguments, an object.
	Args string
	// Setup prepares a fresh Env before each run of the case: files in Workspace, a
	// git repository, doubles wired to Effects, credentials. It runs once per checked
	// property, each time on a new workspace and a new database, so it must build
	// everything from scratch.
	Setup func(t TB, env *Env)
	// Observe, when set, snapshots everything the tool could have changed. By default
	// it is [WorkspaceState] of env.Workspace. Effects recorded through env.Effects are
	// always added to the snapshot.
	Observe func(t TB, env *Env) State
	// WantFailure is the ToolFailure code the tool is expected to report for these
	// arguments ("" means the call is expected to succeed). A case that expects a
	// failure still has to keep every contract: a failure is recorded and replayed, and
	// whatever the tool changed before failing is held to the watermark rule.
	WantFailure string
	// ResumeAnswer, for a control tool that suspends (RT-11), is the JSON answer the
	// suite resumes the call with, after which the call must replay that answer.
	// Without it a suspended call is only checked not to run again.
	ResumeAnswer string
}

// Env is what one run of a case works with. The suite fills it with defaults before
// Setup runs; Setup may change any field.
type Env struct {
	// Workspace is the run's workspace (tc.Workspace()): a new empty directory.
	Workspace string
	// Effects records what the tool did through the doubles the author wired to it.
	Effects *Effects
	// Principal is the caller. By default it holds exactly the tool's required scopes.
	Principal runtime.Principal
	// Credentials are what tc.Credentials() resolves, by name.
	Credentials map[string]string
	// Target is tc.Target().
	Target string
}

// Run checks every case against tool, one subtest per case (see [Check]), each property
// on a new database of db (tooltestsqlite.TempFile: a SQLite file in a temporary
// directory).
func Run(t *testing.T, db NewDatabase, tool runtime.Tool, cases ...Case) {
	t.Helper()
	if tool == nil || tool.Spec() == nil {
		t.Fatal("tooltest: Run needs a tool with a spec")
	}
	if len(cases) == 0 {
		t.Fatalf("tooltest: %s: Run needs at least one case", tool.Spec().Name)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) { Check(t, db, tool, c) })
	}
}

// Check runs the contract checks of one case, each on a fresh workspace and a fresh
// database:
//
//  1. the watermark: what the tool changes, it changes after MarkEffectSent (non_idempotent
//     and conditionally_idempotent tools), it marks before returning success (RT-13), and
//     it changes nothing if its side_effect is none or read;
//  2. replay at step 8: the same call again returns the recorded outcome without
//     executing, through this pipeline and through a second one over the same database;
//  3. a failed watermark sends no effect (tools whose class needs a watermark): once with
//     a store error, once with a lost lease.
func Check(t TB, db NewDatabase, tool runtime.Tool, c Case) {
	t.Helper()
	if db == nil {
		t.Fatalf("tooltest: Check needs a NewDatabase: tooltestsqlite.TempFile for SQLite")
	}
	s := &suite{t: t, db: db, tool: tool, spec: tool.Spec(), c: c}
	s.name = fmt.Sprintf("tooltest: %s, case %q", s.spec.Name, c.Name)
	if c.Args != "" && !json.Valid([]byte(c.Args)) {
		t.Fatalf("%s: Args is not valid JSON: %s", s.name, c.Args)
	}
	s.checkWatermarkAndReplay()
	if s.spec.Idempotency.NeedsWatermark() {
		s.checkFailedWatermark(errStoreDown)
		s.checkFailedWatermark(errLeaseLost)
	}
}

type suite struct {
	t    TB
	db   NewDatabase
	tool runtime.Tool
	spec *runtime.ToolSpec
	c    Case
	name string
}

func (s *suite) args() string {
	if s.c.Args == "" {
		return "{}"
	}
	return s.c.Args
}

// newEnv builds a fresh environment and runs the case's Setup on it.
func (s *suite) newEnv() *Env {
	env := &Env{
		Workspace:   s.t.TempDir(),
		Effects:     &Effects{},
		Principal:   runtime.Principal{ID: DefaultCaller, Tenant: DefaultTenant, Scopes: slices.Clone(s.spec.RequiredScopes)},
		Credentials: map[string]string{},
	}
	if s.c.Setup != nil {
		s.c.Setup(s.t, env)
	}
	return env
}

// observe snapshots env: the case's Observe (or the workspace) plus the recorded effects.
func (s *suite) observe(env *Env) State {
	s.t.Helper()
	var st State
	if s.c.Observe != nil {
		st = State{}
		for k, v := range s.c.Observe(s.t, env) {
			st[k] = v
		}
	} else {
		var err error
		if st, err = WorkspaceState(env.Workspace); err != nil {
			s.t.Fatalf("%s: %v", s.name, err)
		}
	}
	env.Effects.state(st)
	return st
}

// newWorker is the Worker one run of the case makes its calls through: a new
// database, the case's workspace, credentials and caller.
func (s *suite) newWorker(env *Env) *Worker {
	s.t.Helper()
	return NewWorker(s.t, s.tool, WorkerOptions{
		Database:  s.db(s.t),
		Principal: env.Principal, Approver: runtime.Principal{ID: DefaultApprover},
		Workspace: env.Workspace, Credentials: env.Credentials, Target: env.Target,
	})
}

// suiteCallID is the call id of every call the suite makes.
const suiteCallID = "tooltest-call-1"

// call is the suite's call of the tool with args: always the same call (run, step and
// call id), so that every repetition of it has the first one's key.
func (s *suite) call(w *Worker, args string, opts ...CallOption) Result {
	s.t.Helper()
	return w.Call(context.Background(), args, append([]CallOption{CallID(suiteCallID)}, opts...)...)
}

// checkRan reports a call the pipeline refused before running the tool: the suite
// proves nothing about a tool that never ran, so that is a failure of the case.
func (s *suite) checkRan(r Result, what string) bool {
	s.t.Helper()
	if !r.Executed {
		s.t.Errorf("%s: %s: the pipeline never ran the tool (outcome %s/%s); the contract can only be checked on a call that runs",
			s.name, what, r.Outcome.Status, r.Outcome.ReasonCode)
		return false
	}
	return true
}

// checkOutcome compares the first outcome with what the case expects.
func (s *suite) checkOutcome(r Result) {
	s.t.Helper()
	o := r.Outcome
	_, _, res, err := r.state.toolReturn()
	switch {
	case s.c.WantFailure == "" && o.Status != runtime.OutcomeSucceeded:
		s.t.Errorf("%s: outcome %s/%s%s, want success", s.name, o.Status, o.ReasonCode, describeToolReturn(res, err))
	case s.c.WantFailure != "" && (res.OK || res.Failure == nil || res.Failure.Code != s.c.WantFailure):
		s.t.Errorf("%s: the tool returned%s, want the failure %s", s.name, describeToolReturn(res, err), s.c.WantFailure)
	case s.c.WantFailure != "" && (o.Status != runtime.OutcomeFailed || o.ReasonCode != runtime.ReasonToolFailure && o.ReasonCode != runtime.ReasonToolFailureRetryable):
		s.t.Errorf("%s: outcome %s/%s, want failed/tool_failure for the tool's failure %s", s.name, o.Status, o.ReasonCode, s.c.WantFailure)
	}
}

func describeToolReturn(res runtime.ToolResult, err error) string {
	switch {
	case err != nil:
		return fmt.Sprintf(" (the tool returned the error %q)", err.Error())
	case res.Failure != nil:
		return fmt.Sprintf(" (the tool reported the failure %s: %s)", res.Failure.Code, res.Failure.Message)
	case res.OK:
		return " (the tool reported success)"
	}
	return " (the tool returned OK false without a failure)"
}

// checkWatermarkAndReplay is properties 1 and 2, on one environment.
func (s *suite) checkWatermarkAndReplay() {
	s.t.Helper()
	env := s.newEnv()
	w := s.newWorker(env)

	before := s.observe(env)
	var atMark State
	r := s.call(w, s.args(), withMarkHook(func() error {
		if atMark == nil {
			atMark = s.observe(env)
		}
		return nil
	}))
	first := r.Outcome
	after := s.observe(env)
	if r.Held {
		s.t.Logf("%s: the call was held for approval; the suite approved it as %s", s.name, DefaultApprover)
	}
	if !s.checkRan(r, "first call") {
		return
	}
	s.checkOutcome(r)
	_, marked, res, _ := r.state.toolReturn()
	askedForMark := r.state.markRequests() > 0

	switch {
	case s.spec.Idempotency.NeedsWatermark():
		if askedForMark {
			if d := atMark.Diff(before); len(d) > 0 {
				s.t.Errorf("%s: changed before the watermark: at the instant MarkEffectSent was called, %s; "+
					"a %s tool must leave no mark before MarkEffectSent (Prepare only looks, Commit acts)",
					s.name, strings.Join(d, "; "), s.spec.Idempotency)
			}
		}
		if !marked {
			if first.Status == runtime.OutcomeSucceeded || res.OK {
				s.t.Errorf("%s: returned success without calling MarkEffectSent (RT-13): a %s tool must mark the watermark immediately before its effect",
					s.name, s.spec.Idempotency)
			}
			if d := after.Diff(before); len(d) > 0 {
				s.t.Errorf("%s: changed the world without ever marking the watermark: %s", s.name, strings.Join(d, "; "))
			}
		}
	case s.spec.SideEffect == runtime.SideEffectNone || s.spec.SideEffect == runtime.SideEffectRead:
		if d := after.Diff(before); len(d) > 0 {
			s.t.Errorf("%s: declares side_effect %s but changed: %s", s.name, s.spec.SideEffect, strings.Join(d, "; "))
		}
	}
	// An idempotent write tool may change the world before or after marking: a retry
	// of it is always safe (RT-4), so the watermark decides nothing for it.

	if first.Suspended != nil {
		s.checkSuspendedReplay(w, env, first, after)
		return
	}
	s.checkReplay(w, env, first, after, "the same pipeline")
	// A second worker (a new pipeline and registry over a second handle on the same
	// database) must find the recorded outcome too: the dedupe lives in the store.
	s.checkReplay(w.Reopen(), env, first, after, "a second pipeline over the same database")
}

// checkReplay makes the first call again with reordered keys and changed whitespace.
func (s *suite) checkReplay(w *Worker, env *Env, first runtime.Outcome, after State, via string) {
	s.t.Helper()
	args, err := reshuffle(s.args())
	if err != nil {
		s.t.Fatalf("%s: %v", s.name, err)
	}
	r := s.call(w, args)
	again := r.Outcome
	if runs, _, _, _ := r.state.toolReturn(); runs != 0 {
		s.t.Errorf("%s: replay through %s executed the tool again (%d more times); step 8 must return the recorded outcome",
			s.name, via, runs)
	}
	if !again.Replayed {
		s.t.Errorf("%s: replay through %s: Outcome.Replayed is false (outcome %s/%s), want the recorded outcome",
			s.name, via, again.Status, again.ReasonCode)
	}
	if a, b := outcomeJSON(s.t, first), outcomeJSON(s.t, again); !bytes.Equal(a, b) {
		s.t.Errorf("%s: replay through %s returned a different outcome:\nfirst:  %s\nreplay: %s", s.name, via, a, b)
	}
	if d := s.observe(env).Diff(after); len(d) > 0 {
		s.t.Errorf("%s: replay through %s changed: %s", s.name, via, strings.Join(d, "; "))
	}
}

// checkSuspendedReplay is replay for a control call that suspended (RT-11): until it
// is resumed, the same call reports call_suspended and does not run; once resumed, it
// replays the answer.
func (s *suite) checkSuspendedReplay(w *Worker, env *Env, first runtime.Outcome, after State) {
	s.t.Helper()
	if !s.spec.Suspends {
		s.t.Errorf("%s: the call suspended although the spec says suspends: false", s.name)
	}
	if first.Suspended.ResumeToken == "" {
		s.t.Errorf("%s: the call suspended without a resume token", s.name)
		return
	}
	args, err := reshuffle(s.args())
	if err != nil {
		s.t.Fatalf("%s: %v", s.name, err)
	}
	r := s.call(w, args)
	again := r.Outcome
	if runs, _, _, _ := r.state.toolReturn(); runs != 0 {
		s.t.Errorf("%s: the suspended call ran again when repeated (%d more times)", s.name, runs)
	}
	if again.ReasonCode != runtime.ReasonCallSuspended {
		s.t.Errorf("%s: repeating the suspended call: outcome %s/%s, want unavailable/call_suspended", s.name, again.Status, again.ReasonCode)
	}
	if s.c.ResumeAnswer == "" {
		return
	}
	answer, err := runtime.CanonicalJSON([]byte(s.c.ResumeAnswer))
	if err != nil {
		s.t.Fatalf("%s: ResumeAnswer: %v", s.name, err)
	}
	if _, err := w.p.Resume(context.Background(), first.Suspended.ResumeToken, answer); err != nil {
		s.t.Errorf("%s: resume: %v", s.name, err)
		return
	}
	for _, via := range []*Worker{w, w.Reopen()} {
		r := s.call(via, args)
		o := r.Outcome
		if r.Executed {
			s.t.Errorf("%s: the resumed call ran again when repeated", s.name)
		}
		if !o.Replayed || o.Status != runtime.OutcomeSucceeded || o.Result == nil || !bytes.Equal(o.Result.Structured, answer) {
			got := ""
			if o.Result != nil {
				got = string(o.Result.Structured)
			}
			s.t.Errorf("%s: after resume, repeating the call returned %s/%s replayed=%v result %s, want the answer %s replayed",
				s.name, o.Status, o.ReasonCode, o.Replayed, got, answer)
		}
	}
	if d := s.observe(env).Diff(after); len(d) > 0 {
		s.t.Errorf("%s: resuming and replaying changed: %s", s.name, strings.Join(d, "; "))
	}
}

// checkFailedWatermark is property 3: the watermark write fails with failure.
func (s *suite) checkFailedWatermark(failure markFailure) {
	s.t.Helper()
	env := s.newEnv()
	w := s.newWorker(env)
	before := s.observe(env)
	r := s.call(w, s.args(), withMarkHook(func() error { return failure.err }))
	o := r.Outcome
	after := s.observe(env)
	if !s.checkRan(r, "failed-watermark call") {
		return
	}
	_, marked, res, _ := r.state.toolReturn()
	if r.state.markRequests() == 0 {
		// The tool did not get as far as its watermark (an expected failure in Prepare,
		// or a tool that never marks, which the first check reports).
		if o.Status == runtime.OutcomeSucceeded {
			s.t.Errorf("%s: with %s, the call succeeded without asking for the watermark", s.name, failure.what)
		}
		return
	}
	if marked {
		s.t.Errorf("%s: with %s, the ExecContext reports the watermark as marked", s.name, failure.what)
	}
	if d := after.Diff(before); len(d) > 0 {
		s.t.Errorf("%s: with %s, MarkEffectSent returned an error and yet the tool changed: %s; the effect must not be sent when the watermark is not recorded",
			s.name, failure.what, strings.Join(d, "; "))
	}
	if o.Status != runtime.OutcomeUnavailable || o.ReasonCode != failure.want {
		s.t.Errorf("%s: with %s, outcome %s/%s%s, want unavailable/%s: the tool must stop and return MarkEffectSent's error",
			s.name, failure.what, o.Status, o.ReasonCode, describeToolReturn(res, nil), failure.want)
	}
}

// outcomeJSON is the stored form of o, for comparing a replay with the original.
func outcomeJSON(t TB, o runtime.Outcome) []byte {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatalf("tooltest: encode outcome: %v", err)
	}
	return b
}

// reshuffle rewrites a JSON object with its top-level keys in reverse order and
// different whitespace: the same canonical arguments, different bytes.
func reshuffle(args string) (string, error) {
	dec := json.NewDecoder(strings.NewReader(args))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", fmt.Errorf("tooltest: Args must be a JSON object: %s", args)
	}
	type member struct {
		key string
		val json.RawMessage
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", fmt.Errorf("tooltest: Args: %w", err)
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return "", fmt.Errorf("tooltest: Args: %w", err)
		}
		ms = append(ms, member{key: tok.(string), val: val})
	}
	slices.Reverse(ms)
	var b strings.Builder
	b.WriteString("{\n")
	for i, m := range ms {
		key, _ := json.Marshal(m.key)
		var val bytes.Buffer
		if err := json.Indent(&val, m.val, "\t", "   "); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "\t%s :  %s", key, val.Bytes())
		if i < len(ms)-1 {
			b.WriteString(" ,")
		}
		b.WriteString("\n")
	}
	b.WriteString("}  ")
	return b.String(), nil
}
