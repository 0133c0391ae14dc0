package host

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/spec"
)

// echoTool is a hand-made implementation of a spec: what a generated wrapper is, minus
// the generation.
type echoTool struct{ spec runtime.ToolSpec }

func (e *echoTool) Spec() *runtime.ToolSpec { return &e.spec }
func (e *echoTool) Execute(ctx context.Context, tc *runtime.ExecContext, args json.RawMessage) (runtime.ToolResult, error) {
	if e.spec.Idempotency.NeedsWatermark() {
		if err := tc.MarkEffectSent(ctx); err != nil {
			return runtime.ToolResult{}, err
		}
	}
	return runtime.StructuredResult(&e.spec, map[string]any{"ok": true})
}

const echoYAML = `name: demo.echo
version: 1
description: Echo.
side_effect: none
risk: low
args:
  text: {type: string, max_length: 100}
result:
  ok: {type: boolean}
`

const writeYAML = `name: demo.write
version: 1
description: Write something.
side_effect: write
idempotency: non_idempotent
risk: medium
required_scopes: [demo.write]
args:
  text: {type: string, max_length: 100}
result:
  ok: {type: boolean}
`

// specRoot writes files (relative path -> content) into a new spec root.
// newAgentHost is a Host on cfg, closed when the test ends, and its default agent.
func newAgentHost(t *testing.T, cfg Config) (*Host, runtime.Principal) {
	t.Helper()
	h, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	agent, err := h.Principal("agent")
	if err != nil {
		t.Fatal(err)
	}
	return h, agent
}

func specRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// implOf builds the implementation of the spec yaml, as its generated wrapper would
// carry it.
func implOf(t *testing.T, yaml string) *echoTool {
	t.Helper()
	name := strings.TrimPrefix(strings.SplitN(yaml, "\n", 2)[0], "name: ")
	root := specRoot(t, map[string]string{"tools/" + name + ".yaml": yaml})
	tree, diags, err := spec.LoadFS(os.DirFS(root), "")
	if err != nil || len(diags) > 0 {
		t.Fatalf("spec: %v %v", err, diags)
	}
	st := tree.Tool(name)
	in, out, sha := st.Schemas()
	return &echoTool{spec: runtime.ToolSpec{Name: name, Version: st.Version, Kind: runtime.KindAction,
		SideEffect: runtime.SideEffect(st.SideEffect), Idempotency: runtime.Idempotency(st.Idempotency),
		Risk: runtime.Risk(st.Risk), OutputTrust: runtime.TrustTool, InputSchema: in, OutputSchema: out,
		SchemaSHA256: sha, Source: st.File, RequiredScopes: []string{"demo.write"}}}
}

