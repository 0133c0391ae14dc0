package spec

import (
	"reflect"
	"testing"

	"github.com/toolgen/toolgen/model"
	"github.com/toolgen/toolgen/vocab"
)

// The run-time model of the repository's spec root carries what the run time acts on:
// the servers' classifications (a missing field at its most restrictive value), their
// transports, the protocol's modes as declared and the egress allowlist.
func TestTreeModel_RepositoryRoot(t *testing.T) {
	tree, diags, err := LoadDir("..")
	if err != nil || len(diags) > 0 {
		t.Fatalf("spec root: %v %v", err, diags)
	}
	m := tree.Model()
	if len(m.Servers) != len(tree.Servers) || len(m.Protocols) != len(tree.Protocols) || len(m.Devices) != len(tree.Devices) {
		t.Fatalf("model has %d servers, %d protocols, %d devices; the tree %d, %d, %d",
			len(m.Servers), len(m.Protocols), len(m.Devices), len(tree.Servers), len(tree.Protocols), len(tree.Devices))
	}
	for i, s := range tree.Servers {
		ms := m.Servers[i]
		want := model.Classification{SideEffect: vocab.SideEffect(s.SideEffect), Risk: vocab.Risk(s.Risk),
			Idempotency: vocab.Idempotency(s.Idempotency), RequiredScopes: refNames(s.RequiredScopes)}
		if ms.ServerID != s.ServerID || ms.File != s.File || ms.ConfiguredBy != s.ConfiguredBy || ms.Tenant != s.Tenant ||
			!reflect.DeepEqual(ms.Classification, want) || ms.Resources != s.Resources || ms.Prompts != s.Prompts {
			t.Errorf("server %s: model %+v, want the file's %+v", s.ServerID, ms, s)
		}
		if (ms.HTTP == nil) != (s.HTTP == nil) || (ms.Stdio == nil) != (s.Stdio == nil) {
			t.Errorf("server %s: transport not carried over", s.ServerID)
		}
	}
	if tk := m.Servers[len(m.Servers)-1]; tk.ServerID != "tickets" || tk.Risk != "critical" || tk.Idempotency != "non_idempotent" {
		t.Errorf("tickets leaves risk and idempotency out: model %+v, want critical and non_idempotent", tk.Classification)
	}
	p := m.Protocol("plan_implement_review")
	if p == nil || p.InitialMode != "plan" || len(p.Modes) != 3 || p.Modes[0].Name != "plan" || len(p.Modes[0].Tools) == 0 {
		t.Errorf("protocol: %+v", p)
	}
	if !reflect.DeepEqual(m.EgressAllow, refNames(tree.Policy.EgressAllow)) {
		t.Errorf("egress allow %v, want %v", m.EgressAllow, tree.Policy.EgressAllow)
	}
}

// A device's allow_tools keeps apart "absent" (every tool) and "empty" (none) in the
// model, as in the file.
func TestDeviceModel_AllowToolsAbsentOrEmpty(t *testing.T) {
	const head = "device_id: lab\ntenant: acme\ntoken_sha256: " +
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"
	for _, c := range []struct {
		extra     string
		allowsAny bool
	}{{"", true}, {"allow_tools: []\n", false}, {"allow_tools: [echo]\n", false}} {
		d, diags := LoadDevice("devices/lab.yaml", "devices/lab.yaml", []byte(head+c.extra))
		if len(diags) > 0 {
			t.Fatal(diags)
		}
		m := d.Model()
		if got := m.Allows("anything"); got != c.allowsAny {
			t.Errorf("%q: model allows any tool %v, want %v", c.extra, got, c.allowsAny)
		}
		if m.Server == nil || m.Server.ServerID != "lab" || m.Server.Risk != "critical" || !reflect.DeepEqual(m.Server.RequiredScopes, []string{UnclassifiedScope}) {
			t.Errorf("%q: device server %+v, want lab at its most restrictive classification", c.extra, m.Server)
		}
	}
}

// Principals and their issuers come over whole: scopes, tenant bindings and the
// console's scopes as names.
func TestPrincipalsModel(t *testing.T) {
	doc := `tokens:
  - {id: ci, tenant: acme, scopes: [workspace.read], token_sha256: "` + "1111111111111111111111111111111111111111111111111111111111111111" + `"}
local:
  - {id: ops, tenant: acme, scopes: [approvals.decide]}
issuers:
  - name: login
    issuer: https://login.example.com
    audience: toolgen
    jwks_url: https://login.example.com/jwks
    tenants: [acme, beta]
    console: {client_id: console, scopes: [profile]}
`
	p, diags := LoadPrincipals(PrincipalsFile, PrincipalsFile, []byte(doc))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	m := p.Model()
	if sp := m.Principal("ci"); sp == nil || sp.Tenant != "acme" || !reflect.DeepEqual(sp.Scopes, []string{"workspace.read"}) || sp.TokenSHA256 == "" {
		t.Errorf("token principal: %+v", sp)
	}
	if sp := m.Principal("ops"); sp == nil || !reflect.DeepEqual(sp.Scopes, []string{"approvals.decide"}) {
		t.Errorf("local principal: %+v", sp)
	}
	is := m.Issuers[0]
	src := p.Issuers[0]
	if is.Name != "login" || !is.AssertsTenant("beta") || is.AssertsTenant("gamma") ||
		!reflect.DeepEqual(is.TenantNames(), src.TenantNames()) || is.IDClaim != src.IDClaim || !reflect.DeepEqual(is.Algorithms, src.Algorithms) {
		t.Errorf("issuer %+v, want the file's %+v", is, src)
	}
	if is.Console == nil || !reflect.DeepEqual(is.Console.ScopeNames(), src.Console.ScopeNames()) {
		t.Errorf("console %+v", is.Console)
	}
}

// The allowlist rule is one: the build-time check and the run-time guard agree.
func TestHostAllowed_SameRuleAsTheModel(t *testing.T) {
	allow := []Ref{{Name: "mcp.example.com"}, {Name: "*.tickets.example.org"}}
	for _, host := range []string{"mcp.example.com", "MCP.example.com.", "a.tickets.example.org", "tickets.example.org", "evil.com"} {
		if HostAllowed(host, allow) != model.HostAllowed(host, refNames(allow)) {
			t.Errorf("%s: spec and model disagree", host)
		}
	}
}
