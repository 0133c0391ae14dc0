package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	starjson "go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"

	"github.com/toolgen/toolgen/internal/names"
	"github.com/toolgen/toolgen/runtime"
)

// The default budgets of a script (the spec's defaults; see doc.go).
const (
	DefaultMaxCalls       = 100
	DefaultMaxSteps       = 10_000_000
	DefaultMaxOutputBytes = 64 << 10
)

// maxDepth bounds the nesting of a value converted between Starlark and JSON: a list
// that contains itself ends there instead of recursing for ever.
const maxDepth = 64

// Limits are a script's budgets. Zero fields take the defaults. The wall time is the
// context's deadline (the tool's timeout).
type Limits struct {
	MaxCalls       int
	MaxSteps       uint64
	MaxOutputBytes int
}

func (l Limits) withDefaults() Limits {
	if l.MaxCalls <= 0 {
		l.MaxCalls = DefaultMaxCalls
	}
	if l.MaxSteps == 0 {
		l.MaxSteps = DefaultMaxSteps
	}
	if l.MaxOutputBytes <= 0 {
		l.MaxOutputBytes = DefaultMaxOutputBytes
	}
	return l
}

// Caller makes the script's tool calls: a *runtime.Bridge, or a test double.
type Caller interface {
	CallTrust(ctx context.Context, tool string, args json.RawMessage, trust runtime.Trust) (runtime.Outcome, error)
	ScriptHash() string
}

// CallRecord is one tool call of a script, as the script's result lists it.
type CallRecord struct {
	Ordinal    int
	Tool       string
	CallID     string
	Status     runtime.OutcomeStatus
	ReasonCode runtime.ReasonCode
	Replayed   bool
}

// Result is how one execution of a script ended.
type Result struct {
	// Reason is "" when the script ran to its end, else one of the script_* reason
	// codes (runtime/reasons.yaml).
	Reason runtime.ReasonCode
	// Detail says more about Reason: the script's error, the call it stopped at.
	Detail string
	// Output is the JSON of the script's global `result` ("null" when unset); Printed
	// is what it printed. Both are empty when Reason is script_output_too_large.
	Output  string
	Printed string
	Calls   []CallRecord
	// Untrusted: an external_untrusted tool result reached the script.
	Untrusted bool
	Hash      string
	// ProvenanceFallback is why carried provenance fell back to the rule of the whole
	// script ("" when it was per call site; see doc.go).
	ProvenanceFallback string
}

// Run executes the Starlark script src, whose tool calls go through c. Every call's
// argument trust is what the script was carried with, lowered to external_untrusted
// when its call site may depend on a site that has produced untrusted output (or, when
// the provenance analysis gives up, once any untrusted result reached the script; see
// doc.go). The error is for a store that cannot record a call: the script is then torn
// down, with what it did recorded.
func Run(ctx context.Context, c Caller, src string, lim Limits) (res Result, err error) {
	lim = lim.withDefaults()
	r := &run{ctx: ctx, c: c, lim: lim}
	r.prov = analyzeProvenance(src)
	r.siteUntrusted = make([]bool, len(r.prov.deps))
	res.Hash = c.ScriptHash()
	defer func() {
		// Starlark must never take the host down; a panic is the script's error.
		if p := recover(); p != nil {
			res.Reason, res.Detail = runtime.ReasonCode("script_error"), fmt.Sprintf("internal error while running the script: %v", p)
			res.Output, res.Printed = "", ""
		}
		res.Calls, res.Untrusted, res.ProvenanceFallback = r.calls, r.untrusted, r.prov.fallback
	}()

	thread := &starlark.Thread{
		Name: "script",
		Print: func(_ *starlark.Thread, msg string) {
			if r.printed.Len()+len(msg)+1 > lim.MaxOutputBytes {
				r.stop(runtime.ReasonCode("script_output_too_large"), "printed output exceeds max_output_bytes")
				return
			}
			r.printed.WriteString(msg)
			r.printed.WriteByte('\n')
		},
		// Load stays nil: a script loads no module.
	}
	r.thread = thread
	thread.SetMaxExecutionSteps(lim.MaxSteps)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			r.stop(runtime.ReasonCode("script_timeout"), "the script's wall time ran out")
		case <-done:
		}
	}()

	predeclared := starlark.StringDict{
		"tools": toolRef{r: r},
		"json":  starjson.Module,
	}
	opts := &syntax.FileOptions{While: true, TopLevelControl: true, GlobalReassign: true, Set: true}
	globals, execErr := starlark.ExecFileOptions(opts, thread, "script.star", src, predeclared)
	if r.storeErr != nil {
		return res, r.storeErr
	}
	if reason, detail := r.stopped(); reason != "" {
		res.Reason, res.Detail = reason, detail
		return res, nil
	}
	if execErr != nil {
		if thread.ExecutionSteps() >= lim.MaxSteps {
			res.Reason, res.Detail = runtime.ReasonCode("script_max_steps"), fmt.Sprintf("the script took more than %d steps", lim.MaxSteps)
			return res, nil
		}
		res.Reason, res.Detail = runtime.ReasonCode("script_error"), errorText(execErr)
		return res, nil
	}
	out := []byte("null")
	if v, ok := globals["result"]; ok {
		if out, err = toJSON(v); err != nil {
			res.Reason, res.Detail = runtime.ReasonCode("script_error"), "result: "+err.Error()
			return res, nil
		}
	}
	if len(out)+r.printed.Len() > lim.MaxOutputBytes {
		res.Reason = runtime.ReasonCode("script_output_too_large")
		res.Detail = fmt.Sprintf("result and printed output are %d bytes, more than max_output_bytes %d", len(out)+r.printed.Len(), lim.MaxOutputBytes)
		return res, nil
	}
	res.Output, res.Printed = string(out), r.printed.String()
	return res, nil
}

