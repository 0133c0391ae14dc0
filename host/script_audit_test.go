package host

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/runtime"
)

// TestOperator_ScriptCallsNested (issue 19, SCR-1): the audit view shows a script run
// as one entry with its calls under it, each with its ordinal, in ordinal order; the
// same script submitted again replays and adds no call lines.
func TestOperator_ScriptCallsNested(t *testing.T) {
	ctx := t.Context()
	dir := specRoot(t, map[string]string{"README": "a spec root with no tools of its own\n"})
	h, agent := newAgentHost(t, Config{Dir: dir, Builtins: []string{"identity.whoami", "sandbox.run_script"}})
	args, _ := json.Marshal(map[string]string{"script": "a = tools.identity.whoami()\nb = tools.identity.whoami()\nc = tools.nosuch.tool()\nresult = [a.ok, b.ok, c.reason_code]\n"})
	for _, id := range []string{"first", "again"} {
		o, err := h.Call(ctx, CallRequest{Tool: "sandbox.run_script", Args: args, Principal: agent, SessionID: "s1", CallID: id})
		if err != nil || o.Status != runtime.OutcomeSucceeded {
			t.Fatalf("%s: %v %s/%s %v", id, err, o.Status, o.ReasonCode, o.ExternalDetail)
		}
	}
	lines, err := h.Operator().Audit(ctx, agent, AuditFilter{SessionID: "s1", Kind: "tool_call"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		got = append(got, l.Tool)
	}
	// The unknown tool (ordinal 3) was refused at step 1, which records nothing.
	if len(lines) != 4 || lines[0].Tool != "sandbox.run_script" || lines[0].Script != 0 ||
		lines[1].Script != lines[0].ID || lines[1].Ordinal != 1 || lines[2].Script != lines[0].ID || lines[2].Ordinal != 2 ||
		lines[3].Tool != "sandbox.run_script" || lines[3].Script != 0 {
		t.Fatalf("audit lines %v: %+v", got, lines)
	}

	// The console's audit timeline marks the calls under their script.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.Serve(sctx, ln) }()
	defer func() { cancel(); <-done }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/console/audit?session=s1")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`data-script="1"`, `└ 1.</span> identity.whoami`, `└ 2.</span> identity.whoami`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the console's audit page lacks %q:\n%.3000s", want, page)
		}
	}
}
