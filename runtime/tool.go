package runtime

import (
	"context"
	"encoding/json"
	"time"
)

// Kind says where a tool's effect lands: on the world (action) or on the run (control).
type Kind string

const (
	KindAction  Kind = "action"
	KindControl Kind = "control"
)

// SideEffect is what a tool may do to the world.
type SideEffect string

const (
	SideEffectNone  SideEffect = "none"
	SideEffectRead  SideEffect = "read"
	SideEffectWrite SideEffect = "write"
)

// Idempotency is the recovery class of a tool: it decides what the sweep may retry (RT-4).
type Idempotency string

const (
	Idempotent              Idempotency = "idempotent"
	ConditionallyIdempotent Idempotency = "conditionally_idempotent"
	NonIdempotent           Idempotency = "non_idempotent"
)

// NeedsWatermark reports whether calls of this class must mark the effect before it is sent.
func (i Idempotency) NeedsWatermark() bool { return i != Idempotent }

// Risk is the spec's risk level; policy uses it for approvals (POL-1).
type Risk string

const (
	RiskLow      Risk = "low"
	RiskMedium   Risk = "medium"
	RiskHigh     Risk = "high"
	RiskCritical Risk = "critical"
)

// Trust is a provenance label. Labels are ordered system > user > tool > external_untrusted
// (RT-6); [Trust.Rank] gives the order and [MinTrust] the lower of two labels.
type Trust string

const (
	TrustSystem            Trust = "system"
	TrustUser              Trust = "user"
	TrustTool              Trust = "tool"
	TrustExternalUntrusted Trust = "external_untrusted"
)

// Rank orders labels: a higher rank is more trusted. An unknown label ranks lowest,
// the same as external_untrusted, so an unrecognised value can never raise trust.
func (t Trust) Rank() int {
	switch t {
	case TrustSystem:
		return 3
	case TrustUser:
		return 2
	case TrustTool:
		return 1
	default:
		return 0
	}
}

// MinTrust returns the less trusted of a and b. An unknown label counts as external_untrusted.
func MinTrust(a, b Trust) Trust {
	if a.Rank() == 0 || b.Rank() == 0 {
		return TrustExternalUntrusted
	}
	if a.Rank() <= b.Rank() {
		return a
	}
	return b
}

// ToolSpec is the classification of one tool, as checked by toolgen and generated into
// Go (GEN-1). The pipeline reads it; the tool never changes it.
type ToolSpec struct {
	Name            string
	Version         int
	Kind            Kind
	Description     string
	SideEffect      SideEffect
	Idempotency     Idempotency
	IdempotentWhen  string // CEL over args; set only for conditionally_idempotent
	Risk            Risk
	RequiredScopes  []string
	OutputTrust     Trust // a ceiling: results may only lower it
	ConfersApproval bool
	ParallelSafe    bool
	Suspends        bool // control tools only: the tool may suspend the run (RT-11)
	Timeout         time.Duration
	ApprovalWhen    string // CEL over args; optional
	OutputMaxBytes  int    // above this the output is excerpted and artifactized (RT-9)
	InputSchema     json.RawMessage
	OutputSchema    json.RawMessage
	// SchemaSHA256 is the hex SHA-256 the catalog pins for this definition (GEN-4).
	SchemaSHA256 string
	// Source is the spec file the definition came from, relative to the spec root.
	Source string
	// Tenant, when set, is the only tenant whose calls may see and use the tool: a
	// tenant-configured MCP server's tools (ID-2). A call of another tenant is answered
	// as for a tool that does not exist (unknown_tool), and tools/list leaves it out.
	Tenant string
}

// VisibleTo reports whether a call of tenant may see and use the tool.
func (s *ToolSpec) VisibleTo(tenant string) bool { return s.Tenant == "" || s.Tenant == tenant }

// Tool is the port every tool implements: builtins through their generated wrapper,
// MCP, device and sandbox tools through their adapters. Only the pipeline calls Execute.
type Tool interface {
	Spec() *ToolSpec
	// Execute runs the tool on already validated JSON arguments. A non-nil error means
	// the tool could not produce a result at all; a failure the tool reports on purpose
	// is a ToolResult with OK false and a Failure.
	Execute(ctx context.Context, tc *ExecContext, args json.RawMessage) (ToolResult, error)
}
