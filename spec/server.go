package spec

import (
	"net/url"
	"path"

	"github.com/toolgen/toolgen/model"
	"github.com/toolgen/toolgen/vocab"
)

var serverKeys = []string{"server_id", "description", "configured_by", "tenant", "transport", "classification", "resources", "prompts"}

// LoadServer parses and checks one servers/*.yaml classification (SPEC-7). The egress
// allowlist check needs policy.yaml and is done by [Check].
func LoadServer(rel, display string, data []byte) (*Server, Diagnostics) {
	var diags Diagnostics
	s := loadServer(reporter{path: display, diags: &diags}, rel, data)
	return s, diags
}

func loadServer(r reporter, rel string, data []byte) *Server {
	root := parseDocument(r, data)
	if root == nil {
		return nil
	}
	m := r.asMapping(root, "server classification", serverKeys...)
	if m == nil {
		return nil
	}
	s := &Server{File: rel, Positions: Positions{m}, Resources: "hide", Prompts: "hide"}
	if id, ok := m.requiredStr("server_id", "server classification"); ok {
		s.ServerID = id
		switch {
		case !segment.MatchString(id):
			r.errorf(m.at("server_id"), "SPEC-7.server-id", "server_id %q must be one lower_snake_case name segment: [a-z][a-z0-9]*(_[a-z0-9]+)*", id)
		case path.Base(rel) != id+".yaml":
			r.errorf(m.at("server_id"), "SPEC-7.file-name", "server %q must be in a file named %s, not %s", id, id+".yaml", path.Base(rel))
		}
	}
	m.str("description")
	if !m.has("configured_by") {
		r.errorf(posOf(root), "SPEC-7.missing-key", "server classification is missing required key %q (operator or tenant)", "configured_by")
	} else if v, ok := m.oneOf("configured_by", "SPEC-7", "operator", "tenant"); ok {
		s.ConfiguredBy = v
	}
	if t, ok := m.str("tenant"); ok {
		switch {
		case s.ConfiguredBy == "operator":
			r.errorf(m.at("tenant"), "SPEC-7.operator-tenant", "an operator's server serves every tenant: tenant applies to configured_by: tenant only")
		case !tenantName.MatchString(t):
			r.errorf(m.at("tenant"), "SPEC-7.tenant-name", "tenant %q must match %s", t, tenantName)
		default:
			s.Tenant = t
		}
	} else if s.ConfiguredBy == "tenant" && !m.has("tenant") {
		r.errorf(m.keyAt("configured_by"), "SPEC-7.tenant-missing", "a tenant-configured server names its tenant (tenant: NAME): only that tenant's principals see and call its tools (ID-2)")
	}
	if v, ok := m.oneOf("resources", "SPEC-7", "expose", "hide"); ok {
		s.Resources = v
	}
	if v, ok := m.oneOf("prompts", "SPEC-7", "expose", "hide"); ok {
		s.Prompts = v
	}
	if !m.has("transport") {
		r.errorf(posOf(root), "SPEC-7.missing-key", "server classification is missing required key %q (http: {url} or stdio: {command})", "transport")
	} else if tm := r.asMapping(m.get("transport"), "transport", "http", "stdio"); tm != nil {
		switch {
		case tm.has("http") && tm.has("stdio"):
			r.errorf(tm.keyAt("stdio"), "SPEC-7.transport-both", "transport must be exactly one of http or stdio, not both")
		case !tm.has("http") && !tm.has("stdio"):
			r.errorf(posOf(tm.node), "SPEC-7.transport-none", "transport must be one of http: {url} or stdio: {command, args, env}")
		case tm.has("http"):
			if hm := r.asMapping(tm.get("http"), "transport.http", "url"); hm != nil {
				if u, ok := hm.requiredStr("url", "transport.http"); ok {
					s.HTTP = &HTTPTransport{URL: u, URLPos: hm.at("url")}
					if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Hostname() == "" {
						r.errorf(hm.at("url"), "SPEC-7.url", "url %q must be an absolute http or https URL", u)
					} else if s.ConfiguredBy == "tenant" && pu.Scheme != "https" {
						r.errorf(hm.at("url"), "SPEC-7.tenant-https", "a tenant-configured server must use https, found %q", u)
					}
				}
			}
		default:
			if s.ConfiguredBy == "tenant" {
				r.errorf(tm.keyAt("stdio"), "SPEC-7.tenant-stdio", "a tenant-configured server cannot use stdio: a stdio server runs in the worker's trust zone; use http through the egress allowlist or have an operator configure it")
			}
			if sm := r.asMapping(tm.get("stdio"), "transport.stdio", "command", "args", "env"); sm != nil {
				st := &StdioTransport{}
				st.Command, _ = sm.requiredStr("command", "transport.stdio")
				if args, ok := sm.strList("args"); ok {
					for _, a := range args {
						st.Args = append(st.Args, a.Name)
					}
				}
				if sm.has("env") {
					if em := r.asMapping(sm.get("env"), "transport.stdio.env"); em != nil {
						st.Env = map[string]string{}
						for _, k := range em.order {
							if v, ok := em.str(k); ok {
								st.Env[k] = v
							}
						}
					}
				}
				s.Stdio = st
			}
		}
	}
	loadClassification(r, m, s)
	return s
}

func loadClassification(r reporter, m *mapping, s *Server) {
	// The most restrictive value of each (SPEC-7).
	s.SideEffect, s.Risk, s.Idempotency = string(vocab.SideEffectWrite), string(vocab.RiskCritical), string(vocab.NonIdempotent)
	s.RequiredScopes = []Ref{{Name: UnclassifiedScope}}
	var cm *mapping
	if m.has("classification") {
		cm = r.asMapping(m.get("classification"), "classification", "side_effect", "risk", "idempotency", "required_scopes")
	}
	field := func(key string, allowed []string, dst *string) {
		if cm == nil || !cm.has(key) {
			s.Defaulted = append(s.Defaulted, key)
			return
		}
		if v, ok := cm.oneOf(key, "SPEC-7", allowed...); ok {
			*dst = v
		}
	}
	field("idempotency", Idempotencies, &s.Idempotency)
	if cm == nil || !cm.has("required_scopes") {
		s.Defaulted = append(s.Defaulted, "required_scopes")
	} else if scopes, ok := cm.strList("required_scopes"); ok {
		for _, sc := range scopes {
			if !scopePattern.MatchString(sc.Name) {
				r.errorf(sc.Pos, "SPEC-7.scope-grammar", "scope %q must match %s", sc.Name, scopePattern)
			}
			if sc.Name == UnclassifiedScope {
				r.errorf(sc.Pos, "SPEC-7.scope-reserved", "scope %q is reserved for unclassified servers", sc.Name)
			}
		}
		s.RequiredScopes = scopes
	}
	field("risk", Risks, &s.Risk)
	field("side_effect", SideEffects, &s.SideEffect)
	if s.SideEffect == string(vocab.SideEffectNone) && cm != nil && cm.has("idempotency") && s.Idempotency != string(vocab.Idempotent) {
		r.errorf(cm.at("idempotency"), "SPEC-3.none-implies-idempotent", "side_effect none implies idempotent, found %s", s.Idempotency)
	}
}

// HostAllowed reports whether host matches one egress allowlist pattern: an exact host,
// or "*.example.org" for any subdomain of example.org (not example.org itself). It is
// the run time's rule ([model.HostAllowed]), so a URL the check accepts is one the
// egress guard lets through.
func HostAllowed(host string, allow []Ref) bool {
	return model.HostAllowed(host, refNames(allow))
}
