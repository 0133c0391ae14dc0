package hostcli

import (
	"errors"
	"flag"
	"fmt"

	"github.com/toolgen/toolgen/host"
	"github.com/toolgen/toolgen/internal/textsafe"
)

// runUncertain is uncertain: the UNCERTAIN calls of the acting principal's tenant that
// wait for a person to say whether their effect happened.
func runUncertain(e *env, cmd string, args []string) int {
	return runQueue(e, cmd, args, (*host.Operator).Uncertain, "no UNCERTAIN call waits for review", false)
}

// resolveFlags are resolve's flags.
type resolveFlags struct {
	common
	happened, notHappened bool
	reason                string
}

func (f *resolveFlags) bind(fs *flag.FlagSet, cmd string) {
	f.common.bind(fs, cmd)
	fs.BoolVar(&f.happened, "happened", false, "the effect happened")
	fs.BoolVar(&f.notHappened, "not-happened", false, "the effect did not happen")
	fs.StringVar(&f.reason, "reason", "", "why (recorded in the audit entry)")
}

// runResolve is resolve ID --happened | --not-happened: a person's answer for an
// UNCERTAIN call.
func runResolve(e *env, cmd string, args []string) int {
	var f resolveFlags
	pos, err := e.parse(cmd, &f, args)
	if err != nil {
		return ExitTrouble
	}
	if len(pos) != 1 || f.happened == f.notHappened {
		return usageErr(e, cmd, "want one ID and exactly one of --happened, --not-happened")
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
	inv, err := op.Resolve(e.ctx, actor, id, f.happened, f.reason)
	switch {
	case errors.Is(err, host.ErrNotFound):
		return refused(e, cmd, fmt.Errorf("no invocation %d in tenant %s", id, actor.Tenant))
	case errors.Is(err, host.ErrNotUncertain):
		return refused(e, cmd, fmt.Errorf("invocation %d is not an unresolved UNCERTAIN call", id))
	case err != nil:
		return fail(e, cmd, err)
	}
	if f.json {
		writeJSON(e.stdout, rowJSON(inv))
	} else {
		fmt.Fprintf(e.stdout, "invocation %d (%s) resolved: %s, by %s\n", id, textsafe.Field(inv.Tool), textsafe.Field(inv.Resolution), textsafe.Field(actor.ID))
	}
	return ExitOK
}
