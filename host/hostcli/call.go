package hostcli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/toolgen/toolgen/host"
	"github.com/toolgen/toolgen/internal/textsafe"
	"github.com/toolgen/toolgen/runtime"
)

// callFlags are call's flags.
type callFlags struct {
	common
	session, run, callID, proto, mode string
	step                              int
	hold                              time.Duration
}

func (f *callFlags) bind(fs *flag.FlagSet, cmd string) {
	f.common.bind(fs, cmd)
	fs.StringVar(&f.session, "session", "", `session id (default "cli", a session that pins no catalog: every call sees the current one)`)
	fs.StringVar(&f.run, "run", "", "run id (default: the session id)")
	fs.IntVar(&f.step, "step", 0, "step number")
	fs.StringVar(&f.callID, "call-id", "", "call id (default: derived from the tool and its arguments)")
	fs.DurationVar(&f.hold, "hold", 0, "how long a call held for approval waits (default 5m)")
	fs.StringVar(&f.proto, "protocol", "", "protocol name: the call is gated by the session's mode (WF-3, WF-4)")
	fs.StringVar(&f.mode, "mode", "", "pin the call to this mode of the protocol")
}

// runCall is call TOOL [JSON|-]: one call through the pipeline, as the acting principal;
// it exits 0 only when the call succeeded.
func runCall(e *env, cmd string, args []string) int {
	var f callFlags
	pos, err := e.parse(cmd, &f, args)
	if err != nil {
		return ExitTrouble
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usageErr(e, cmd, "want TOOL and optional JSON arguments")
	}
	tool, raw := pos[0], "{}"
	if len(pos) == 2 {
		raw = pos[1]
	}
	if raw == "-" {
		b, err := io.ReadAll(e.stdin)
		if err != nil {
			return fail(e, cmd, err)
		}
		raw = string(b)
	}
	servers := []string{}
	if server, ok := upstreamOf(tool); ok {
		servers = []string{server}
	}
	h, err := f.open(e, servers, func(hc *host.Config) {
		hc.Protocol, hc.Mode, hc.ApprovalHold = f.proto, f.mode, f.hold
	})
	if err != nil {
		return fail(e, cmd, err)
	}
	defer h.Close()
	p, err := f.actor(e, h)
	if err != nil {
		return fail(e, cmd, err)
	}
	o, err := h.Call(e.ctx, host.CallRequest{Tool: tool, Args: json.RawMessage(raw), Principal: p,
		SessionID: f.session, RunID: f.run, Step: f.step, CallID: f.callID})
	if err != nil {
		return fail(e, cmd, err)
	}
	if f.json {
		if err := writeJSON(e.stdout, o); err != nil {
			return fail(e, cmd, err)
		}
	} else {
		printOutcome(e.stdout, o)
	}
	if o.Status != runtime.OutcomeSucceeded {
		return ExitFailed
	}
	return ExitOK
}

// upstreamOf is the server of an mcp.<server>.<tool> name.
func upstreamOf(tool string) (string, bool) {
	rest, ok := strings.CutPrefix(tool, "mcp.")
	if !ok {
		return "", false
	}
	server, _, ok := strings.Cut(rest, ".")
	return server, ok
}

// printOutcome prints an outcome for a person. A tool's content and a remote system's
// detail are text someone else wrote: they keep their lines but lose every control
// character a terminal would obey (textsafe.Text); ids are escaped as fields.
func printOutcome(w io.Writer, o runtime.Outcome) {
	f, t := textsafe.Field, textsafe.Text
	replay := ""
	if o.Replayed {
		replay = " (recorded outcome, not executed again)"
	}
	if o.Status != runtime.OutcomeSucceeded {
		fmt.Fprintf(w, "%s %s: %s%s\n", f(string(o.Status)), f(string(o.ReasonCode)), t(o.Message), replay)
		if o.Retryable {
			fmt.Fprintln(w, "retryable: yes")
		}
		if o.ExternalDetail != nil {
			fmt.Fprintf(w, "external_detail (%s):\n%s\n", f(string(o.ExternalDetail.Trust)), t(o.ExternalDetail.Text))
		}
		fmt.Fprintf(w, "call_id: %s\n", f(o.CallID))
		printReplayHint(w, o)
		return
	}
	fmt.Fprintf(w, "succeeded%s\n", replay)
	if o.Suspended != nil {
		fmt.Fprintf(w, "suspended: resume token %s\n", f(o.Suspended.ResumeToken))
	}
	if o.Result != nil {
		for _, it := range o.Result.Content {
			fmt.Fprintf(w, "[%s] %s\n", f(string(it.Trust)), t(it.Text))
		}
		if len(o.Result.Structured) > 0 && len(o.Result.Content) == 0 {
			fmt.Fprintf(w, "%s\n", t(string(o.Result.Structured)))
		}
	}
	fmt.Fprintf(w, "call_id: %s\n", f(o.CallID))
	printReplayHint(w, o)
}

// printReplayHint says, under a replayed outcome, how to make the call anew (SES-2).
func printReplayHint(w io.Writer, o runtime.Outcome) {
	if o.Replayed {
		fmt.Fprintln(w, "(the same call again is its retry: to make it anew, give it a new --call-id)")
	}
}