// errorText is a Starlark error with its backtrace when it has one.
func errorText(err error) string {
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		return ee.Backtrace()
	}
	return err.Error()
}

// run is the state of one execution.
type run struct {
	ctx    context.Context
	c      Caller
	lim    Limits
	thread *starlark.Thread

	printed   bytes.Buffer
	calls     []CallRecord
	untrusted bool
	storeErr  error

	// prov is the carried-provenance analysis of the script; siteUntrusted says, per
	// tool-call site, whether a result it produced so far was external_untrusted.
	prov          provenance
	siteUntrusted []bool

	// stopReason is set once, by the first budget or stop that ends the script (the
	// wall-time watcher runs on its own goroutine).
	mu         sync.Mutex
	stopReason runtime.ReasonCode
	stopDetail string
}

func (r *run) stop(reason runtime.ReasonCode, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopReason == "" {
		r.stopReason, r.stopDetail = reason, detail
		r.thread.Cancel(string(reason))
	}
}

func (r *run) stopped() (runtime.ReasonCode, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopReason, r.stopDetail
}

// argumentTrust is the trust of the arguments of a call made at the call site at (the
// position of its opening parenthesis): external_untrusted iff a site it may depend on
// has produced untrusted output so far, or, when the analysis gave up, iff any
// untrusted output reached the script (see doc.go). It returns the site's id (-1 when
// there is none).
func (r *run) argumentTrust(at syntax.Position) (runtime.Trust, int) {
	id := -1
	if r.prov.fallback == "" {
		if i, ok := r.prov.sites[site{at.Line, at.Col}]; ok {
			id = i
		} else {
			// A call from a site the analysis did not see (it cannot happen: a tool
			// is never a value): the script falls back to the per-script rule.
			r.prov.fallback = "a tool call from an unknown site"
		}
	}
	untrusted := r.untrusted
	if id >= 0 {
		untrusted = false
		for _, d := range r.prov.deps[id].members() {
			untrusted = untrusted || r.siteUntrusted[d]
		}
	}
	if untrusted {
		return runtime.TrustExternalUntrusted, id
	}
	return runtime.TrustSystem, id
}

