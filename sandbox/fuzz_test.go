package sandbox_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/sandbox"
)

// countingCaller answers every call and counts them; every third result is
// external_untrusted, every fifth call is refused.
type countingCaller struct {
	n     int
	trust []runtime.Trust
	args  []string
}

// mark is in the text of every untrusted result (its "s"): a call whose arguments
// carry it took them from untrusted output (unless the script spells it out, which the
// check recognizes).
const mark = "zq7xk2vw9pj4mr8t"

func (c *countingCaller) CallTrust(_ context.Context, tool string, args json.RawMessage, trust runtime.Trust) (runtime.Outcome, error) {
	c.n++
	c.trust = append(c.trust, trust)
	c.args = append(c.args, string(args))
	id := "h:" + itoa(c.n)
	if c.n%5 == 0 {
		return runtime.NewOutcome(runtime.ReasonPolicyDenied, id), nil
	}
	res := runtime.ToolResult{OK: true, Structured: json.RawMessage(`{"n":1,"s":"x","l":[1,2.5,null,true],"o":{"k":"v"}}`), Trust: runtime.TrustTool}
	if c.n%3 == 0 {
		res.Trust = runtime.TrustExternalUntrusted
		res.Structured = json.RawMessage(`{"n":1,"s":"` + mark + `","l":[1,2.5,null,true],"o":{"k":"` + mark + `"}}`)
	}
	return runtime.Succeeded(id, res), nil
}
func (c *countingCaller) ScriptHash() string { return "h" }

// FuzzScript: arbitrary script text never panics the host (Run's recover turns a panic
// into script_error with "internal error", which fails here) and never escapes its
// budgets: at most MaxCalls calls, output within MaxOutputBytes, and the steps budget
// ends every loop. No wall-clock limit is asserted: the context has none. Carried
// provenance: no call is untrusted before an untrusted result reached the script, and
// a call whose arguments carry an untrusted result's text is untrusted (a dynamic
// check of the analysis's explicit flows; FuzzProvenance fuzzes the analysis itself).
func FuzzScript(f *testing.F) {
	for _, s := range []string{
		"result = 1",
		"x = tools.a.b(k = 1)\nresult = [x.ok, x.status, x.result]",
		"for i in range(100):\n    tools.a.b(i = i)",
		"while True:\n    pass",
		"def f(n):\n    return f(n)\nf(1)",
		"result = 'x' * 100000",
		"print('a' * 1000)",
		"l = []\nl.append(l)\nresult = l",
		"result = json.decode(json.encode({'a': [1, 2]}))",
		"tools.a.b(1)",
		"tools.sandbox.run_script(script = '')",
		"tools()",
		"tools.a.b.c.d(x = 1)",
		"r = tools.a.b()\nresult = r.result['o']['k']",
		"load('x', 'y')",
		"result = 1 // 0",
		"result = float('nan')",
		"result = {1: 2}",
		"result = 2 ** 100",
		"tools.a.b(x = {1: 2})",
		"x = set([1])\nresult = list(x)",
		"a = tools.a.b()\nb = tools.a.b()\nc = tools.a.b()\nl = []\nm = l\nm.append(c.result['s'].upper())\ntools.a.w(x = l)",
		"def f(o):\n    return o.result['o']['k']\nfor i in range(4):\n    o = tools.a.b()\n    tools.a.w(x = f(o) + '!')",
		"t = []\nfor i in range(4):\n    t.append(tools.a.b())\ng = lambda x: [y.result for y in x]\ntools.a.w(v = g(t))",
		"for i in range(3):\n    r = tools.a.b()\ntools.a.w(v = 'const')\ntools.a.w(v = r.result['s'])",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 4096 {
			return
		}
		c := &countingCaller{}
		lim := sandbox.Limits{MaxCalls: 7, MaxSteps: 20000, MaxOutputBytes: 512}
		res, err := sandbox.Run(context.Background(), c, src, lim)
		if err != nil {
			t.Fatalf("store error from a fake caller: %v", err)
		}
		if res.Reason == "script_error" && strings.HasPrefix(res.Detail, "internal error") {
			t.Fatalf("the script panicked the runner: %s", res.Detail)
		}
		if c.n > lim.MaxCalls || len(res.Calls) != c.n {
			t.Fatalf("%d calls made, %d listed, budget %d", c.n, len(res.Calls), lim.MaxCalls)
		}
		if len(res.Output)+len(res.Printed) > lim.MaxOutputBytes {
			t.Fatalf("output %d bytes, budget %d", len(res.Output)+len(res.Printed), lim.MaxOutputBytes)
		}
		if res.Reason == "" && !json.Valid([]byte(res.Output)) {
			t.Fatalf("result is not JSON: %q", res.Output)
		}
		// Carried provenance.
		lower := strings.ToLower(src)
		built := strings.Contains(lower, "\\") || strings.Contains(lower, "chr") || strings.Contains(lower, "%c")
		for i := 0; i+4 <= len(mark); i++ {
			built = built || strings.Contains(lower, mark[i:i+4])
		}
		for i, tr := range c.trust {
			if i < 3 && tr != runtime.TrustSystem {
				t.Fatalf("call %d before any untrusted result carried %s", i+1, tr)
			}
			if !built && strings.Contains(strings.ToLower(c.args[i]), mark) && tr != runtime.TrustExternalUntrusted {
				t.Fatalf("call %d took untrusted text as arguments (%s) but carried %s", i+1, c.args[i], tr)
			}
		}
	})
}
