package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"
)

// OutcomeStatus is the pipeline's judgement of a call (RT-7): succeeded, or one of the four
// non-success statuses. A tool never sets it (RT-1).
type OutcomeStatus string

const (
	OutcomeSucceeded   OutcomeStatus = "succeeded"
	OutcomeDenied      OutcomeStatus = "denied"
	OutcomeFailed      OutcomeStatus = "failed"
	OutcomeUnavailable OutcomeStatus = "unavailable"
	OutcomeUncertain   OutcomeStatus = "uncertain"
)

// Known reports whether s is one of the five statuses.
func (s OutcomeStatus) Known() bool {
	switch s {
	case OutcomeSucceeded, OutcomeDenied, OutcomeFailed, OutcomeUnavailable, OutcomeUncertain:
		return true
	}
	return false
}

// Outcome is what the pipeline returns for every call, and what it records in the
// invocation's outcome column so that step 8 can return it again (RT-3, RT-7).
//
// The four non-success outcomes share one six-field shape: status, reason_code, message,
// retryable, call_id, external_detail. Status, Message and Retryable come only from the
// reason table through [NewOutcome]; text from a tool or a remote system goes only into
// ExternalDetail, enveloped and labelled external_untrusted ([Outcome.WithExternalDetail]).
// Result is set on a succeeded outcome only ([Succeeded]).
//
// Its JSON form (MarshalJSON) is the stored form: Result.Structured is written as raw
// JSON, not base64, and an outcome built by the constructors in this file reads back
// equal to itself (reflect.DeepEqual) and re-encodes to the same bytes.
type Outcome struct {
	Status     OutcomeStatus
	ReasonCode ReasonCode
	// Message is the reason table's fixed message for ReasonCode, never anything else.
	Message   string
	Retryable bool
	CallID    string
	// ExternalDetail is text from a tool or remote system (a tool's failure, a remote
	// error), bounded to MaxExternalDetailBytes, enveloped, always external_untrusted.
	ExternalDetail *Item
	// Result is the shaped tool result of a succeeded call.
	Result *ToolResult
	// Suspended is set on a succeeded control call that suspended the run (RT-11):
	// the run waits for input and resumes with the token.
	Suspended *Suspension
	// Replayed is true when step 8 returned a recorded outcome instead of executing.
	// It is not stored: it describes this return, not the call.
	Replayed bool
}

// Suspension says how to resume a suspended control call.
type Suspension struct {
	ResumeToken string `json:"resume_token"`
	Reason      string `json:"reason,omitempty"`
}

// MaxExternalDetailBytes bounds the raw text of an outcome's external_detail, before it is
// enveloped: longer text keeps a head and a tail around a "[... N bytes elided ...]" marker,
// cut on rune boundaries. The enveloped item text is at most this plus [EnvelopeOverhead]
// plus neutralization (at most 4 bytes per marker-like sequence).
const MaxExternalDetailBytes = 4096

// externalDetailMarkerFormat is the elision marker of a cut external_detail: unlike a tool
// result's, it has no artifact to point to.
const externalDetailMarkerFormat = "\n[... %d bytes elided ...]\n"

// NewOutcome builds the non-success outcome of callID for code, with the status, message
// and retryable flag the reason table gives it.
//
// A code missing from the table is a programming error (a test asserts every declared
// ReasonCode constant is in the table); rather than panic mid-call, NewOutcome logs it and
// returns the internal_error outcome, so the caller still gets a table message.
func NewOutcome(code ReasonCode, callID string) Outcome {
	e, ok := reasonTable[code]
	if !ok {
		slog.Error("runtime: reason code is not in the reason table; reporting internal_error",
			"reason_code", string(code), "call_id", callID)
		code = ReasonInternalError
		e = reasonTable[code]
	}
	return Outcome{Status: e.status, ReasonCode: code, Message: e.message, Retryable: e.retryable, CallID: callID}
}

// Succeeded builds the outcome of a call that produced r (already validated, trust-lowered
// and excerpted by the pipeline). r is copied and normalized for storage: Structured is
// compacted and escaped as encoding/json writes it, texts are made valid UTF-8 the way
// encoding/json would (each invalid byte becomes U+FFFD), empty slices become nil.
func Succeeded(callID string, r ToolResult) Outcome {
	res := normalizeResult(r)
	return Outcome{Status: OutcomeSucceeded, CallID: callID, Result: &res}
}