// call is one tool call from the script: tools.<name>(**kwargs), at the site at.
func (r *run) call(name string, kwargs []starlark.Tuple, at syntax.Position) (starlark.Value, error) {
	if len(r.calls) >= r.lim.MaxCalls {
		r.stop(runtime.ReasonCode("script_max_calls"), fmt.Sprintf("call %d of %s: the script may make at most %d calls", len(r.calls)+1, name, r.lim.MaxCalls))
		return nil, errors.New("script_max_calls")
	}
	args := map[string]any{}
	for _, kv := range kwargs {
		k, _ := starlark.AsString(kv[0])
		v, err := toGo(kv[1], 0)
		if err != nil {
			return nil, fmt.Errorf("%s: argument %s: %v", name, k, err)
		}
		args[k] = v
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("%s: arguments: %v", name, err)
	}
	// Carried provenance (see doc.go). TrustSystem is lowered to the script call's
	// own trust by CallTrust (RT-6: never raised).
	trust, id := r.argumentTrust(at)
	o, err := r.c.CallTrust(r.ctx, name, raw, trust)
	torn := errors.Is(err, runtime.ErrScriptTornDown)
	if err != nil && !torn {
		r.storeErr = err
		r.stop(runtime.ReasonCode("script_error"), "the store failed")
		return nil, err
	}
	rec := CallRecord{Ordinal: len(r.calls) + 1, Tool: name, CallID: o.CallID, Status: o.Status, ReasonCode: o.ReasonCode, Replayed: o.Replayed}
	r.calls = append(r.calls, rec)
	if (o.Status == runtime.OutcomeSucceeded && o.Result != nil && resultUntrusted(o.Result)) ||
		o.ExternalDetail != nil { // a remote system's text is external_untrusted (RT-7)
		r.untrusted = true
		if id >= 0 {
			r.siteUntrusted[id] = true
		}
	}
	switch {
	case torn:
		r.stop(runtime.ReasonCode("script_suspended"), fmt.Sprintf("call %d (%s, call_id %s) is held for approval past the hold bound; the script is suspended until it is decided", rec.Ordinal, name, o.CallID))
		return nil, runtime.ErrScriptTornDown
	case o.Status == runtime.OutcomeUncertain:
		r.stop(runtime.ReasonCode("script_stopped"), fmt.Sprintf("call %d (%s, call_id %s) ended %s/%s", rec.Ordinal, name, o.CallID, o.Status, o.ReasonCode))
		return nil, errors.New("script_stopped")
	case o.ReasonCode == runtime.ReasonCallInProgress, o.ReasonCode == runtime.ReasonCallSuspended, o.ReasonCode == runtime.ReasonLeaseLost:
		// Another worker has the call, or will: its outcome is not known here.
		r.stop(runtime.ReasonCode("script_call_in_progress"), fmt.Sprintf("call %d (%s, call_id %s) is %s", rec.Ordinal, name, o.CallID, o.ReasonCode))
		return nil, errors.New("script_call_in_progress")
	}
	return outcomeValue(o)
}

// resultUntrusted reports whether a result carries external_untrusted data.
func resultUntrusted(res *runtime.ToolResult) bool {
	if runtime.ParseTrust(string(res.Trust)) == runtime.TrustExternalUntrusted {
		return true
	}
	for _, it := range res.Content {
		if runtime.ParseTrust(string(it.Trust)) == runtime.TrustExternalUntrusted {
			return true
		}
	}
	return false
}

// outcomeValue is the Starlark value of an outcome: the six fields of RT-7, ok, replayed
// and the structured result (None unless ok).
func outcomeValue(o runtime.Outcome) (starlark.Value, error) {
	var detail starlark.Value = starlark.None
	if o.ExternalDetail != nil {
		detail = starlark.String(o.ExternalDetail.Text)
	}
	var result starlark.Value = starlark.None
	if o.Status == runtime.OutcomeSucceeded && o.Result != nil {
		if len(o.Result.Structured) > 0 {
			v, err := fromJSON(o.Result.Structured)
			if err != nil {
				return nil, err
			}
			result = v
		} else {
			var b strings.Builder
			for _, it := range o.Result.Content {
				b.WriteString(it.Text)
			}
			result = starlark.String(b.String())
		}
	}
	status := string(o.Status)
	if status == "" {
		status = "succeeded"
	}
	return starlarkstruct.FromStringDict(starlark.String("outcome"), starlark.StringDict{
		"status":          starlark.String(status),
		"reason_code":     starlark.String(o.ReasonCode),
		"message":         starlark.String(o.Message),
		"retryable":       starlark.Bool(o.Retryable),
		"call_id":         starlark.String(o.CallID),
		"external_detail": detail,
		"ok":              starlark.Bool(o.Status == runtime.OutcomeSucceeded),
		"replayed":        starlark.Bool(o.Replayed),
		"result":          result,
	}), nil
}

// toolRef is tools, tools.workspace and tools.workspace.read_text: a name prefix whose
// attributes extend it, callable once it names a tool. The pipeline resolves the name
// against the session's catalog: an unknown tool is an outcome (unknown_tool) like any
// other refusal.
type toolRef struct {
	r    *run
	name string
}

var (
	_ starlark.HasAttrs = toolRef{}
	_ starlark.Callable = toolRef{}
)

