package runtime

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// declaredReasonCodes parses every non-test Go file of the package and returns each
// constant declared with type ReasonCode — generated or hand-written — by name.
func declaredReasonCodes(t *testing.T) map[string]ReasonCode {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string]ReasonCode{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "ReasonCode" {
					continue
				}
				for i, n := range vs.Names {
					if i >= len(vs.Values) {
						t.Errorf("%s: constant %s has no value", fset.Position(n.Pos()), n.Name)
						continue
					}
					if _, alias := vs.Values[i].(*ast.Ident); alias {
						continue // another constant's value, checked where that one is declared
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Errorf("%s: constant %s: want a string literal", fset.Position(n.Pos()), n.Name)
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					out[n.Name] = ReasonCode(v)
				}
			}
		}
	}
	return out
}

func TestReasonCodes_EveryDeclaredConstantIsInTheTable(t *testing.T) {
	declared := declaredReasonCodes(t)
	if len(declared) == 0 {
		t.Fatal("found no ReasonCode constants")
	}
	for name, code := range declared {
		if !code.Known() {
			t.Errorf("%s = %q is not in the reason table: add it to runtime/reasons.yaml and run go generate", name, code)
		}
	}
	if len(declared) != len(reasonTable) {
		t.Errorf("%d ReasonCode constants, %d table entries", len(declared), len(reasonTable))
	}
}

func TestReasonTable_MessagesAreFixedSentences(t *testing.T) {
	for code, e := range reasonTable {
		switch {
		case e.message == "":
			t.Errorf("%s: empty message", code)
		case strings.ContainsAny(e.message, "%{}"):
			t.Errorf("%s: message %q looks like a template", code, e.message)
		}
		if e.status == OutcomeSucceeded || !e.status.Known() {
			t.Errorf("%s: status %q is not a non-success status", code, e.status)
		}
		if e.status == OutcomeUncertain && e.retryable {
			t.Errorf("%s: an uncertain outcome must not be retryable", code)
		}
	}
}

// TestReasonTable_MatchesReasonsYAML reads reasons.yaml on its own and compares it with the
// generated table, so a stale reasons_gen.go fails here too (the byte-for-byte check is
// runtime/internal/reasongen's TestReasonsGen_IsUpToDate).
func TestReasonTable_MatchesReasonsYAML(t *testing.T) {
	src, err := os.ReadFile("reasons.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Reasons []struct {
			Code      string `yaml:"code"`
			Status    string `yaml:"status"`
			Retryable bool   `yaml:"retryable"`
			Message   string `yaml:"message"`
		} `yaml:"reasons"`
	}
	if err := yaml.Unmarshal(src, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Reasons) != len(reasonTable) {
		t.Errorf("reasons.yaml has %d codes, reasons_gen.go %d: run go generate ./runtime", len(file.Reasons), len(reasonTable))
	}
	for _, r := range file.Reasons {
		e, ok := reasonTable[ReasonCode(r.Code)]
		want := reasonEntry{status: OutcomeStatus(r.Status), retryable: r.Retryable, message: r.Message}
		if !ok || e != want {
			t.Errorf("%s: generated %+v, reasons.yaml %+v: run go generate ./runtime", r.Code, e, want)
		}
	}
}

// TestReasonTable_Contract pins the codes other packages and recorded outcomes rely on.
func TestReasonTable_Contract(t *testing.T) {
	want := map[ReasonCode]struct {
		status    OutcomeStatus
		retryable bool
	}{
		ReasonUnknownTool:           {OutcomeDenied, false},
		ReasonToolWithdrawn:         {OutcomeUnavailable, false},
		ReasonToolChanged:           {OutcomeUnavailable, false},
		ReasonInvalidArguments:      {OutcomeDenied, false},
		ReasonMissingScope:          {OutcomeDenied, false},
		ReasonNotInMode:             {OutcomeDenied, false},
		ReasonPolicyDenied:          {OutcomeDenied, false},
		ReasonApprovalDenied:        {OutcomeDenied, false},
		ReasonApprovalPending:       {OutcomeUnavailable, true},
		ReasonApprovalExpired:       {OutcomeUnavailable, true},
		ReasonRepeatedDenial:        {OutcomeDenied, false},
		ReasonLoopDetected:          {OutcomeDenied, false},
		ReasonUncertainRepeat:       {OutcomeDenied, false},
		ReasonToolFailure:           {OutcomeFailed, false},
		ReasonToolFailureRetryable:  {OutcomeFailed, true},
		ReasonToolError:             {OutcomeFailed, false},
		ReasonInvalidResult:         {OutcomeFailed, false},
		ReasonTimeout:               {OutcomeFailed, true},
		ReasonCanceled:              {OutcomeFailed, true},
		ReasonWatermarkFailed:       {OutcomeUnavailable, true},
		ReasonLeaseLost:             {OutcomeUnavailable, true},
		ReasonEffectMayHaveHappened: {OutcomeUncertain, false},
		ReasonCrashLoop:             {OutcomeFailed, false},
		ReasonInputRequestDeclined:  {OutcomeFailed, false},
		ReasonDeviceDisconnected:    {OutcomeUnavailable, true},
		ReasonDeviceOffline:         {OutcomeUnavailable, true},
		ReasonUpstreamDisconnected:  {OutcomeUnavailable, true},
		ReasonUpstreamOffline:       {OutcomeUnavailable, true},
		ReasonNotSuspended:          {OutcomeDenied, false},
		ReasonResumeInvalid:         {OutcomeDenied, false},
		ReasonInternalError:         {OutcomeFailed, false},
	}
	for code, w := range want {
		if code.Status() != w.status || code.Retryable() != w.retryable {
			t.Errorf("%s: (%s, retryable %t), want (%s, retryable %t)", code, code.Status(), code.Retryable(), w.status, w.retryable)
		}
	}
	if ReasonCode("watermark_missing").Known() {
		t.Error("watermark_missing is a flag on the invocation (RT-13), not a reason code")
	}
}

func TestReasonCodes_SortedAndComplete(t *testing.T) {
	codes := ReasonCodes()
	if len(codes) != len(reasonTable) {
		t.Fatalf("ReasonCodes() has %d codes, the table %d", len(codes), len(reasonTable))
	}
	if !slices.IsSorted(codes) {
		t.Fatalf("ReasonCodes() is not sorted: %v", codes)
	}
	var unknown ReasonCode = "no_such_reason"
	if unknown.Known() || unknown.Status() != "" || unknown.Message() != "" || unknown.Retryable() {
		t.Fatal("an unknown code must have no status, message or retryable flag")
	}
}
