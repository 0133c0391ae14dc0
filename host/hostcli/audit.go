package hostcli

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/toolgen/toolgen/host"
)

// auditFlags are audit's flags.
type auditFlags struct {
	common
	session string
}

func (f *auditFlags) bind(fs *flag.FlagSet, cmd string) {
	f.common.bind(fs, cmd)
	fs.StringVar(&f.session, "session", "", "only this session")
}

// runAudit is audit: the audit log of the acting principal's tenant.
func runAudit(e *env, cmd string, args []string) int {
	var f auditFlags
	if pos, err := e.parse(cmd, &f, args); err != nil || len(pos) > 0 {
		return usageErr(e, cmd, "takes no arguments besides flags")
	}
	op, actor, err := f.openOperator(e)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer op.Close()
	lines, err := op.Audit(e.ctx, actor, host.AuditFilter{SessionID: f.session})
	if err != nil {
		return fail(e, cmd, err)
	}
	if f.json {
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