func (t toolRef) String() string {
	if t.name == "" {
		return "tools"
	}
	return "tools." + t.name
}
func (t toolRef) Type() string          { return "tool" }
func (t toolRef) Freeze()               {}
func (t toolRef) Truth() starlark.Bool  { return true }
func (t toolRef) Hash() (uint32, error) { return 0, errors.New("unhashable: tool") }
func (t toolRef) Name() string          { return t.String() }
func (t toolRef) AttrNames() []string   { return nil }

func (t toolRef) Attr(name string) (starlark.Value, error) {
	full := name
	if t.name != "" {
		full = t.name + "." + name
	}
	if strings.Count(full, ".") > 2 || len(full) > names.MaxBytes {
		return nil, nil // no such attribute
	}
	return toolRef{r: t.r, name: full}, nil
}

func (t toolRef) CallInternal(thread *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 0 {
		return nil, fmt.Errorf("%s: tool arguments are keyword arguments only (name=value)", t)
	}
	if why := names.Check(t.name); why != "" {
		return nil, fmt.Errorf("%s is not a tool name: it %s", t, why)
	}
	if names.Domain(t.name) == "sandbox" {
		return nil, fmt.Errorf("%s: a script cannot run scripts", t)
	}
	// The caller's frame is at the call's opening parenthesis: the call's site (none
	// without a caller: an unknown site, which falls back to the per-script rule).
	var at syntax.Position
	if thread.CallStackDepth() >= 2 {
		at = thread.CallFrame(1).Pos
	}
	return t.r.call(t.name, kwargs, at)
}

// toGo converts a Starlark value to JSON-ready Go values.
func toGo(v starlark.Value, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("value nested too deeply")
	}
	switch x := v.(type) {
	case starlark.NoneType:
		return nil, nil
	case starlark.Bool:
		return bool(x), nil
	case starlark.Int:
		if i, ok := x.Int64(); ok {
			return i, nil
		}
		return nil, errors.New("integer out of range")
	case starlark.Float:
		f := float64(x)
		if f != f || f > 1.7e308 || f < -1.7e308 {
			return nil, errors.New("float is not finite")
		}
		return f, nil
	case starlark.String:
		return string(x), nil
	case *starlark.List:
		out := make([]any, 0, x.Len())
		for i := 0; i < x.Len(); i++ {
			e, err := toGo(x.Index(i), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	case starlark.Tuple:
		out := make([]any, 0, len(x))
		for _, e := range x {
			g, err := toGo(e, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, g)
		}
		return out, nil
	case *starlark.Dict:
		out := map[string]any{}
		for _, kv := range x.Items() {
			k, ok := kv[0].(starlark.String)
			if !ok {
				return nil, fmt.Errorf("dict key %s is not a string", kv[0].Type())
			}
			g, err := toGo(kv[1], depth+1)
			if err != nil {
				return nil, err
			}
			out[string(k)] = g
		}
		return out, nil
	case *starlarkstruct.Struct:
		out := map[string]any{}
		for _, n := range x.AttrNames() {
			a, err := x.Attr(n)
			if err != nil {
				return nil, err
			}
			g, err := toGo(a, depth+1)
			if err != nil {
				return nil, err
			}
			out[n] = g
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %s cannot be converted to JSON", v.Type())
}

// toJSON is the JSON of a Starlark value.
func toJSON(v starlark.Value) ([]byte, error) {
	g, err := toGo(v, 0)
	if err != nil {
		return nil, err
	}
	return json.Marshal(g)
}

// fromJSON converts JSON to Starlark values: objects to dicts, arrays to lists,
// integral numbers to ints.
func fromJSON(raw []byte) (starlark.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var g any
	if err := dec.Decode(&g); err != nil {
		return nil, err
	}
	return fromGo(g, 0)
}

func fromGo(g any, depth int) (starlark.Value, error) {
	if depth > maxDepth {
		return nil, errors.New("result nested too deeply")
	}
	switch x := g.(type) {
	case nil:
		return starlark.None, nil
	case bool:
		return starlark.Bool(x), nil
	case string:
		return starlark.String(x), nil
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return starlark.MakeInt64(i), nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, err
		}
		return starlark.Float(f), nil
	case []any:
		out := make([]starlark.Value, 0, len(x))
		for _, e := range x {
			v, err := fromGo(e, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return starlark.NewList(out), nil
	case map[string]any:
		d := starlark.NewDict(len(x))
		for k, e := range x {
			v, err := fromGo(e, depth+1)
			if err != nil {
				return nil, err
			}
			if err := d.SetKey(starlark.String(k), v); err != nil {
				return nil, err
			}
		}
		return d, nil
	}
	return nil, fmt.Errorf("unexpected JSON value %T", g)
}
