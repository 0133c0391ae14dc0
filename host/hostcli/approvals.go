package hostcli

import (
	"errors"
	"flag"
	"fmt"

	"github.com/toolgen/toolgen/host"
	"github.com/toolgen/toolgen/internal/textsafe"
)

// runApprovals is approvals: the calls of the acting principal's tenant held for an
// approval, with their arguments.
func runApprovals(e *env, cmd string, args []string) int {
	return runQueue(e, cmd, args, (*host.Operator).Approvals, "no call waits for an approval", true)
}

// decideFlags are the flags of approve and deny.
type decideFlags struct {
	common
	reason string
}

func (f *decideFlags) bind(fs *flag.FlagSet, cmd string) {
	f.common.bind(fs, cmd)
	fs.StringVar(&f.reason, "reason", "", "why")
}

// runDecide is approve ID and deny ID: the decision on a call held for an approval.
func runDecide(e *env, cmd string, args []string) int {
	var f decideFlags
	pos, err := e.parse(cmd, &f, args)
	if err != nil {
		return ExitTrouble
	}
	if len(pos) != 1 {
		return usageErr(e, cmd, "want one invocation ID (see "+e.name+" approvals)")
	}
	id, err := parseID(pos[0])
	if err != nil {
		return usageErr(e, cmd, err.Error())
	}
	op, actor, err := f.openOperator(e)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer op.Close()
	approved := cmd == "approve"
	inv, err := op.Decide(e.ctx, actor, id, approved, f.reason)
	switch {
	case errors.Is(err, host.ErrNotFound):
		return refused(e, cmd, fmt.Errorf("no invocation %d waits for a decision in tenant %s", id, actor.Tenant))
	case errors.Is(err, host.ErrSelfDecision):
		return refused(e, cmd, fmt.Errorf("%w (use --principal)", err))
	case errors.Is(err, host.ErrMissingScope), errors.Is(err, host.ErrNotHeld):
		return refused(e, cmd, err)
	case err != nil:
		return fail(e, cmd, err)
	}
	verb := "denied"
	if approved {
		verb = "approved"
	}
	if f.json {
		writeJSON(e.stdout, map[string]any{"id": id, "tool": inv.Tool, "decision": verb, "by": actor.ID})
	} else {
		fmt.Fprintf(e.stdout, "invocation %d (%s) %s by %s; the caller's retry of the same call finds the decision\n", id, textsafe.Field(inv.Tool), verb, textsafe.Field(actor.ID))
	}
	return ExitOK
}
