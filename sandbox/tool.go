package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolgen/toolgen/gen"
	"github.com/toolgen/toolgen/runtime"
)

// Domain is the reserved domain the script runner is registered in.
const Domain = "sandbox"

// NewTool returns sandbox.run_script, to be registered with
// runtime.Registry.RegisterAdapter(Domain, ...): only an adapter's tool is handed the
// bridge to the pipeline (runtime.BridgeFrom).
func NewTool() runtime.Tool { return gen.NewSandboxRunScript(runScript{}) }

// runScript implements sandbox.run_script.
type runScript struct{}

func (runScript) Run(ctx context.Context, tc *runtime.ExecContext, args gen.SandboxRunScriptArgs) (gen.SandboxRunScriptResult, error) {
	b, ok := runtime.BridgeFrom(ctx, []byte(args.Script))
	if !ok {
		return gen.SandboxRunScriptResult{}, errors.New("sandbox.run_script runs only as an adapter tool of the pipeline (RegisterAdapter)")
	}
	lim := Limits{MaxCalls: int(args.MaxCalls), MaxSteps: uint64(max(args.MaxSteps, 0)), MaxOutputBytes: int(args.MaxOutputBytes)}
	res, err := Run(ctx, b, args.Script, lim)
	if err != nil {
		return gen.SandboxRunScriptResult{}, err
	}
	if res.Reason != "" {
		// The reason is the outcome's (runtime maps the script_* codes of a sandbox
		// tool); the detail, with the calls made, goes to external_detail.
		return gen.SandboxRunScriptResult{}, runtime.Failf(string(res.Reason), "%s; script %s made %d calls%s", res.Detail, res.Hash, len(res.Calls), callList(res.Calls))
	}
	out := gen.SandboxRunScriptResult{Result: res.Output, Printed: res.Printed, ScriptHash: res.Hash, Untrusted: res.Untrusted,
		Calls: []gen.SandboxRunScriptResultCallsItem{}}
	for _, c := range res.Calls {
		out.Calls = append(out.Calls, gen.SandboxRunScriptResultCallsItem{Ordinal: int64(c.Ordinal), Tool: c.Tool, CallId: c.CallID,
			Status: string(c.Status), ReasonCode: string(c.ReasonCode), Replayed: c.Replayed})
	}
	return out, nil
}

// callList is the calls of a script that ended early, for its external_detail.
func callList(calls []CallRecord) string {
	s := ""
	for _, c := range calls {
		s += fmt.Sprintf("\n%d %s %s %s", c.Ordinal, c.Tool, c.Status, c.ReasonCode)
		if c.Replayed {
			s += " replayed"
		}
	}
	return s
}