// ConfirmedHappened is the outcome recorded for an UNCERTAIN call a person confirmed
// happened (store.InvocationResolveUncertain): a success, which a retry of the call is
// answered with. The tool's own result was never recorded — the call was interrupted
// after its effect — so the outcome says so, in the platform's words.
func ConfirmedHappened(callID, by string) Outcome {
	return Succeeded(callID, ToolResult{OK: true, Trust: TrustSystem, Content: []Item{{Type: "text", Trust: TrustSystem,
		Text: "The call was interrupted after its effect was sent, and " + by + " confirmed that the effect happened. The tool's own result was not recorded."}}})
}

// WithExternalDetail returns o with text as its external detail, from an unnamed source.
// See [Outcome.WithExternalDetailFrom].
func (o Outcome) WithExternalDetail(text string) Outcome { return o.WithExternalDetailFrom("", text) }

// WithExternalDetailFrom returns o with text, from source (a tool or server name, or ""), as
// its external detail: made valid UTF-8, cut to MaxExternalDetailBytes head-and-tail,
// then enveloped ([Envelope]) and labelled external_untrusted whatever its origin. Empty
// text leaves o as it is. Message is never touched.
func (o Outcome) WithExternalDetailFrom(source, text string) Outcome {
	if text == "" {
		return o
	}
	raw, _ := excerpt(validUTF8(text), MaxExternalDetailBytes, externalDetailMarkerFormat)
	o.ExternalDetail = &Item{
		Type:     "text",
		Text:     Envelope(TrustExternalUntrusted, source, raw),
		MIMEType: "text/plain; charset=utf-8",
		Trust:    TrustExternalUntrusted,
	}
	return o
}

// The JSON shapes of an outcome: field names are snake case and stable, since recorded
// outcomes are read back by later versions.
type (
	outcomeJSON struct {
		Status         OutcomeStatus `json:"status"`
		ReasonCode     ReasonCode    `json:"reason_code,omitempty"`
		Message        string        `json:"message,omitempty"`
		Retryable      bool          `json:"retryable"`
		CallID         string        `json:"call_id"`
		ExternalDetail *itemJSON     `json:"external_detail,omitempty"`
		Result         *resultJSON   `json:"result,omitempty"`
		Suspended      *Suspension   `json:"suspended,omitempty"`
	}
	itemJSON struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		MIMEType string `json:"mime_type,omitempty"`
		Trust    Trust  `json:"trust,omitempty"`
	}
	resultJSON struct {
		OK         bool            `json:"ok"`
		Content    []itemJSON      `json:"content,omitempty"`
		Structured json.RawMessage `json:"structured,omitempty"`
		Artifacts  []artifactJSON  `json:"artifacts,omitempty"`
		Failure    *failureJSON    `json:"failure,omitempty"`
		Trust      Trust           `json:"trust,omitempty"`
	}
	artifactJSON struct {
		URI       string `json:"uri"`
		SHA256    string `json:"sha256"`
		Size      int64  `json:"size"`
		MediaType string `json:"media_type,omitempty"`
	}
	failureJSON struct {
		Code      string `json:"code"`
		Message   string `json:"message,omitempty"`
		Retryable bool   `json:"retryable"`
	}
)

// MarshalJSON writes the stored form of o.
func (o Outcome) MarshalJSON() ([]byte, error) {
	w := outcomeJSON{
		Status:     o.Status,
		ReasonCode: o.ReasonCode,
		Message:    o.Message,
		Retryable:  o.Retryable,
		CallID:     o.CallID,
		Suspended:  o.Suspended,
	}
	if o.ExternalDetail != nil {
		it := itemToJSON(*o.ExternalDetail)
		w.ExternalDetail = &it
	}
	if r := o.Result; r != nil {
		rw := &resultJSON{OK: r.OK, Trust: r.Trust}
		if len(r.Structured) > 0 {
			rw.Structured = json.RawMessage(r.Structured) // json.Marshal checks it
		}
		for _, it := range r.Content {
			rw.Content = append(rw.Content, itemToJSON(it))
		}
		for _, a := range r.Artifacts {
			rw.Artifacts = append(rw.Artifacts, artifactJSON(a))
		}
		if f := r.Failure; f != nil {
			rw.Failure = &failureJSON{Code: f.Code, Message: f.Message, Retryable: f.Retryable}
		}
		w.Result = rw
	}
	b, err := json.Marshal(w)
	if err != nil {
		// Every other field is a string, a number, a bool or a struct of them: only the
		// structured result, raw JSON, can fail.
		return nil, fmt.Errorf("runtime: outcome %s: structured result is not valid JSON: %w", o.CallID, err)
	}
	return b, nil
}

