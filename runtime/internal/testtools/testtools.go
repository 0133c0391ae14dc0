// Package testtools holds the test tools and idempotency classes the reliability suites
// share (runtime/crashtest, runtime/faulttest, runtime/chaostest): one tool per class,
// their specs, and RT-4's rules about them. It is for tests only: production code must
// never import it (runtime/internal/faultstore's tests check that).
package testtools

import (
	"encoding/json"
	"time"

	"github.com/toolgen/toolgen/runtime"
)

// The test tools. A suite gives each its own effect; the watermarked ones call
// MarkEffectSent first, as generated wrappers do (GEN-2).
const (
	Put  = "crash.put"  // write, idempotent
	Save = "crash.save" // write, conditionally_idempotent when args.mode == 'overwrite'
	Send = "crash.send" // write, non_idempotent
	Read = "crash.read" // read, idempotent: recorded once, at step 13
	// Deploy is non_idempotent with risk critical: every call is held for an approval
	// (POL-1), so its row is PENDING at "persist" and RUNNING after the approval.
	Deploy = "crash.deploy"
)

// InputSchema is every test tool's input: n, and mode, which decides idempotent_when
// for Save.
const InputSchema = `{"type":"object","properties":{"n":{"type":"integer"},` +
	`"mode":{"type":"string","enum":["overwrite","append"]}},"required":["n","mode"],"additionalProperties":false}`

// Class is one idempotency class: a tool and the arguments' mode.
type Class struct {
	Name string
	Tool string
	Mode string // args.mode: decides idempotent_when for Save
}

// Watermarked: the tool marks the effect before sending it.
func (c Class) Watermarked() bool { return c.Tool == Save || c.Tool == Send || c.Tool == Deploy }

// Held: every call waits for an approval by another principal.
func (c Class) Held() bool { return c.Tool == Deploy }

// RetrySafe is RT-4's rule: may a call whose watermark is set be executed again?
func (c Class) RetrySafe() bool {
	switch c.Tool {
	case Put, Read:
		return true
	case Save:
		return c.Mode == "overwrite"
	}
	return false
}

// RecordOnce: an idempotent none/read call writes its row once, at step 13 (RT-3).
func (c Class) RecordOnce() bool { return c.Tool == Read }

// Specs returns the specs of the named tools, in that order; no names: every tool, in the
// order Put, Save, Send, Read, Deploy.
func Specs(tools ...string) []runtime.ToolSpec {
	if len(tools) == 0 {
		tools = []string{Put, Save, Send, Read, Deploy}
	}
	out := make([]runtime.ToolSpec, 0, len(tools))
	for _, name := range tools {
		s := runtime.ToolSpec{
			Name: name, Version: 1, Kind: runtime.KindAction, SideEffect: runtime.SideEffectWrite,
			Risk: runtime.RiskLow, OutputTrust: runtime.TrustTool, OutputMaxBytes: 65536,
			InputSchema: json.RawMessage(InputSchema), SchemaSHA256: "sha-" + name, Timeout: 30 * time.Second,
		}
		switch name {
		case Put:
			s.Idempotency = runtime.Idempotent
		case Save:
			s.Idempotency, s.IdempotentWhen = runtime.ConditionallyIdempotent, "args.mode == 'overwrite'"
		case Send:
			s.Idempotency = runtime.NonIdempotent
		case Read:
			s.SideEffect, s.Idempotency = runtime.SideEffectRead, runtime.Idempotent
		case Deploy:
			s.Idempotency, s.Risk = runtime.NonIdempotent, runtime.RiskCritical
		default:
			panic("testtools: no tool " + name)
		}
		out = append(out, s)
	}
	return out
}
