package identity

import (
	"context"
	"crypto/subtle"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolgen/toolgen/model"
	"github.com/toolgen/toolgen/runtime"
)

// ConsoleIssuer is an issuer whose people may sign in to the reviewer's console
// (principals.yaml issuers[].console, issue 18).
type ConsoleIssuer struct {
	Name    string // the issuer's name, the namespace of its principals
	Issuer  string // its iss, where discovery starts
	Console *model.IssuerConsole
}

// ConsoleIssuers lists the issuers with a console block, by name.
func (v *Verifier) ConsoleIssuers() []ConsoleIssuer {
	var out []ConsoleIssuer
	for _, is := range v.issuers {
		if is.console != nil {
			out = append(out, ConsoleIssuer{Name: is.conf.Name, Issuer: is.conf.Issuer, Console: is.conf.Console})
		}
	}
	slices.SortFunc(out, func(a, b ConsoleIssuer) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// VerifyIDToken verifies an ID token the console received from the token endpoint of
// the issuer named name, for a sign-in that sent nonce: signed by the issuer's keys with
// one of its algorithms, issued by it, for the console's client id (aud), unexpired,
// carrying the same nonce. The principal is mapped exactly as a bearer token's (the
// issuer's claims, its tenant binding, NAME/subject). It returns when the token expires.
// Every failure wraps ErrInvalidToken and never contains the token.
func (v *Verifier) VerifyIDToken(ctx context.Context, name, raw, nonce string) (runtime.Principal, time.Time, error) {
	if raw == "" || len(raw) > MaxTokenBytes {
		return runtime.Principal{}, time.Time{}, fmt.Errorf("%w: empty or oversized ID token", ErrInvalidToken)
	}
	var is *issuer
	for _, x := range v.issuers {
		if x.conf.Name == name && x.console != nil {
			is = x
		}
	}
	if is == nil {
		return runtime.Principal{}, time.Time{}, fmt.Errorf("%w: no console sign-in with issuer %q", ErrInvalidToken, name)
	}
	idt, err := is.console.Verify(ctx, raw)
	if err != nil {
		return runtime.Principal{}, time.Time{}, fmt.Errorf("%w: ID token: %s", ErrInvalidToken, why(err))
	}
	if nonce == "" || subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return runtime.Principal{}, time.Time{}, fmt.Errorf("%w: ID token: not the nonce of this sign-in", ErrInvalidToken)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return runtime.Principal{}, time.Time{}, fmt.Errorf("%w: ID token claims: %v", ErrInvalidToken, err)
	}
	p, err := is.principal(claims)
	if err != nil {
		return runtime.Principal{}, time.Time{}, fmt.Errorf("%w: ID token: %v", ErrInvalidToken, err)
	}
	return p, idt.Expiry, nil
}
