package hostcli

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/toolgen/toolgen/host"
	"github.com/toolgen/toolgen/internal/textsafe"
)

func runApprovals(e *env, cmd string, args []string) int {
	fs, c := newFlags(cmd, e)
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return usageErr(e, cmd, "takes no arguments")
	}
	op, actor, err := c.openOperator(e)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer op.Close()
	rows, err := op.Approvals(e.ctx, actor)
	if err != nil {
		return fail(e, cmd, err)
	}
	printRows(e, c, rows, "no call waits for an approval", true)
	return ExitOK
}

func runDecide(e *env, cmd string, args []string) int {
	fs, c := newFlags(cmd, e)
	reason := fs.String("reason", "", "why")
	pos, err := parse(fs, args)
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
	op, actor, err := c.openOperator(e)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer op.Close()
	approved := cmd == "approve"
	inv, err := op.Decide(e.ctx, actor, id, approved, *reason)
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
	if c.json {
		writeJSON(e.stdout, map[string]any{"id": id, "tool": inv.Tool, "decision": verb, "by": actor.ID})
	} else {
		fmt.Fprintf(e.stdout, "invocation %d (%s) %s by %s; the caller's retry of the same call finds the decision\n", id, textsafe.Field(inv.Tool), verb, textsafe.Field(actor.ID))
	}
	return ExitOK
}

func runUncertain(e *env, cmd string, args []string) int {
	fs, c := newFlags(cmd, e)
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return usageErr(e, cmd, "takes no arguments")
	}
	op, actor, err := c.openOperator(e)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer op.Close()
	rows, err := op.Uncertain(e.ctx, actor)
	if err != nil {
		return fail(e, cmd, err)
	}
	printRows(e, c, rows, "no UNCERTAIN call waits for review", false)
	return ExitOK
}

func runResolve(e *env, cmd string, args []string) int {
	fs, c := newFlags(cmd, e)
	happened := fs.Bool("happened", false, "the effect happened")
	notHappened := fs.Bool("not-happened", false, "the effect did not happen")
	reason := fs.String("reason", "", "why (recorded in the audit entry)")
	pos, err := parse(fs, args)
	if err != nil {
		return ExitTrouble
	}
	if len(pos) != 1 || *happened == *notHappened {
		return usageErr(e, cmd, "want one ID and exactly one of --happened, --not-happened")
	}
	id, err := parseID(pos[0])
	if err != nil {
		return usageErr(e, cmd, err.Error())
	}
	op, actor, err := c.openOperator(e)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer op.Close()
	inv, err := op.Resolve(e.ctx, actor, id, *happened, *reason)
	switch {
	case errors.Is(err, host.ErrNotFound):
		return refused(e, cmd, fmt.Errorf("no invocation %d in tenant %s", id, actor.Tenant))
	case errors.Is(err, host.ErrNotUncertain):
		return refused(e, cmd, fmt.Errorf("invocation %d is not an unresolved UNCERTAIN call", id))
	case err != nil:
		return fail(e, cmd, err)
	}
	if c.json {
		writeJSON(e.stdout, rowJSON(inv))
	} else {
		fmt.Fprintf(e.stdout, "invocation %d (%s) resolved: %s, by %s\n", id, textsafe.Field(inv.Tool), textsafe.Field(inv.Resolution), textsafe.Field(actor.ID))
	}
	return ExitOK
}

func runAudit(e *env, cmd string, args []string) int {
	fs, c := newFlags(cmd, e)
	session := fs.String("session", "", "only this session")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return usageErr(e, cmd, "takes no arguments besides flags")
	}
	op, actor, err := c.openOperator(e)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer op.Close()
	lines, err := op.Audit(e.ctx, actor, host.AuditFilter{SessionID: *session})
	if err != nil {
		return fail(e, cmd, err)
	}
	if c.json {
		writeJSON(e.stdout, lines)
		return ExitOK
	}
	if len(lines) == 0 {
		fmt.Fprintln(e.stdout, "the audit log is empty")
		return ExitOK
	}
	var tab [][]string
	for _, l := range lines {
		what := l.Status
		if l.Reason != "" {
			what += " " + l.Reason
		}
		if len(l.Detail) > 0 {
			what = string(l.Detail)
		}
		tool := orDash(l.Tool)
		if l.Script != 0 {
			// A call of a script, under its script's line (SCR-1).
			tool = "  └ " + strconv.Itoa(l.Ordinal) + ". " + tool
		}
		tab = append(tab, []string{l.At.UTC().Format(time.RFC3339), l.Kind, orDash(l.Mode), l.Principal, l.SessionID,
			tool, strconv.FormatInt(l.ID, 10), what})
	}
	table(e.stdout, []string{"AT", "KIND", "MODE", "PRINCIPAL", "SESSION", "TOOL", "ID", "WHAT"}, tab)
	return ExitOK
}
