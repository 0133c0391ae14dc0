package toolruncli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

func runApprovals(e *env, cmd string, args []string) int {
	fs, c := newFlags(cmd, e)
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return usageErr(e, cmd, "takes no arguments")
	}
	st, err := c.openStore(e)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer st.Close()
	rows, err := st.InvocationList(e.ctx, store.InvocationFilter{Tenant: c.tenant, AwaitingApproval: true})
	if err != nil {
		return fail(e, cmd, err)
	}
	printRows(e, c, rows, "no call waits for an approval")
	return ExitOK
}

// auditLine is one line of the audit view: an audit_log entry, or a tool_call — an
// invocation row, which records the mode that was active (WF-5). Reading tool calls
// from their rows keeps a call's commit budget (RT-3) and cannot disagree with them.
type auditLine struct {
	At        time.Time       `json:"at"`
	Kind      string          `json:"kind"`
	Mode      string          `json:"mode"`
	Principal string          `json:"principal"`
	SessionID string          `json:"session_id"`
	Tool      string          `json:"tool,omitempty"`
	Status    string          `json:"status,omitempty"`
	Reason    string          `json:"reason_code,omitempty"`
	ID        int64           `json:"id"`
	Detail    json.RawMessage `json:"detail,omitempty"`
}

func runAudit(e *env, cmd string, args []string) int {
	fs, c := newFlags(cmd, e)
	session := fs.String("session", "", "only this session")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return usageErr(e, cmd, "takes no arguments besides flags")
	}
	st, err := c.openStore(e)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer st.Close()
	var lines []auditLine
	for after := int64(0); ; {
		page, err := st.AuditList(e.ctx, c.tenant, after, 500)
		if err != nil {
			return fail(e, cmd, err)
		}
		for _, a := range page {
			if *session == "" || a.SessionID == *session {
				lines = append(lines, auditLine{At: a.At, Kind: a.Kind, Mode: a.Mode, Principal: a.Principal,
					SessionID: a.SessionID, Tool: a.Tool, ID: a.ID, Detail: a.Detail})
			}
			after = a.ID
		}
		if len(page) < 500 {
			break
		}
	}
	for after := int64(0); ; {
		rows, err := st.InvocationList(e.ctx, store.InvocationFilter{Tenant: c.tenant, SessionID: *session, AfterID: after, Limit: 500})
		if err != nil {
			return fail(e, cmd, err)
		}
		for _, r := range rows {
			lines = append(lines, auditLine{At: r.CreatedAt, Kind: "tool_call", Mode: r.Mode, Principal: r.Principal,
				SessionID: r.SessionID, Tool: r.Tool, Status: string(r.Status), Reason: r.ReasonCode, ID: r.ID})
			after = r.ID
		}
		if len(rows) < 500 {
			break
		}
	}
	slices.SortStableFunc(lines, func(a, b auditLine) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.ID, b.ID))
	})
	if c.json {
		if lines == nil {
			lines = []auditLine{}
		}
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
		tab = append(tab, []string{l.At.UTC().Format(time.RFC3339), l.Kind, orDash(l.Mode), l.Principal, l.SessionID,
			orDash(l.Tool), strconv.FormatInt(l.ID, 10), what})
	}
	table(e.stdout, []string{"AT", "KIND", "MODE", "PRINCIPAL", "SESSION", "TOOL", "ID", "WHAT"}, tab)
	return ExitOK
}
