package tools

import (
	"context"
	"strings"

	"github.com/toolgen/toolgen/gen"
	"github.com/toolgen/toolgen/runtime"
)

// protocolDispatch implements protocol.dispatch, a control tool that asks to move the
// run to another mode of the active protocol. A tool cannot reach the protocol state
// (RT-2), so it only checks the request and echoes the mode: the protocol runtime acts
// on a successful call by checking that the mode exists, switching the session's
// current_mode and writing the dispatch_request audit entry with the active mode (WF-5).
// An unknown mode is refused there, not here.
type protocolDispatch struct{}

func (protocolDispatch) Run(ctx context.Context, tc *runtime.ExecContext, args gen.ProtocolDispatchArgs) (gen.ProtocolDispatchResult, error) {
	// The schema already checked the grammar of mode; a blank reason would leave the
	// audit log with nothing to say why the run moved on.
	if strings.TrimSpace(args.Reason) == "" {
		return gen.ProtocolDispatchResult{}, runtime.Failf("missing_reason", "give the reason the run should move to mode %s", args.Mode)
	}
	return gen.ProtocolDispatchResult{Mode: args.Mode}, nil
}
