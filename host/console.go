package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolgen/toolgen/host/console"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// ConsolePath is where Handler serves the reviewer's console (issue 18, UI-1).
const ConsolePath = console.Path

// ConsoleOperator is the principal the console acts as without principals.yaml: every
// (loopback) visitor is the host's operator, as `toolrun approve` is by default.
const ConsoleOperator = "operator"

// consoleOperator is the operator service as the console sees it (HOST-2): the same
// methods, with the console's errors wrapped around the service's.
type consoleOperator struct{ o *Operator }

func consoleErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("%w: %w", console.ErrNotFound, err)
	case errors.Is(err, ErrSelfDecision):
		return fmt.Errorf("%w: %w", console.ErrSelfDecision, err)
	case errors.Is(err, ErrMissingScope):
		return fmt.Errorf("%w: %w", console.ErrMissingScope, err)
	case errors.Is(err, ErrNotHeld), errors.Is(err, ErrNotUncertain):
		return fmt.Errorf("%w: %w", console.ErrNotPending, err)
	}
	return err
}

func (c consoleOperator) Approvals(ctx context.Context, actor runtime.Principal) ([]*store.Invocation, error) {
	invs, err := c.o.Approvals(ctx, actor)
	return invs, consoleErr(err)
}

func (c consoleOperator) Uncertain(ctx context.Context, actor runtime.Principal) ([]*store.Invocation, error) {
	invs, err := c.o.Uncertain(ctx, actor)
	return invs, consoleErr(err)
}

func (c consoleOperator) Invocation(ctx context.Context, actor runtime.Principal, id int64) (*store.Invocation, error) {
	inv, err := c.o.Invocation(ctx, actor, id)
	return inv, consoleErr(err)
}

func (c consoleOperator) Decide(ctx context.Context, actor runtime.Principal, id int64, approve bool, reason string) error {
	_, err := c.o.Decide(ctx, actor, id, approve, reason)
	return consoleErr(err)
}

func (c consoleOperator) Resolve(ctx context.Context, actor runtime.Principal, id int64, happened bool, reason string) error {
	_, err := c.o.Resolve(ctx, actor, id, happened, reason)
	return consoleErr(err)
}

func (c consoleOperator) Audit(ctx context.Context, actor runtime.Principal, f console.AuditFilter) ([]console.AuditLine, error) {
	lines, err := c.o.Audit(ctx, actor, AuditFilter{SessionID: f.SessionID, RunID: f.RunID, Tool: f.Tool, Mode: f.Mode,
		Decision: f.Decision, Kind: f.Kind})
	if err != nil {
		return nil, consoleErr(err)
	}
	out := make([]console.AuditLine, len(lines))
	for i, l := range lines {
		out[i] = console.AuditLine{At: l.At, Kind: l.Kind, Mode: l.Mode, Principal: l.Principal, SessionID: l.SessionID,
			RunID: l.RunID, Tool: l.Tool, Status: l.Status, Reason: l.Reason, Decision: l.Decision,
			Invocation: l.Invocation, Detail: l.Detail, Script: l.Script, Ordinal: l.Ordinal}
	}
	return out, nil
}

func (c consoleOperator) ApprovalOf(ctx context.Context, actor runtime.Principal, inv *store.Invocation) (*store.Approval, bool, error) {
	a, ok, err := c.o.ApprovalOf(ctx, actor, inv)
	return a, ok, consoleErr(err)
}

func (c consoleOperator) HoldReason(ctx context.Context, actor runtime.Principal, inv *store.Invocation) (console.HoldReason, bool, error) {
	r, ok, err := c.o.HoldReason(ctx, actor, inv)
	return console.HoldReason{Cause: r.Cause, Rule: r.Rule, Why: r.Why, At: r.At}, ok, consoleErr(err)
}

// newConsole assembles the console on the host's operator service: sign-in by the
// tokens and issuers of principals.yaml, or, without it, every visitor the operator.
func (h *Host) newConsole() (*console.Console, error) {
	auth := console.Auth{}
	if h.verifier == nil {
		auth.Local = func() (runtime.Principal, error) { return h.Principal(ConsoleOperator) }
	} else {
		auth.VerifyToken = h.VerifyToken
		for _, ci := range h.verifier.ConsoleIssuers() {
			auth.Issuers = append(auth.Issuers, console.Issuer{Name: ci.Name, URL: ci.Issuer, ClientID: ci.Console.ClientID,
				ClientSecretEnv: ci.Console.ClientSecretEnv, Scopes: ci.Console.ScopeNames(), RedirectURL: ci.Console.RedirectURL})
		}
		auth.VerifyIDToken = h.verifier.VerifyIDToken
	}
	return console.New(console.Options{Operator: consoleOperator{o: h.Operator()}, Store: h.st, Auth: auth,
		ApprovalHold: limit(h.cfg.ApprovalHold, runtime.DefaultApprovalHold), Logger: h.log.With("component", "console")})
}

// startNotifier starts the notifications of notifications.yaml, when it names a
// webhook, until ctx ends (Start runs it with the host's maintenance).
func (h *Host) startNotifier(ctx context.Context) error {
	n := h.model.Notifications
	if n == nil || len(n.Webhooks) == 0 {
		return nil
	}
	nt, err := console.NewNotifier(console.NotifierOptions{Notifications: n, Store: h.st,
		Operator: consoleOperator{o: h.Operator()}, Logger: h.log.With("component", "notifications")})
	if err != nil {
		return err
	}
	return nt.Start(ctx)
}
