package hostcli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/toolgen/toolgen/host"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// runQueue prints one of the review queues of the acting principal's tenant (list:
// the operator service's Approvals or Uncertain), or empty when it holds no call;
// withArgs shows the calls' arguments.
func runQueue(e *env, cmd string, args []string, list func(*host.Operator, context.Context, runtime.Principal) ([]*store.Invocation, error),
	empty string, withArgs bool) int {
	var c common
	if pos, err := e.parse(cmd, &c, args); err != nil || len(pos) > 0 {
		return usageErr(e, cmd, "takes no arguments")
	}
	op, actor, err := c.openOperator(e)
	if err != nil {
		return fail(e, cmd, err)
	}
	defer op.Close()
	rows, err := list(op, e.ctx, actor)
	if err != nil {
		return fail(e, cmd, err)
	}
	printRows(e, &c, rows, empty, withArgs)
	return ExitOK
}

// invocationJSON is how the review commands print a row: classification and ids,
// never the outcome's text; the arguments only for a call waiting for an approval,
// which the approver must see to decide (issue 15, point 10).
type invocationJSON struct {
	ID           int64      `json:"id"`
	Tool         string     `json:"tool"`
	Status       string     `json:"status"`
	ReasonCode   string     `json:"reason_code,omitempty"`
	Decision     string     `json:"decision,omitempty"`
	Principal    string     `json:"principal"`
	Tenant       string     `json:"tenant"`
	SessionID    string     `json:"session_id"`
	RunID        string     `json:"run_id"`
	Step         int        `json:"step"`
	CallID       string     `json:"call_id"`
	Mode         string     `json:"mode,omitempty"`
	Key          string     `json:"key"`
	EffectSentAt *time.Time `json:"effect_sent_at,omitempty"`
	Resolution   string     `json:"resolution,omitempty"`
	ResolvedBy   string     `json:"resolved_by,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	// Args are the call's canonical arguments: approvals only.
	Args json.RawMessage `json:"args,omitempty"`
}

func rowJSON(inv *store.Invocation) invocationJSON {
	return invocationJSON{
		ID: inv.ID, Tool: inv.Tool, Status: string(inv.Status), ReasonCode: inv.ReasonCode, Decision: inv.Decision,
		Principal: inv.Principal, Tenant: inv.Tenant, SessionID: inv.SessionID, RunID: inv.RunID, Step: inv.Step,
		CallID: inv.CallID, Mode: inv.Mode, Key: inv.Key, EffectSentAt: inv.EffectSentAt,
		Resolution: inv.Resolution, ResolvedBy: inv.ResolvedBy, CreatedAt: inv.CreatedAt,
	}
}

func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// printRows prints rows as a table (or JSON); withArgs adds each call's arguments, cut
// to maxArgsShown bytes in the table (the JSON has them whole).
func printRows(e *env, c *common, rows []*store.Invocation, empty string, withArgs bool) {
	if c.json {
		out := make([]invocationJSON, 0, len(rows))
		for _, r := range rows {
			j := rowJSON(r)
			if withArgs {
				j.Args = r.Args
			}
			out = append(out, j)
		}
		writeJSON(e.stdout, out)
		return
	}
	if len(rows) == 0 {
		fmt.Fprintln(e.stdout, empty)
		return
	}
	header := []string{"ID", "TOOL", "STATUS", "PRINCIPAL", "SESSION", "CALL", "MODE", "WATERMARK", "CREATED"}
	if withArgs {
		header = append(header, "ARGS")
	}
	var tab [][]string
	for _, r := range rows {
		row := []string{strconv.FormatInt(r.ID, 10), r.Tool, string(r.Status), r.Principal, r.SessionID, r.CallID,
			orDash(r.Mode), stamp(r.EffectSentAt), r.CreatedAt.UTC().Format(time.RFC3339)}
		if withArgs {
			row = append(row, shortArgs(r.Args))
		}
		tab = append(tab, row)
	}
	table(e.stdout, header, tab)
}

// maxArgsShown bounds the arguments a table shows of one call.
const maxArgsShown = 160

// shortArgs is a call's canonical arguments for a table cell, cut on a character
// boundary (the cell is escaped by table).
func shortArgs(args json.RawMessage) string {
	s := string(args)
	if len(s) <= maxArgsShown {
		return orDash(s)
	}
	cut := maxArgsShown
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
