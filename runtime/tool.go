package runtime

import (
	"context"
	"encoding/json"
	"time"

	"github.com/toolgen/toolgen/vocab"
)

// Kind says where a tool's effect lands: on the world (action) or on the run (control).
type Kind string

const (
	KindAction  Kind = "action"
	KindControl Kind = "control"
)

// The classification vocabulary is package vocab's; these names keep it where a tool
// author's code and the generated wrappers meet it (runtime.SideEffectWrite, ...).
type (
	// SideEffect is what a tool may do to the world.
	SideEffect = vocab.SideEffect
	// Idempotency is the recovery class of a tool: it decides what the sweep may retry
	// (RT-4).
	Idempotency = vocab.Idempotency
	// Risk is the spec's risk level; policy uses it for approvals (POL-1).
	Risk = vocab.Risk
	// Trust is a provenance label, ordered system > user > tool > external_untrusted
	// (RT-6); [vocab.Trust.Rank] gives the order and [MinTrust] the lower of two labels.
	Trust = vocab.Trust
)

const (
	SideEffectNone  = vocab.SideEffectNone
	SideEffectRead  = vocab.SideEffectRead
	SideEffectWrite = vocab.SideEffectWrite

	Idempotent              = vocab.Idempotent
	ConditionallyIdempotent = vocab.ConditionallyIdempotent
	NonIdempotent           = vocab.NonIdempotent

	RiskLow      = vocab.RiskLow
	RiskMedium   = vocab.RiskMedium
	RiskHigh     = vocab.RiskHigh
	RiskCritical = vocab.RiskCritical

	TrustSystem            = vocab.TrustSystem
	TrustUser              = vocab.TrustUser
	TrustTool              = vocab.TrustTool
	TrustExternalUntrusted = vocab.TrustExternalUntrusted
)

// MinTrust returns the less trusted of a and b. An unknown label counts as external_untrusted.
func MinTrust(a, b Trust) Trust { return vocab.MinTrust(a, b) }

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
