package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/toolgen/toolgen/internal/textsafe"
)

type listView struct {
	Calls []callView
	Hold  time.Duration
}

func (c *Console) held(w http.ResponseWriter, r *http.Request, s *session) {
	invs, err := c.o.Operator.Approvals(r.Context(), s.principal)
	if err != nil {
		c.o.Logger.Error("console: the held calls", "err", err)
		c.fail(w, r, s, http.StatusInternalServerError, "The held calls could not be read.")
		return
	}
	d := c.base(r, s, "Held calls", "held")
	d.Flash = flash(r)
	v := listView{Hold: c.o.ApprovalHold}
	for _, inv := range invs {
		v.Calls = append(v.Calls, c.view(r, s, inv, true))
	}
	d.Body = v
	c.render(w, r, http.StatusOK, "held", d)
}

func (c *Console) uncertain(w http.ResponseWriter, r *http.Request, s *session) {
	invs, err := c.o.Operator.Uncertain(r.Context(), s.principal)
	if err != nil {
		c.o.Logger.Error("console: the UNCERTAIN queue", "err", err)
		c.fail(w, r, s, http.StatusInternalServerError, "The UNCERTAIN queue could not be read.")
		return
	}
	d := c.base(r, s, "UNCERTAIN calls", "uncertain")
	d.Flash = flash(r)
	var v listView
	for _, inv := range invs {
		v.Calls = append(v.Calls, c.view(r, s, inv, false))
	}
	d.Body = v
	c.render(w, r, http.StatusOK, "uncertain", d)
}

func (c *Console) invocation(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := invocationID(r)
	if !ok {
		c.fail(w, r, s, http.StatusNotFound, "There is no such call in your tenant.")
		return
	}
	inv, err := c.o.Operator.Invocation(r.Context(), s.principal, id)
	if err != nil {
		code, msg := status(err)
		if code == http.StatusInternalServerError {
			c.o.Logger.Error("console: an invocation", "invocation", id, "err", err)
		}
		c.fail(w, r, s, code, msg)
		return
	}
	d := c.base(r, s, "Call "+r.PathValue("id"), "")
	d.Body = c.view(r, s, inv, true)
	c.render(w, r, http.StatusOK, "invocation", d)
}

// auditView is the audit page: the filter as given, and the lines kept.
type auditView struct {
	Filter  auditForm
	Lines   []auditLineView
	Omitted int
	Problem string
}

type auditForm struct {
	Tenant, Session, Run, Tool, Mode, Decision, Kind string
}

type auditLineView struct {
	At                                  time.Time
	Kind, Mode, Principal, Session, Run string
	Tool, Status, Reason, Decision      string
	Invocation                          int64
	Detail                              string
	Script                              int64 // a script's call: the script run's invocation id
	Ordinal                             int   // and the call's ordinal in it
}

// MaxAuditLines is how many lines the audit page shows (the latest).
const MaxAuditLines = 1000

func (c *Console) audit(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	form := auditForm{Tenant: q.Get("tenant"), Session: q.Get("session"), Run: q.Get("run"), Tool: q.Get("tool"),
		Mode: q.Get("mode"), Decision: q.Get("decision"), Kind: q.Get("kind")}
	d := c.base(r, s, "Audit", "audit")
	v := auditView{Filter: form}
	for name, val := range map[string]string{"tenant": form.Tenant, "session": form.Session, "run": form.Run,
		"tool": form.Tool, "mode": form.Mode, "decision": form.Decision, "kind": form.Kind} {
		if val != "" && textsafe.CheckID(val, 256) != nil {
			v.Problem = "The " + name + " filter is not an id (" + textsafe.IDAlphabet + ", at most 256 bytes)."
		}
	}
	if v.Problem == "" && (form.Tenant == "" || form.Tenant == s.principal.Tenant) {
		lines, err := c.o.Operator.Audit(r.Context(), s.principal, AuditFilter{SessionID: form.Session, RunID: form.Run,
			Tool: form.Tool, Mode: form.Mode, Decision: form.Decision, Kind: form.Kind})
		if err != nil {
			c.o.Logger.Error("console: the audit timeline", "err", err)
			c.fail(w, r, s, http.StatusInternalServerError, "The audit timeline could not be read.")
			return
		}
		if len(lines) > MaxAuditLines {
			v.Omitted = len(lines) - MaxAuditLines
			lines = lines[len(lines)-MaxAuditLines:]
		}
		for _, l := range lines {
			lv := auditLineView{At: l.At, Kind: l.Kind, Mode: l.Mode, Principal: l.Principal, Session: l.SessionID,
				Run: l.RunID, Tool: l.Tool, Status: l.Status, Reason: l.Reason, Decision: l.Decision, Invocation: l.Invocation,
				Script: l.Script, Ordinal: l.Ordinal}
			if len(l.Detail) > 0 {
				lv.Detail = compactDetail(l.Detail)
			}
			v.Lines = append(v.Lines, lv)
		}
	} else if v.Problem == "" {
		v.Problem = "You see the audit timeline of your own tenant, " + s.principal.Tenant + ", only."
	}
	d.Body = v
	c.render(w, r, http.StatusOK, "audit", d)
}

// compactDetail is an audit entry's detail as one line of JSON, bounded.
func compactDetail(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		t, _ := excerpt(string(raw))
		return t
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	t, n := excerpt(strings.TrimSuffix(b.String(), "\n"))
	if n > 0 {
		t += " …"
	}
	return t
}
