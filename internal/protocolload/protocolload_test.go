package protocolload_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/toolgen/toolgen/internal/protocolload"
	"github.com/toolgen/toolgen/protocol"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/spec"
)

// repoRoot is the repository's spec root: tools/, servers/, protocols/, policy.yaml.
const repoRoot = "../.."

const shipped = "plan_implement_review"

// auditRecorder is an AuditLog that keeps the entries it is given.
type auditRecorder struct {
	mu      sync.Mutex
	entries []store.AuditEntry
	err     error
}

func (a *auditRecorder) AuditAppend(_ context.Context, e store.AuditEntry) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return 0, a.err
	}
	a.entries = append(a.entries, e)
	return int64(len(a.entries)), nil
}

func (a *auditRecorder) all() []store.AuditEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.entries)
}

// specRoot is the repository's tools, servers and policy with the given protocols
// (name -> YAML) in place of the shipped ones, so a test protocol is checked against the
// real tool specs (confers_approval) and server classifications.
func specRoot(t *testing.T, protocols map[string]string) fstest.MapFS {
	t.Helper()
	fsys := fstest.MapFS{}
	for _, dir := range []string{spec.ToolsDir, spec.ServersDir} {
		entries, err := os.ReadDir(path.Join(repoRoot, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".yaml") {
				continue
			}
			data, err := os.ReadFile(path.Join(repoRoot, dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			fsys[dir+"/"+e.Name()] = &fstest.MapFile{Data: data}
		}
	}
	data, err := os.ReadFile(path.Join(repoRoot, spec.PolicyFile))
	if err != nil {
		t.Fatal(err)
	}
	fsys[spec.PolicyFile] = &fstest.MapFile{Data: data}
	for name, doc := range protocols {
		fsys[spec.ProtocolsDir+"/"+name+".yaml"] = &fstest.MapFile{Data: []byte(doc)}
	}
	return fsys
}

// selfApproval shares review.approve (exclusive by default and confers_approval) between
// implement and review, and workspace.write_text, declared exclusive, between plan and
// implement.
const selfApproval = `name: self_approval
initial_mode: plan
exclusive_tools: [workspace.write_text]
modes:
  plan:
    tools: [workspace.read_text, workspace.write_text, protocol.dispatch]
  implement:
    tools: [workspace.write_text, review.approve, protocol.dispatch]
  review:
    tools: [workspace.read_text, review.approve, protocol.dispatch]
`

func TestLoad_ShippedProtocolLoads(t *testing.T) {
	audit := &auditRecorder{}
	p, err := protocolload.LoadDir(t.Context(), repoRoot, protocolload.Options{Name: shipped, Audit: audit})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != shipped || p.InitialMode() != "plan" {
		t.Errorf("loaded %s starting in %s, want %s starting in plan", p.Name(), p.InitialMode(), shipped)
	}
	if got, want := p.Modes(), []string{"plan", "implement", "review"}; !slices.Equal(got, want) {
		t.Errorf("modes %v, want %v", got, want)
	}
	if n := len(audit.all()); n != 0 {
		t.Errorf("a clean load wrote %d audit entries", n)
	}
}

func TestLoad_WF1Violation_RefusedAndAudited(t *testing.T) {
	audit := &auditRecorder{}
	fsys := specRoot(t, map[string]string{"self_approval": selfApproval})
	p, err := protocolload.LoadFS(t.Context(), fsys, "", protocolload.Options{Name: "self_approval", Audit: audit, Tenant: "acme", Principal: "ops"})
	if p != nil || !errors.Is(err, protocolload.ErrRefused) {
		t.Fatalf("LoadFS = %v, %v; want refused", p, err)
	}
	var refused *protocolload.RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("error %T is not a *RefusedError", err)
	}
	rules := map[string]string{}
	for _, d := range refused.Diagnostics {
		rules[d.Rule] = d.Message
		if !strings.Contains(err.Error(), d.String()) {
			t.Errorf("the refusal does not list %s:\n%v", d, err)
		}
	}
	if !strings.Contains(rules["WF-2"], "review.approve is held by 2 modes (implement, review)") {
		t.Errorf("WF-2 finding %q, want review.approve held by implement and review", rules["WF-2"])
	}
	if !strings.Contains(rules["WF-1"], "workspace.write_text is held by 2 modes (implement, plan)") {
		t.Errorf("WF-1 finding %q, want workspace.write_text held by implement and plan", rules["WF-1"])
	}

	entries := audit.all()
	if len(entries) != 1 {
		t.Fatalf("%d audit entries, want one wf1_violation", len(entries))
	}
	e := entries[0]
	if e.Kind != protocol.KindWF1Violation || e.Mode != "plan" || e.Tenant != "acme" || e.Principal != "ops" {
		t.Errorf("entry %+v, want wf1_violation in mode plan (the initial mode) for acme/ops", e)
	}
	var detail struct {
		Protocol    string           `json:"protocol"`
		Refused     bool             `json:"refused"`
		Diagnostics spec.Diagnostics `json:"diagnostics"`
	}
	if err := json.Unmarshal(e.Detail, &detail); err != nil {
		t.Fatalf("detail %s: %v", e.Detail, err)
	}
	if detail.Protocol != "self_approval" || !detail.Refused || len(detail.Diagnostics) != 2 {
		t.Errorf("detail %s, want the protocol, refused and both WF findings", e.Detail)
	}
}

func TestLoad_WF1Violation_PinnedServer_EntryRecordsPinnedMode(t *testing.T) {
	audit := &auditRecorder{}
	fsys := specRoot(t, map[string]string{"self_approval": selfApproval})
	_, err := protocolload.LoadFS(t.Context(), fsys, "", protocolload.Options{Name: "self_approval", PinnedMode: "review", Audit: audit})
	if !errors.Is(err, protocolload.ErrRefused) {
		t.Fatalf("err %v, want refused", err)
	}
	if entries := audit.all(); len(entries) != 1 || entries[0].Mode != "review" {
		t.Errorf("entries %+v, want one wf1_violation in the pinned mode review", entries)
	}
}

func TestLoad_WF1Violation_AuditFailure_ReportsBoth(t *testing.T) {
	boom := errors.New("disk full")
	audit := &auditRecorder{err: boom}
	fsys := specRoot(t, map[string]string{"self_approval": selfApproval})
	_, err := protocolload.LoadFS(t.Context(), fsys, "", protocolload.Options{Name: "self_approval", Audit: audit})
	if !errors.Is(err, protocolload.ErrRefused) || !errors.Is(err, boom) {
		t.Errorf("err %v, want the refusal and the audit failure", err)
	}
}

func TestLoad_OtherFinding_RefusedWithoutWF1Entry(t *testing.T) {
	audit := &auditRecorder{}
	fsys := specRoot(t, map[string]string{"typo": `name: typo
initial_mode: only
modes:
  only:
    tools: [workspace.read_txt]
`})
	_, err := protocolload.LoadFS(t.Context(), fsys, "", protocolload.Options{Name: "typo", Audit: audit})
	if !errors.Is(err, protocolload.ErrRefused) || !strings.Contains(err.Error(), "workspace.read_txt") {
		t.Fatalf("err %v, want refused naming the unknown tool", err)
	}
	if n := len(audit.all()); n != 0 {
		t.Errorf("%d audit entries; a finding other than WF-1/WF-2 is no wf1_violation", n)
	}
}

func TestLoad_UnknownProtocolOrPinnedMode(t *testing.T) {
	audit := &auditRecorder{}
	_, err := protocolload.LoadDir(t.Context(), repoRoot, protocolload.Options{Name: "nope", Audit: audit})
	if !errors.Is(err, protocolload.ErrUnknownProtocol) {
		t.Errorf("unknown protocol: %v", err)
	}
	_, err = protocolload.LoadDir(t.Context(), repoRoot, protocolload.Options{Name: shipped, PinnedMode: "deploy", Audit: audit})
	if !errors.Is(err, protocol.ErrUnknownMode) {
		t.Errorf("unknown pinned mode: %v", err)
	}
}