// TestNew_SpecsAndImplementationsAgree (HOST-3): a spec without an implementation, an
// implementation without a spec and a stale generated definition each stop the host
// with a message naming the file.
func TestNew_SpecsAndImplementationsAgree(t *testing.T) {
	ctx := t.Context()
	echo := implOf(t, echoYAML)
	for _, tc := range []struct {
		name  string
		files map[string]string
		tools []runtime.Tool
		want  string
	}{
		{"spec without implementation", map[string]string{"tools/demo.echo.yaml": echoYAML, "tools/demo.write.yaml": writeYAML},
			[]runtime.Tool{echo}, "tools/demo.write.yaml: demo.write has no implementation registered with this host"},
		{"implementation without spec", map[string]string{"tools/demo.echo.yaml": echoYAML},
			[]runtime.Tool{echo, implOf(t, writeYAML)}, "tools/demo.write.yaml: the implementation of demo.write (Config.Tools) has no spec"},
		{"stale generated code", map[string]string{"tools/demo.echo.yaml": strings.Replace(echoYAML, "Echo.", "Echo the text.", 1)},
			[]runtime.Tool{echo}, "tools/demo.echo.yaml: the generated code of demo.echo is stale"},
		{"copied builtin not opted in", map[string]string{"tools/demo.echo.yaml": echoYAML, "tools/protocol.dispatch.yaml": builtinYAML(t, "protocol.dispatch")},
			[]runtime.Tool{echo}, "tools/protocol.dispatch.yaml: protocol.dispatch has no implementation registered with this host: it is a builtin"},
		{"unknown builtin", map[string]string{"tools/demo.echo.yaml": echoYAML},
			nil, `Config.Builtins: "protocol.dispach" is not a builtin tool (did you mean "protocol.dispatch"?)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := specRoot(t, tc.files)
			cfg := Config{Dir: dir, Tools: tc.tools}
			if tc.tools == nil {
				cfg.Tools, cfg.Builtins = []runtime.Tool{echo}, []string{"protocol.dispach"}
			}
			h, err := New(ctx, cfg)
			if err == nil {
				h.Close()
				t.Fatalf("New started; want %q", tc.want)
			}
			if !strings.Contains(err.Error(), filepath.ToSlash(filepath.Join(dir, ""))) && strings.HasPrefix(tc.want, "tools/") {
				t.Errorf("the message does not name the spec root: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant it to contain %q", err, tc.want)
			}
			if _, serr := os.Stat(filepath.Join(dir, DefaultStateDir)); serr == nil {
				t.Errorf("a refused host left its state directory behind")
			}
		})
	}
	// And when they agree the host starts, serving the implementation and the builtins
	// it named, which a protocol may name without their YAML.
	dir := specRoot(t, map[string]string{"tools/demo.echo.yaml": echoYAML, "protocols/p.yaml": `name: p
initial_mode: m
modes:
  m: {tools: [demo.echo, protocol.dispatch]}
`})
	h, err := New(ctx, Config{Dir: dir, Tools: []runtime.Tool{echo}, Builtins: []string{"protocol.dispatch"}, Protocol: "p"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var names []string
	for _, s := range h.Registry().Current() {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, " "); got != "demo.echo protocol.dispatch" {
		t.Errorf("served %s", got)
	}
	// A protocol naming a builtin the host does not serve is refused, positioned.
	_, err = New(ctx, Config{Dir: dir, Tools: []runtime.Tool{echo}, Protocol: "p"})
	if err == nil || !strings.Contains(err.Error(), "protocols/p.yaml:4:") || !strings.Contains(err.Error(), "add it to Config.Builtins") {
		t.Errorf("protocol naming an unserved builtin: %v", err)
	}
}

// builtinYAML is the embedded spec of a builtin, as an author who copied it has it.
func builtinYAML(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "tools", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestOperator_Rules (HOST-2): the rules of a decision and a review, once — the actor's
// tenant only, the approving scope, never the caller — and the audit entry written
// with the decision.
func TestOperator_Rules(t *testing.T) {
	ctx := t.Context()
	write := implOf(t, writeYAML)
	dir := specRoot(t, map[string]string{"tools/demo.write.yaml": writeYAML})
	h, agent := newAgentHost(t, Config{Dir: dir, Tools: []runtime.Tool{write}, ApprovalHold: 1})
	// Arguments of unknown provenance on a medium-risk write: held for a person.
	o, err := h.Call(ctx, CallRequest{Tool: "demo.write", Args: json.RawMessage(`{"text":"x"}`), Principal: agent,
		ArgumentTrust: runtime.TrustExternalUntrusted})
	if err != nil || o.ReasonCode != runtime.ReasonApprovalPending {
		t.Fatalf("call: %v %s", err, o.ReasonCode)
	}
	op := h.Operator()
	held, err := op.Approvals(ctx, agent)
	if err != nil || len(held) != 1 {
		t.Fatalf("approvals: %v %d", err, len(held))
	}
	id := held[0].ID
	bob := runtime.Principal{ID: "bob", Tenant: agent.Tenant, Scopes: []string{ApproveScope}}
	for _, tc := range []struct {
		name  string
		actor runtime.Principal
		want  error
	}{
		{"another tenant", runtime.Principal{ID: "eve", Tenant: "other", Scopes: []string{ApproveScope}}, ErrNotFound},
		{"without the scope", runtime.Principal{ID: "carol", Tenant: agent.Tenant}, ErrMissingScope},
		{"the caller", agent, ErrSelfDecision},
	} {
		if _, err := op.Approve(ctx, tc.actor, id, ""); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if lines, err := op.Audit(ctx, runtime.Principal{ID: "eve", Tenant: "other"}, AuditFilter{}); err != nil || len(lines) != 0 {
		t.Errorf("another tenant's audit view: %d lines, %v", len(lines), err)
	}
	if _, err := op.Approve(ctx, bob, id, "fine"); err != nil {
		t.Fatal(err)
	}
	if _, err := op.Deny(ctx, bob, id, ""); !errors.Is(err, ErrNotHeld) {
		t.Errorf("second decision: %v, want ErrNotHeld", err)
	}
	lines, err := op.Audit(ctx, bob, AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var approvals int
	for _, l := range lines {
		if l.Kind == AuditApproval {
			approvals++
			if l.Principal != "bob" || l.Tool != "demo.write" || !strings.Contains(string(l.Detail), `"reason":"fine"`) {
				t.Errorf("approval entry %+v", l)
			}
		}
	}
	if approvals != 1 {
		t.Errorf("%d approval entries, want 1 (refused decisions write none)", approvals)
	}
	if _, err := op.Resolve(ctx, bob, id, true, ""); !errors.Is(err, ErrNotUncertain) {
		t.Errorf("resolve of a call that is not UNCERTAIN: %v", err)
	}
	if _, err := op.Resolve(ctx, runtime.Principal{ID: "eve", Tenant: "other"}, id, true, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("resolve in another tenant: %v", err)
	}
	// Without principals.yaml the local operator holds the approving scope.
	if op, _ := h.Principal("operator"); !contains(op.Scopes, ApproveScope) || !contains(op.Scopes, "demo.write") {
		t.Errorf("local principal's scopes: %v", op.Scopes)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
