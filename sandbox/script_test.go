package sandbox_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/sandbox"
)

// tenAndSummary reads ten files and writes a summary: eleven calls.
const tenAndSummary = `
texts = []
for i in range(10):
    o = tools.t.read(path = "f%d.txt" % i)
    if not o.ok:
        fail("read failed: " + o.reason_code)
    texts.append(o.result["text"])
w = tools.t.write(path = "summary.txt", text = "\n".join(texts))
result = {"files": len(texts), "written": w.ok}
`

func TestElevenCallsThenReplay(t *testing.T) {
	h := newHarness(t, time.Minute)
	o, res := h.run("first", tenAndSummary, nil)
	if o.Status != runtime.OutcomeSucceeded {
		t.Fatalf("outcome %s/%s: %v", o.Status, o.ReasonCode, o.ExternalDetail)
	}
	if len(res.Calls) != 11 || h.read.runs.Load() != 10 || h.write.runs.Load() != 1 {
		t.Fatalf("calls %d, reads %d, writes %d; want 11, 10, 1", len(res.Calls), h.read.runs.Load(), h.write.runs.Load())
	}
	for i, c := range res.Calls {
		if c.Ordinal != i+1 || c.CallID != res.ScriptHash+":"+itoa(i+1) || c.Replayed || c.Status != "succeeded" {
			t.Fatalf("call %d: %+v", i, c)
		}
	}
	if res.Result != `{"files":10,"written":true}` || !res.Untrusted {
		t.Fatalf("result %s untrusted %v", res.Result, res.Untrusted)
	}
	// The same script again, in the same run and step, as another call: every call
	// answers from its record and nothing runs.
	o, again := h.run("second", tenAndSummary, nil)
	if o.Status != runtime.OutcomeSucceeded || len(again.Calls) != 11 {
		t.Fatalf("again: %s/%s, %d calls", o.Status, o.ReasonCode, len(again.Calls))
	}
	for _, c := range again.Calls {
		if !c.Replayed {
			t.Fatalf("call %d ran again: %+v", c.Ordinal, c)
		}
	}
	if h.read.runs.Load() != 10 || h.write.runs.Load() != 1 {
		t.Fatalf("after the replay: reads %d, writes %d; want 10, 1", h.read.runs.Load(), h.write.runs.Load())
	}
	// A changed script is a new script: new hash, new calls.
	_, changed := h.run("third", tenAndSummary+"\n# changed\n", nil)
	if changed.ScriptHash == res.ScriptHash || h.write.runs.Load() != 2 {
		t.Fatalf("changed script: hash %s (was %s), writes %d", changed.ScriptHash, res.ScriptHash, h.write.runs.Load())
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestRefusalIsAValue(t *testing.T) {
	h := newHarness(t, time.Minute)
	o, res := h.run("c", `
o = tools.nosuch.tool(x = 1)
result = [o.status, o.reason_code, o.ok, o.retryable, o.message != "", o.call_id != "", o.result]
`, nil)
	if o.Status != runtime.OutcomeSucceeded {
		t.Fatalf("%s/%s %v", o.Status, o.ReasonCode, o.ExternalDetail)
	}
	if res.Result != `["denied","unknown_tool",false,false,true,true,null]` {
		t.Fatalf("result %s", res.Result)
	}
}

func TestBudgets(t *testing.T) {
	h := newHarness(t, time.Minute)
	for _, tc := range []struct {
		name, script string
		extra        map[string]any
		reason       runtime.ReasonCode
		calls        int64
	}{
		{"calls", "for i in range(5):\n    tools.t.write(text = 'w%d' % i)\n", map[string]any{"max_calls": 3}, "script_max_calls", 3},
		{"steps", "x = 0\nwhile True:\n    x += 1\n", map[string]any{"max_steps": 1000}, "script_max_steps", 0},
		{"output", "result = 'x' * 100\n", map[string]any{"max_output_bytes": 16}, "script_output_too_large", 0},
		{"printed", "for i in range(100):\n    print('line')\n", map[string]any{"max_output_bytes": 64}, "script_output_too_large", 0},
		{"error", "result = 1 // 0\n", nil, "script_error", 0},
		{"syntax", "def (:\n", nil, "script_error", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.write.runs.Load()
			o, _ := h.run(tc.name, tc.script, tc.extra)
			if o.ReasonCode != tc.reason {
				t.Fatalf("reason %s/%s, want %s; %v", o.Status, o.ReasonCode, tc.reason, o.ExternalDetail)
			}
			if got := h.write.runs.Load() - before; got != tc.calls {
				t.Fatalf("%d writes ran, want %d (the calls before the budget ran out stay made)", got, tc.calls)
			}
		})
	}
}

// fakeCaller answers every call with success and counts them.
type fakeCaller struct{ n int }

func (f *fakeCaller) CallTrust(ctx context.Context, tool string, args json.RawMessage, trust runtime.Trust) (runtime.Outcome, error) {
	f.n++
	return runtime.Succeeded("h:"+itoa(f.n), runtime.ToolResult{OK: true, Structured: json.RawMessage(`{"n":1}`)}), nil
}
func (f *fakeCaller) ScriptHash() string { return "h" }

func TestWallTime(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the wall time is already spent: the first step ends the script
	res, err := sandbox.Run(ctx, &fakeCaller{}, "while True:\n    pass\n", sandbox.Limits{})
	if err != nil || res.Reason != "script_timeout" {
		t.Fatalf("reason %q err %v", res.Reason, err)
	}
}

// TestUntrustedArgumentHeld: a write whose argument came from an untrusted read is held
// exactly as the same write made directly with untrusted arguments; fed only by a
// system value, it is not.
func TestUntrustedArgumentHeld(t *testing.T) {
	h := newHarness(t, time.Millisecond) // a short bound: the held call is torn down at once
	o, res := h.run("s", `
r = tools.t.read(path = "in.txt")
p = tools.t.publish(text = r.result["text"])
`, nil)
	if o.ReasonCode != "script_suspended" || len(res.Calls) != 0 {
		t.Fatalf("script: %s/%s %v", o.Status, o.ReasonCode, o.ExternalDetail)
	}
	if !strings.Contains(o.ExternalDetail.Text, "2 t.publish unavailable approval_pending") {
		t.Fatalf("detail %s", o.ExternalDetail.Text)
	}
	direct, err := h.p.Execute(context.Background(), runtime.Call{
		Tenant: "t1", Principal: runtime.Principal{ID: "agent", Tenant: "t1"}, SessionID: "s1", RunID: "r1", Step: 2,
		CallID: "direct", Tool: "t.publish", Args: json.RawMessage(`{"text":"content of in.txt"}`),
		ContextTrust: []runtime.Trust{runtime.TrustUser}, ArgumentTrust: runtime.TrustExternalUntrusted,
	})
	if err != nil || direct.ReasonCode != runtime.ReasonApprovalPending {
		t.Fatalf("direct: %s/%s %v", direct.Status, direct.ReasonCode, err)
	}
	if h.pub.runs.Load() != 0 {
		t.Fatal("a held publish ran")
	}
	// Fed by a system value only, the same write is not held.
	o, res = h.run("s2", `
n = tools.t.note(v = "fixed")
p = tools.t.publish(text = n.result["v"])
result = p.ok
`, nil)
	if o.Status != runtime.OutcomeSucceeded || res.Result != "true" || res.Untrusted {
		t.Fatalf("trusted feed: %s/%s %s untrusted=%v", o.Status, o.ReasonCode, res.Result, res.Untrusted)
	}
	// A script carried with untrusted arguments makes every call untrusted (never raised).
	o, _ = h.runTrust("s3", `p = tools.t.publish(text = "x")`, nil, runtime.TrustExternalUntrusted)
	if o.ReasonCode != "script_suspended" {
		t.Fatalf("untrusted script: %s/%s", o.Status, o.ReasonCode)
	}
}

// TestHoldTeardownReexecute: the third call needs approval; past the bound the script
// is torn down; after the approval the same script completes with the first two calls
// replayed and the third run once.
func TestHoldTeardownReexecute(t *testing.T) {
	h := newHarness(t, time.Millisecond)
	script := `
a = tools.t.write(text = "one")
b = tools.t.write(text = "two")
c = tools.t.deploy(target = "prod")
d = tools.t.write(text = "four")
result = [a.ok, b.ok, c.ok, d.ok]
`
	o, _ := h.run("first", script, nil)
	if o.ReasonCode != "script_suspended" {
		t.Fatalf("first: %s/%s %v", o.Status, o.ReasonCode, o.ExternalDetail)
	}
	if h.write.runs.Load() != 2 || h.crit.runs.Load() != 0 {
		t.Fatalf("writes %d deploys %d", h.write.runs.Load(), h.crit.runs.Load())
	}
	if n := h.approveAll(); n != 1 {
		t.Fatalf("%d held calls, want 1", n)
	}
	o, res := h.run("again", script, nil)
	if o.Status != runtime.OutcomeSucceeded || res.Result != "[true,true,true,true]" {
		t.Fatalf("again: %s/%s %v %s", o.Status, o.ReasonCode, o.ExternalDetail, res.Result)
	}
	if !res.Calls[0].Replayed || !res.Calls[1].Replayed || res.Calls[2].Replayed || res.Calls[3].Replayed {
		t.Fatalf("calls %+v", res.Calls)
	}
	if h.write.runs.Load() != 3 || h.crit.runs.Load() != 1 {
		t.Fatalf("writes %d deploys %d; want 3, 1", h.write.runs.Load(), h.crit.runs.Load())
	}
	if got := strings.Join(h.wrote, ","); got != "one,two,four" {
		t.Fatalf("wrote %s", got)
	}
}
