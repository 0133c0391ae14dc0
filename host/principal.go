package host

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/toolgen/toolgen/internal/textsafe"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/spec"
)

// ApproveScope is the scope a principal needs to approve or deny a held call through
// the operator service (POL-3: besides never being the call's caller).
const ApproveScope = "approvals.decide"

// ErrUnknownPrincipal is returned for a principal principals.yaml does not declare
// under local:.
var ErrUnknownPrincipal = errors.New("is not declared in " + spec.PrincipalsFile + " (local)")

// ErrTokenPrincipal is returned for a principal named without a proof that
// principals.yaml declares with a token: acting as it needs the token (issue 14,
// finding 6: naming a bot's id must never borrow its scopes).
var ErrTokenPrincipal = errors.New("is a token principal of " + spec.PrincipalsFile + ": prove it with its token (--token-file), or name a local principal")

// HasPrincipals reports whether the spec root declares its principals
// (principals.yaml): then every HTTP request needs a verified bearer token, and only
// declared principals act.
func (h *Host) HasPrincipals() bool { return h.verifier != nil }

// Principal returns the principal id acts as (ID-1), on the operator's word alone (no
// token). With principals.yaml it must be declared there under local:, with the file's
// tenant and scopes: a static token's principal is ErrTokenPrincipal, and an issuer's
// principals (NAME/subject) exist only with their token (VerifyToken). Without the file the host's own operator acts on its own machine: id in
// Config.Tenant, with every scope the served tools (and declared devices) require plus
// ApproveScope — never the scope of unclassified servers, which no principal holds.
func (h *Host) Principal(id string) (runtime.Principal, error) {
	local := h.principalID()
	if id == "" {
		id = local
	}
	p, err := h.principal(id)
	if err == nil && id == local && h.cfg.Scopes != nil {
		narrow := h.cfg.Scopes
		if h.verifier != nil {
			narrow = slices.DeleteFunc(slices.Clone(p.Scopes), func(s string) bool { return !slices.Contains(h.cfg.Scopes, s) })
		}
		p.Scopes = slices.Clone(narrow)
	}
	return p, err
}

func (h *Host) principal(id string) (runtime.Principal, error) {
	if h.verifier != nil {
		p, ok := h.verifier.Local(id)
		switch {
		case !ok && h.model.Principals.Principal(id) != nil:
			return runtime.Principal{}, fmt.Errorf("%s %w", textsafe.Field(id), ErrTokenPrincipal)
		case !ok:
			return runtime.Principal{}, fmt.Errorf("%s %w", textsafe.Field(id), ErrUnknownPrincipal)
		}
		return p, nil
	}
	p := runtime.Principal{ID: id, Tenant: h.localTenant(), Scopes: []string{ApproveScope}}
	for _, t := range h.reg.Current() {
		p.Scopes = append(p.Scopes, t.RequiredScopes...)
	}
	for _, d := range h.model.Devices { // their tools register when they dial in
		p.Scopes = append(p.Scopes, d.Server.RequiredScopes...)
	}
	p.Scopes = slices.DeleteFunc(p.Scopes, func(s string) bool { return s == spec.UnclassifiedScope })
	slices.Sort(p.Scopes)
	p.Scopes = slices.Compact(p.Scopes)
	return p, nil
}

// VerifyToken returns the principal a bearer token proves (a static token of
// principals.yaml or a JWT of one of its issuers). Without principals.yaml nothing can
// be verified.
func (h *Host) VerifyToken(ctx context.Context, token string) (runtime.Principal, error) {
	if h.verifier == nil {
		return runtime.Principal{}, fmt.Errorf("there is no %s to verify a token against", spec.PrincipalsFile)
	}
	p, _, err := h.verifier.Verify(ctx, token)
	return p, err
}

// localTenant is the tenant of the host's own work without principals.yaml: the
// devices it accepts, the wf1_violation entry of a refused protocol.
func (h *Host) localTenant() string {
	if h.cfg.Principal != "" {
		if sp := h.model.Principals.Principal(h.cfg.Principal); sp != nil {
			return sp.Tenant
		}
	}
	if h.cfg.Tenant != "" {
		return h.cfg.Tenant
	}
	return DefaultTenant
}
