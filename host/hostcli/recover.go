package hostcli

import "fmt"

// runRecover is recover: the recovery pass over the calls of the acting principal's
// tenant whose lease expired (retried, UNCERTAIN or failed crash_loop).
func runRecover(e *env, cmd string, args []string) int {
	var c common
	if pos, err := e.parse(cmd, &c, args); err != nil || len(pos) > 0 {
		return usageErr(e, cmd, "takes no arguments")
	}
	h, err := c.open(e, []string{}, nil)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer h.Close()
	actor, err := c.actor(e, h)
	if err != nil {
		return fail(e, cmd, err)
	}
	rep, err := h.Operator().Recover(e.ctx, actor)
	if err != nil {
		return fail(e, cmd, err)
	}
	if c.json {
		writeJSON(e.stdout, map[string]int{"reclaimed": rep.Reclaimed, "retried": rep.Retried, "uncertain": rep.Uncertain, "failed": rep.Failed,
			"unsuspended": rep.Unsuspended, "skipped_not_registered": rep.SkippedNotRegistered, "skipped_changed": rep.SkippedChanged})
		return ExitOK
	}
	// The skipped calls are left for a worker that has their tool (LIFE-1): never settled here.
	fmt.Fprintf(e.stdout, "reclaimed %d expired lease(s): %d retried, %d UNCERTAIN (run %s uncertain), %d failed crash_loop; "+
		"skipped %d: tool not registered here, %d: definition changed\n",
		rep.Reclaimed, rep.Retried, rep.Uncertain, e.name, rep.Failed, rep.SkippedNotRegistered, rep.SkippedChanged)
	return ExitOK
}
