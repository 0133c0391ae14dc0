// Package protocolload loads a protocol from a spec root for the run time: the spec
// package checks the whole root (WF-1/WF-2 depend on every tool spec and server
// classification) and produces the protocol's run-time model, which package protocol
// applies. A root with any finding is refused, and a WF-1 or WF-2 finding is recorded
// in the audit log first (WF-5). It exists because protocol must not import spec.
//
// It imports spec, protocol and runtime/store (the audit entry) and nothing else of
// this module.
package protocolload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/toolgen/toolgen/protocol"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/spec"
)

// ErrRefused is matched (errors.Is) by every [RefusedError].
var ErrRefused = errors.New("protocol refused")

// ErrUnknownProtocol is returned when the spec root has no protocol of the requested name.
var ErrUnknownProtocol = errors.New("unknown protocol")

// RefusedError is a load that toolgen check would reject: the spec root has findings.
type RefusedError struct {
	Protocol    string
	Diagnostics spec.Diagnostics // every finding of the spec root, sorted
}

func (e *RefusedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "protocol %s refused: the spec root has %d %s (run toolgen check)",
		e.Protocol, len(e.Diagnostics), plural(len(e.Diagnostics), "problem", "problems"))
	for _, d := range e.Diagnostics {
		b.WriteString("\n\t")
		b.WriteString(d.String())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrRefused) hold.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Options say which protocol to load and how to attribute a refusal.
type Options struct {
	// Name is the protocol to load (protocols/<Name>.yaml). Required.
	Name string
	// PinnedMode is the mode the host will pin the server to (--mode), "" when it
	// serves every mode. It must be one of the protocol's modes; it is also the mode
	// recorded on a wf1_violation entry.
	PinnedMode string
	// Audit receives the wf1_violation entry of a refusal. Required.
	Audit protocol.AuditLog
	// Tenant and Principal are recorded on the wf1_violation entry: whoever asked for
	// the load ("" for the operator's host).
	Tenant, Principal string
	Logger            *slog.Logger
}

// LoadDir loads the protocol opts.Name from the spec root dir (the directory holding
// tools/, servers/, protocols/ and policy.yaml), refusing it as [LoadFS] does.
func LoadDir(ctx context.Context, dir string, opts Options) (*protocol.Protocol, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("protocol: load %s: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("protocol: load %s: not a directory", dir)
	}
	return LoadFS(ctx, os.DirFS(dir), dir, opts)
}

// LoadFS loads the protocol opts.Name from the spec root held in fsys (display prefixes
// diagnostic paths, as in spec.LoadFS). The whole root is loaded and checked by the
// spec package: WF-1/WF-2 depend on every tool spec and server classification.
//
// Any finding refuses the load with a [RefusedError] listing every finding. When a
// finding is WF-1 or WF-2, one wf1_violation entry is appended to opts.Audit first,
// with those findings as its detail and, as its mode, opts.PinnedMode or else the
// protocol's declared initial_mode (WF-5). If that append fails, the error joins the
// refusal and the append failure.
func LoadFS(ctx context.Context, fsys fs.FS, display string, opts Options) (*protocol.Protocol, error) {
	if opts.Name == "" {
		return nil, errors.New("protocol: load: no protocol name")
	}
	if opts.Audit == nil {
		return nil, errors.New("protocol: load: no audit log for refusals")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tree, diags, err := spec.LoadFS(fsys, display)
	if err != nil {
		return nil, fmt.Errorf("protocol: load %s: %w", display, err)
	}
	var sp *spec.Protocol
	for _, p := range tree.Protocols {
		if p.Name == opts.Name {
			sp = p
		}
	}
	if len(diags) > 0 {
		refused := &RefusedError{Protocol: opts.Name, Diagnostics: diags}
		log.Error("protocol refused", "protocol", opts.Name, "problems", len(diags), "first", diags[0].String())
		if wf := wfFindings(diags); len(wf) > 0 {
			mode := opts.PinnedMode
			if mode == "" && sp != nil {
				mode = sp.InitialMode.Name
			}
			if err := appendWF1Violation(ctx, opts, mode, wf); err != nil {
				return nil, errors.Join(refused, err)
			}
		}
		return nil, refused
	}
	if sp == nil {
		return nil, fmt.Errorf("protocol: load %s: %w %q (protocols/%s.yaml)", display, ErrUnknownProtocol, opts.Name, opts.Name)
	}
	p := protocol.FromModel(sp.Model())
	if opts.PinnedMode != "" && !p.HasMode(opts.PinnedMode) {
		return nil, fmt.Errorf("protocol: %s: pinned %w %q (modes: %s)", p.Name(), protocol.ErrUnknownMode, opts.PinnedMode, strings.Join(p.Modes(), ", "))
	}
	return p, nil
}

// wfFindings are the WF-1 and WF-2 findings of diags.
func wfFindings(diags spec.Diagnostics) spec.Diagnostics {
	var out spec.Diagnostics
	for _, d := range diags {
		if d.Rule == "WF-1" || d.Rule == "WF-2" {
			out = append(out, d)
		}
	}
	return out
}

// wf1Detail is the detail of a wf1_violation entry.
type wf1Detail struct {
	Protocol    string           `json:"protocol"`
	Refused     bool             `json:"refused"`
	Diagnostics spec.Diagnostics `json:"diagnostics"`
}

func appendWF1Violation(ctx context.Context, opts Options, mode string, wf spec.Diagnostics) error {
	detail, err := json.Marshal(wf1Detail{Protocol: opts.Name, Refused: true, Diagnostics: wf})
	if err != nil {
		return fmt.Errorf("protocol: encode wf1_violation: %w", err)
	}
	_, err = opts.Audit.AuditAppend(ctx, store.AuditEntry{
		Tenant: opts.Tenant, Kind: protocol.KindWF1Violation, Principal: opts.Principal, Mode: mode, Detail: detail,
	})
	if err != nil {
		return fmt.Errorf("protocol: audit wf1_violation: %w", err)
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
