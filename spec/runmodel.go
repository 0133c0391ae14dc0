package spec

import (
	"github.com/toolgen/toolgen/model"
	"github.com/toolgen/toolgen/vocab"
)

// The run-time model (package model) is what spec produces for the packages that serve
// and execute calls: they take these values and never import spec. Each Model method
// copies what the run time acts on and leaves the source positions behind; a nil
// receiver gives nil.

// Model is the run-time model of the tree: its servers, protocols, devices, egress
// allowlist, principals and notifications. The tree should have no findings: the run
// time trusts what it is given.
func (t *Tree) Model() *model.Tree {
	if t == nil {
		return nil
	}
	m := &model.Tree{Principals: t.Principals.Model(), Notifications: t.Notifications.Model()}
	for _, s := range t.Servers {
		m.Servers = append(m.Servers, s.Model())
	}
	for _, p := range t.Protocols {
		m.Protocols = append(m.Protocols, p.Model())
	}
	for _, d := range t.Devices {
		m.Devices = append(m.Devices, d.Model())
	}
	if t.Policy != nil {
		m.EgressAllow = t.Policy.EgressAllowNames()
	}
	return m
}

// Model is the server as the MCP client adapter takes it.
func (s *Server) Model() *model.Server {
	if s == nil {
		return nil
	}
	m := &model.Server{
		File: s.File, ServerID: s.ServerID, ConfiguredBy: s.ConfiguredBy, Tenant: s.Tenant,
		Classification: model.Classification{
			SideEffect: vocab.SideEffect(s.SideEffect), Risk: vocab.Risk(s.Risk), Idempotency: vocab.Idempotency(s.Idempotency),
			RequiredScopes: refNames(s.RequiredScopes),
		},
		Resources: s.Resources, Prompts: s.Prompts,
	}
	if s.HTTP != nil {
		m.HTTP = &model.HTTPTransport{URL: s.HTTP.URL}
	}
	if s.Stdio != nil {
		m.Stdio = &model.StdioTransport{Command: s.Stdio.Command, Args: s.Stdio.Args, Env: s.Stdio.Env}
	}
	return m
}

// Model is the device as the device gateway takes it.
func (d *Device) Model() *model.Device {
	if d == nil {
		return nil
	}
	return &model.Device{
		File: d.File, DeviceID: d.DeviceID, Description: d.Description, Tenant: d.Tenant,
		TokenSHA256: d.TokenSHA256, AllowTools: refNames(d.AllowTools), Server: d.Server.Model(),
	}
}

// Model is the protocol as package protocol applies it.
func (p *Protocol) Model() *model.Protocol {
	if p == nil {
		return nil
	}
	m := &model.Protocol{File: p.File, Name: p.Name, InitialMode: p.InitialMode.Name}
	for _, md := range p.Modes {
		m.Modes = append(m.Modes, model.Mode{Name: md.Name, Tools: refNames(md.Tools)})
	}
	return m
}

// EgressAllowNames are the host patterns of egress.allow, as [model.HostAllowed]
// matches them.
func (p *Policy) EgressAllowNames() []string {
	if p == nil {
		return nil
	}
	return refNames(p.EgressAllow)
}

// Model is the principals file as the identity verifier and the host take it.
func (p *Principals) Model() *model.Principals {
	if p == nil {
		return nil
	}
	m := &model.Principals{File: p.File, Resource: p.Resource, AuthorizationServers: refNames(p.AuthorizationServers)}
	static := func(list []*StaticPrincipal) []*model.StaticPrincipal {
		if list == nil {
			return nil
		}
		out := make([]*model.StaticPrincipal, len(list))
		for i, sp := range list {
			out[i] = &model.StaticPrincipal{ID: sp.ID, Tenant: sp.Tenant, Scopes: refNames(sp.Scopes), TokenSHA256: sp.TokenSHA256}
		}
		return out
	}
	m.Tokens, m.Local = static(p.Tokens), static(p.Local)
	for _, is := range p.Issuers {
		mi := &model.Issuer{
			Name: is.Name, Issuer: is.Issuer, Audience: is.Audience, Tenant: is.Tenant, Tenants: refNames(is.Tenants),
			JWKSURL: is.JWKSURL, KeyFile: is.KeyFile,
			IDClaim: is.IDClaim, TenantClaim: is.TenantClaim, ScopesClaim: is.ScopesClaim,
			Algorithms: is.Algorithms,
		}
		if c := is.Console; c != nil {
			mi.Console = &model.IssuerConsole{ClientID: c.ClientID, ClientSecretEnv: c.ClientSecretEnv,
				Scopes: refNames(c.Scopes), RedirectURL: c.RedirectURL}
		}
		m.Issuers = append(m.Issuers, mi)
	}
	return m
}

// Model is the notifications file as the console's notifier takes it.
func (n *Notifications) Model() *model.Notifications {
	if n == nil {
		return nil
	}
	m := &model.Notifications{File: n.File, ConsoleURL: n.ConsoleURL}
	for _, w := range n.Webhooks {
		m.Webhooks = append(m.Webhooks, &model.Webhook{
			Name: w.Name, Description: w.Description, URL: w.URL, URLEnv: w.URLEnv, Format: w.Format,
			SecretEnv: w.SecretEnv, Events: refNames(w.Events), Tenants: refNames(w.Tenants),
			MaxAttempts: w.MaxAttempts, Timeout: w.Timeout,
		})
	}
	return m
}

// refNames are the names of refs; nil for nil, so that "absent" and "empty" stay apart
// (a device's allow_tools: [] allows nothing, its absence everything).
func refNames(refs []Ref) []string {
	if refs == nil {
		return nil
	}
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.Name
	}
	return out
}