// UnmarshalJSON reads the stored form of an outcome. Unknown fields are ignored (a later
// version may add some); an unknown status is an error.
func (o *Outcome) UnmarshalJSON(data []byte) error {
	var w outcomeJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("runtime: decode outcome: %w", err)
	}
	if !w.Status.Known() {
		return fmt.Errorf("runtime: decode outcome: unknown status %q", w.Status)
	}
	out := Outcome{
		Status:     w.Status,
		ReasonCode: w.ReasonCode,
		Message:    w.Message,
		Retryable:  w.Retryable,
		CallID:     w.CallID,
		Suspended:  w.Suspended,
	}
	if w.ExternalDetail != nil {
		it := itemFromJSON(*w.ExternalDetail)
		out.ExternalDetail = &it
	}
	if rw := w.Result; rw != nil {
		r := &ToolResult{OK: rw.OK, Trust: rw.Trust}
		if len(rw.Structured) > 0 && !bytes.Equal(rw.Structured, []byte("null")) {
			r.Structured = []byte(rw.Structured)
		}
		for _, it := range rw.Content {
			r.Content = append(r.Content, itemFromJSON(it))
		}
		for _, a := range rw.Artifacts {
			r.Artifacts = append(r.Artifacts, ArtifactRef(a))
		}
		if f := rw.Failure; f != nil {
			r.Failure = &ToolFailure{Code: f.Code, Message: f.Message, Retryable: f.Retryable}
		}
		out.Result = r
	}
	*o = out
	return nil
}

func itemToJSON(it Item) itemJSON {
	return itemJSON(it)
}

func itemFromJSON(it itemJSON) Item {
	return Item(it)
}

// normalizeResult copies r into the form that survives a JSON round trip unchanged.
func normalizeResult(r ToolResult) ToolResult {
	out := ToolResult{OK: r.OK, Trust: r.Trust}
	if len(r.Structured) > 0 {
		if norm, err := normalizeJSON(r.Structured); err == nil {
			out.Structured = norm
		} else {
			// Invalid JSON is kept so that MarshalJSON reports it instead of hiding it.
			out.Structured = bytes.Clone(r.Structured)
		}
	}
	for _, it := range r.Content {
		it.Text = validUTF8(it.Text)
		out.Content = append(out.Content, it)
	}
	if len(r.Artifacts) > 0 {
		out.Artifacts = append([]ArtifactRef(nil), r.Artifacts...)
	}
	if f := r.Failure; f != nil {
		out.Failure = &ToolFailure{Code: validUTF8(f.Code), Message: validUTF8(f.Message), Retryable: f.Retryable}
	}
	return out
}

// normalizeJSON returns raw as encoding/json writes a json.RawMessage value: compact, with
// <, >, & and U+2028/U+2029 escaped. A value stored this way reads back byte for byte.
func normalizeJSON(raw []byte) ([]byte, error) {
	compact := bytes.NewBuffer(make([]byte, 0, len(raw)))
	if err := json.Compact(compact, raw); err != nil {
		return nil, err
	}
	if !needsHTMLEscape(compact.Bytes()) { // what encoding/json writes is escaped already
		return compact.Bytes(), nil
	}
	var esc bytes.Buffer
	json.HTMLEscape(&esc, compact.Bytes())
	return esc.Bytes(), nil
}

// needsHTMLEscape reports whether json.HTMLEscape would change b: whether it holds <, >,
// & or the UTF-8 of U+2028 or U+2029.
func needsHTMLEscape(b []byte) bool {
	return bytes.ContainsAny(b, "<>&") || bytes.Contains(b, []byte("\u2028")) || bytes.Contains(b, []byte("\u2029"))
}

// validUTF8 replaces each byte of s that is not part of a valid UTF-8 sequence by U+FFFD,
// exactly as encoding/json does when it writes a string.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
