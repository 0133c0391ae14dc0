package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// pageData is what every page template receives.
type pageData struct {
	Title string
	Nav   string // the current section: held, uncertain, audit
	// Who is signed in; nil on the sign-in pages.
	Who  *whoView
	CSRF string
	// LastEventID is the event stream's position when the page was rendered: the
	// script follows the stream from there. Empty: the page is not live.
	LastEventID string
	Flash       string
	Error       string
	Refresh     string // a same-site navigation to make at once (after an OIDC sign-in)
	Body        any
}

type whoView struct{ ID, Tenant, Via string }

// pages are the parsed templates, one set per page (each defines "content").
type pages map[string]*template.Template

var pageNames = []string{"held", "uncertain", "audit", "invocation", "signin", "signedin", "error"}

func parsePages() (pages, error) {
	funcs := template.FuncMap{
		"utc":      func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"iso":      func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
		"ago":      ago,
		"causeOf":  causeText,
		"trustCls": func(t string) string { return "trust-" + strings.ReplaceAll(t, "_", "-") },
		"statusCls": func(s string) string {
			return "status-" + strings.ToLower(s)
		},
		"depth": func(d int) string { return fmt.Sprintf("d%d", min(d, 12)) },
		"pair":  func(c any, csrf string) map[string]any { return map[string]any{"C": c, "CSRF": csrf} },
	}
	out := pages{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// render writes page name. A request with X-Console-Partial (the script's live
// refresh) gets the page's live region only.
func (c *Console) render(w http.ResponseWriter, r *http.Request, code int, name string, d pageData) {
	t := c.pages[name]
	tmpl := "layout"
	if r.Header.Get("X-Console-Partial") == "1" && t.Lookup("live") != nil {
		tmpl = "live"
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, tmpl, d); err != nil {
		c.o.Logger.Error("console: rendering a page", "page", name, "err", err)
		http.Error(w, "console: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(b.Bytes())
}

// fail renders the error page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, code int, msg string) {
	d := pageData{Title: http.StatusText(code), Error: msg}
	if s != nil {
		d.Who = who(s)
		d.CSRF = s.csrf
	}
	c.render(w, r, code, "error", d)
}

func who(s *session) *whoView {
	return &whoView{ID: s.principal.ID, Tenant: s.principal.Tenant, Via: s.via}
}

// base is the page data of a signed-in page.
func (c *Console) base(r *http.Request, s *session, title, nav string) pageData {
	d := pageData{Title: title, Nav: nav, Who: who(s), CSRF: s.csrf}
	if cur, err := c.tail.get(r.Context()); err == nil {
		d.LastEventID = cur.String()
	} else {
		c.o.Logger.Warn("console: the event stream's position", "err", err)
	}
	return d
}

// flash is the message after a decision (from a fixed set: nothing of the URL is
// echoed but the number).
func flash(r *http.Request) string {
	q := r.URL.Query()
	var id int64
	fmt.Sscan(q.Get("id"), &id)
	if id <= 0 {
		return ""
	}
	switch q.Get("done") {
	case "approved":
		return fmt.Sprintf("Approved call %d: it runs now, or when its caller retries.", id)
	case "denied":
		return fmt.Sprintf("Denied call %d: it ends denied/approval_denied.", id)
	case "resolved-happened":
		return fmt.Sprintf("Resolved call %d: its effect happened; it is settled as a success.", id)
	case "resolved-not-happened":
		return fmt.Sprintf("Resolved call %d: its effect did not happen; it runs once more, at its caller's retry or the next recovery pass.", id)
	}
	return ""
}

// ago is a duration for people: "3m 20s", "2h 5m", "4d 1h".
func ago(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

// causeText names the check of POL-1 that held a call, for people.
func causeText(cause, rule string) string {
	switch cause {
	case runtime.HoldPolicyRule:
		return "operator rule " + rule + " (policy.yaml)"
	case runtime.HoldApprovalWhen:
		return "the tool spec's approval_when"
	case runtime.HoldRiskCritical:
		return "risk × trust: risk critical, always reviewed"
	case runtime.HoldRiskTrust:
		return "risk × trust: risk high, trust below user"
	case runtime.HoldUntrustedWrite:
		return "risk × trust: a write of risk medium or more with external_untrusted arguments"
	}
	return "recorded as " + cause
}

// callView is one invocation as the pages show it. Every string in it is untrusted
// text, shown only through html/template.
type callView struct {
	ID                          int64
	Tool, Caller, Tenant        string
	Session, Run, CallID        string
	Step, Attempt               int
	Mode, Status, Decision      string
	Idempotency                 string
	OriginTrust, ArgumentTrust  string
	ReasonCode                  string
	Created, Updated            time.Time
	Waiting                     time.Duration
	HoldEnds                    time.Time
	HoldPassed                  bool
	Args                        []jsonLine
	ArgsBytes                   int
	ArgsNote                    string
	Hold                        *HoldReason
	HoldUnknown                 bool
	Approval                    *store.Approval // the decision on a held call, once made
	Mine                        bool            // the viewer made the call
	CanDecide                   bool            // held, undecided, not the viewer's
	CanResolve                  bool            // UNCERTAIN, unresolved
	EffectSent, EarlierEffect   *time.Time
	Resolution, ResolvedBy      string
	ResolvedAt                  *time.Time
	Outcome                     *outcomeView
	LeaseOwner                  string
	IdempotentWhen              string
	WatermarkMissing, Suspended bool
}

func (c *Console) view(r *http.Request, s *session, inv *store.Invocation, withHold bool) callView {
	now := time.Now()
	v := callView{ID: inv.ID, Tool: inv.Tool, Caller: inv.Principal, Tenant: inv.Tenant, Session: inv.SessionID,
		Run: inv.RunID, CallID: inv.CallID, Step: inv.Step, Attempt: inv.Attempt, Mode: inv.Mode,
		Status: string(inv.Status), Decision: inv.Decision, Idempotency: inv.Idempotency,
		OriginTrust: inv.OriginTrust, ArgumentTrust: inv.ArgumentTrust, ReasonCode: inv.ReasonCode,
		Created: inv.CreatedAt, Updated: inv.UpdatedAt, Waiting: now.Sub(inv.CreatedAt),
		HoldEnds: inv.CreatedAt.Add(c.o.ApprovalHold), Mine: inv.Principal == s.principal.ID,
		EffectSent: inv.EffectSentAt, EarlierEffect: inv.EarlierEffectSentAt, Resolution: inv.Resolution,
		ResolvedBy: inv.ResolvedBy, ResolvedAt: inv.ResolvedAt, LeaseOwner: inv.LeaseOwner,
		WatermarkMissing: inv.WatermarkMissing, Suspended: inv.SuspendedAt != nil}
	v.HoldPassed = now.After(v.HoldEnds)
	if inv.IdempotentWhen != nil {
		v.IdempotentWhen = fmt.Sprint(*inv.IdempotentWhen)
	}
	held := inv.Status == store.StatusPending && inv.Decision == store.DecisionNeedsApproval
	v.CanResolve = inv.Status == store.StatusUncertain && inv.Resolution == ""
	v.Args, v.ArgsNote = foldJSON(inv.Args)
	v.ArgsBytes = len(inv.Args)
	if inv.Decision == store.DecisionNeedsApproval {
		a, ok, err := c.o.Operator.ApprovalOf(r.Context(), s.principal, inv)
		switch {
		case err != nil:
			c.o.Logger.Warn("console: the decision on a call", "invocation", inv.ID, "err", err)
		case ok:
			v.Approval = a
		}
	}
	if withHold && inv.Decision == store.DecisionNeedsApproval {
		hr, ok, err := c.o.Operator.HoldReason(r.Context(), s.principal, inv)
		switch {
		case err != nil:
			c.o.Logger.Warn("console: why a call was held", "invocation", inv.ID, "err", err)
			v.HoldUnknown = true
		case ok:
			v.Hold = &hr
		default:
			v.HoldUnknown = true
		}
	}
	v.CanDecide = held && !v.Mine && v.Approval == nil
	v.Outcome = outcomeOf(inv.Outcome)
	return v
}

// jsonLine is one line of an argument value, pretty-printed: a key, an opening or
// closing bracket, or a scalar. A long string is folded: Preview shows, Full unfolds.
type jsonLine struct {
	Depth   int
	Key     string // quoted JSON key with its colon, or ""
	Text    string // the scalar's JSON text, or a bracket
	Kind    string // string, number, bool, null, bracket
	Folded  bool
	Preview string
	Full    string
	Bytes   int
	Comma   bool
}

// Folding bounds.
const (
	foldAt       = 160       // a string longer than this (bytes of JSON text) is folded
	previewRunes = 96        // a folded string's preview
	maxShown     = 256 << 10 // the most of one string a page holds; the rest is elided
	maxLines     = 4000
	maxDepth     = 48
)

// foldJSON pretty-prints canonical JSON as lines, folding long strings; a note says
// what was left out (too deep or too long: the command line shows it whole).
func foldJSON(raw json.RawMessage) ([]jsonLine, string) {
	if len(raw) == 0 {
		return nil, ""
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return []jsonLine{{Text: strings.ToValidUTF8(string(raw[:min(len(raw), 4096)]), "\uFFFD"), Kind: "string"}}, "not JSON"
	}
	f := &folder{}
	f.value(v, 0, "", false)
	return f.lines, f.note
}

type folder struct {
	lines []jsonLine
	note  string
}

func (f *folder) add(l jsonLine) bool {
	if len(f.lines) >= maxLines {
		f.note = fmt.Sprintf("only the first %d lines are shown: `toolrun approvals --json` prints them all", maxLines)
		return false
	}
	f.lines = append(f.lines, l)
	return true
}

// quoted is s as a JSON string, as written (no HTML escaping: the template escapes).
func quoted(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

func (f *folder) value(v any, depth int, key string, comma bool) {
	if key != "" {
		key = quoted(key) + ": "
	}
	if depth > maxDepth {
		f.add(jsonLine{Depth: depth, Key: key, Text: "…", Kind: "null", Comma: comma})
		f.note = "a value nested deeper than this page shows is elided"
		return
	}
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if len(keys) == 0 {
			f.add(jsonLine{Depth: depth, Key: key, Text: "{}", Kind: "bracket", Comma: comma})
			return
		}
		if !f.add(jsonLine{Depth: depth, Key: key, Text: "{", Kind: "bracket"}) {
			return
		}
		for i, k := range keys {
			f.value(x[k], depth+1, k, i < len(keys)-1)
		}
		f.add(jsonLine{Depth: depth, Text: "}", Kind: "bracket", Comma: comma})
	case []any:
		if len(x) == 0 {
			f.add(jsonLine{Depth: depth, Key: key, Text: "[]", Kind: "bracket", Comma: comma})
			return
		}
		if !f.add(jsonLine{Depth: depth, Key: key, Text: "[", Kind: "bracket"}) {
			return
		}
		for i, e := range x {
			f.value(e, depth+1, "", i < len(x)-1)
		}
		f.add(jsonLine{Depth: depth, Text: "]", Kind: "bracket", Comma: comma})
	case string:
		q := quoted(x)
		l := jsonLine{Depth: depth, Key: key, Text: q, Kind: "string", Comma: comma, Bytes: len(x)}
		if len(q) > foldAt {
			l.Folded, l.Text = true, ""
			l.Preview = previewOf(x, previewRunes)
			l.Full = x
			if len(x) > maxShown {
				cut := x[:maxShown]
				for !utf8.ValidString(cut) && len(cut) > 0 {
					cut = cut[:len(cut)-1]
				}
				l.Full = cut + fmt.Sprintf("\n[… %d more bytes not shown here: `toolrun approvals --json` prints them …]", len(x)-len(cut))
			}
		}
		f.add(l)
	case json.Number:
		f.add(jsonLine{Depth: depth, Key: key, Text: x.String(), Kind: "number", Comma: comma})
	case bool:
		f.add(jsonLine{Depth: depth, Key: key, Text: fmt.Sprint(x), Kind: "bool", Comma: comma})
	default:
		f.add(jsonLine{Depth: depth, Key: key, Text: "null", Kind: "null", Comma: comma})
	}
}

func previewOf(s string, runes int) string {
	n := 0
	for i := range s {
		if n == runes {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// outcomeView is a recorded outcome as a page shows it: the reason table's words,
// and the tool's or remote system's text (untrusted) in excerpts.
type outcomeView struct {
	Status, ReasonCode, Message string
	Retryable                   bool
	External                    *textView
	OK                          bool
	HasResult                   bool
	Content                     []textView
	Structured                  string
	Artifacts                   []string
	Failure                     string
}

type textView struct {
	Trust, Text string
	Elided      int
}

// maxExcerpt bounds each text of an outcome shown.
const maxExcerpt = 4096

func excerpt(s string) (string, int) {
	if len(s) <= maxExcerpt {
		return s, 0
	}
	cut := s[:maxExcerpt]
	for !utf8.ValidString(cut) && len(cut) > 0 {
		cut = cut[:len(cut)-1]
	}
	return cut, len(s) - len(cut)
}

func outcomeOf(raw json.RawMessage) *outcomeView {
	if len(raw) == 0 {
		return nil
	}
	var o struct {
		Status     string `json:"status"`
		ReasonCode string `json:"reason_code"`
		Message    string `json:"message"`
		Retryable  bool   `json:"retryable"`
		External   *struct {
			Text  string `json:"text"`
			Trust string `json:"trust"`
		} `json:"external_detail"`
		Result *struct {
			OK      bool `json:"ok"`
			Content []struct {
				Text  string `json:"text"`
				Trust string `json:"trust"`
			} `json:"content"`
			Structured json.RawMessage `json:"structured"`
			Artifacts  []struct {
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Size   int64  `json:"size"`
			} `json:"artifacts"`
			Failure *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"failure"`
		} `json:"result"`
	}
	if json.Unmarshal(raw, &o) != nil {
		return nil
	}
	v := &outcomeView{Status: o.Status, ReasonCode: o.ReasonCode, Message: o.Message, Retryable: o.Retryable}
	if o.External != nil {
		t, n := excerpt(o.External.Text)
		v.External = &textView{Trust: o.External.Trust, Text: t, Elided: n}
	}
	if o.Result != nil {
		v.HasResult, v.OK = true, o.Result.OK
		for _, c := range o.Result.Content {
			t, n := excerpt(c.Text)
			v.Content = append(v.Content, textView{Trust: c.Trust, Text: t, Elided: n})
		}
		if len(o.Result.Structured) > 0 {
			v.Structured, _ = excerpt(string(o.Result.Structured))
		}
		for _, a := range o.Result.Artifacts {
			v.Artifacts = append(v.Artifacts, fmt.Sprintf("%s (%d bytes, sha256 %s)", a.URI, a.Size, a.SHA256))
		}
		if o.Result.Failure != nil {
			v.Failure, _ = excerpt(o.Result.Failure.Code + ": " + o.Result.Failure.Message)
		}
	}
	return v
}

// serveStatic serves the embedded style sheet and script.
func serveStatic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	f, err := staticFS.Open("static/" + path.Base(name))
	if err != nil || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	switch path.Ext(name) {
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".svg":
		w.Header().Set("Content-Type", "image/svg+xml")
	}
	w.Header().Set("Cache-Control", "no-cache")
	if rs, ok := f.(io.ReadSeeker); ok {
		st, _ := f.Stat()
		http.ServeContent(w, r, name, st.ModTime(), rs)
		return
	}
	io.Copy(w, f)
}
