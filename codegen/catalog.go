package codegen

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/toolgen/toolgen/spec"
)

// catalog is catalog.json (GEN-4): the catalog a session pins, and the file a reviewer
// reads. Field order is the order a reviewer wants, not alphabetical.
type catalog struct {
	Tools []catalogTool `json:"tools"`
}

type catalogTool struct {
	Name            string          `json:"name"`
	WireName        string          `json:"wire_name"`
	Version         int             `json:"version"`
	Kind            string          `json:"kind"`
	Description     string          `json:"description"`
	SideEffect      string          `json:"side_effect"`
	Idempotency     string          `json:"idempotency"`
	IdempotentWhen  string          `json:"idempotent_when,omitempty"`
	Risk            string          `json:"risk"`
	RequiredScopes  []string        `json:"required_scopes"`
	OutputTrust     string          `json:"output_trust"`
	ConfersApproval bool            `json:"confers_approval"`
	ParallelSafe    bool            `json:"parallel_safe"`
	Suspends        bool            `json:"suspends"`
	Timeout         string          `json:"timeout,omitempty"`
	ApprovalWhen    string          `json:"approval_when,omitempty"`
	OutputMaxBytes  int             `json:"output_max_bytes"`
	InputSchema     json.RawMessage `json:"input_schema"`
	OutputSchema    json.RawMessage `json:"output_schema"`
	SchemaSHA256    string          `json:"schema_sha256"`
	Source          string          `json:"source"`
}

// renderCatalog renders catalog.json: tools sorted by name (gens is), two-space
// indented, with a trailing newline.
func renderCatalog(gens []*toolGen) ([]byte, error) {
	c := catalog{Tools: make([]catalogTool, 0, len(gens))}
	for _, tg := range gens {
		t := tg.t
		ct := catalogTool{
			Name:            t.Name,
			WireName:        spec.WireName(t.Name),
			Version:         t.Version,
			Kind:            t.Kind,
			Description:     t.Description,
			SideEffect:      t.SideEffect,
			Idempotency:     t.Idempotency,
			Risk:            t.Risk,
			RequiredScopes:  make([]string, 0, len(t.RequiredScopes)),
			OutputTrust:     t.OutputTrust,
			ConfersApproval: t.ConfersApproval,
			ParallelSafe:    t.ParallelSafe,
			Suspends:        t.Suspends,
			OutputMaxBytes:  t.OutputMaxBytes,
			InputSchema:     tg.input,
			OutputSchema:    tg.output,
			SchemaSHA256:    tg.sha,
			Source:          t.File,
		}
		if t.IdempotentWhen != nil {
			ct.IdempotentWhen = t.IdempotentWhen.Source
		}
		if t.ApprovalWhen != nil {
			ct.ApprovalWhen = t.ApprovalWhen.Source
		}
		if t.Timeout != 0 {
			ct.Timeout = t.Timeout.String()
		}
		for _, s := range t.RequiredScopes {
			ct.RequiredScopes = append(ct.RequiredScopes, s.Name)
		}
		c.Tools = append(c.Tools, ct)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("codegen: render %s: %w", CatalogFile, err)
	}
	return buf.Bytes(), nil
}
