package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toolgen/toolgen/internal/policyload"
	"github.com/toolgen/toolgen/mcp/upstream"
	"github.com/toolgen/toolgen/protocol"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/postgres"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
	"github.com/toolgen/toolgen/spec"
	"github.com/toolgen/toolgen/tools"
)

// DefaultDBDir is where the embedded store lives, relative to the spec root.
const DefaultDBDir = ".toolrun"

// Options say what to assemble.
type Options struct {
	// Dir is the spec root (default "."): servers/, protocols/ and policy.yaml are read
	// from it, and the embedded store lives in Dir/.toolrun/ unless DB says otherwise.
	Dir string
	// DB is a PostgreSQL URL (postgres://... or postgresql://...) or the path of a SQLite
	// file; "" is Dir/.toolrun/toolrun.db.
	DB string
	// WorkerID is the lease owner of this process; "" picks a unique one.
	WorkerID string
	// Workspace is the directory the workspace.* builtins are confined to ("" = Dir).
	Workspace string
	Logger    *slog.Logger
	// Protocol names the protocol (protocols/<name>.yaml) whose modes filter and gate
	// the calls (WF-3..5); "" runs without one. Mode pins the process to one of its
	// modes (a server serving one mode); "" follows each session's current mode.
	Protocol, Mode string
	// Tenant and Principal are who runs the host: they are recorded on the wf1_violation
	// entry of a refused protocol.
	Tenant, Principal string
	// Metrics are the pipeline's instruments (runtime.Config.Metrics); nil records none.
	Metrics *runtime.Metrics
	// Configure, when set, may adjust the pipeline configuration before the pipeline
	// is built (tests shorten the approval hold, for example).
	Configure func(*runtime.Config)
}

// Host is an assembled process: close it when done.
type Host struct {
	Dir       string
	Workspace string
	Tree      *spec.Tree
	Store     store.Store
	Registry  *runtime.Registry
	Policy    *runtime.Policy
	Pipeline  *runtime.Pipeline
	Modes     *protocol.Runtime // nil without a protocol
	Logger    *slog.Logger
	upstreams []*upstream.Upstream
}

// Open loads and checks the spec root, opens the store and builds the pipeline with
// the builtin tools registered. A spec finding is an error: a host never runs specs
// toolgen would reject.
func Open(ctx context.Context, o Options) (*Host, error) {
	if o.Dir == "" {
		o.Dir = "."
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tree, diags, err := spec.LoadDir(o.Dir)
	if err != nil {
		return nil, err
	}
	st, err := OpenStore(ctx, o.Dir, o.DB)
	if err != nil {
		return nil, err
	}
	h, err := assemble(ctx, o, log, tree, diags, st)
	if err != nil {
		st.Close()
		return nil, err
	}
	return h, nil
}

func assemble(ctx context.Context, o Options, log *slog.Logger, tree *spec.Tree, diags spec.Diagnostics, st store.Store) (*Host, error) {
	var modes *protocol.Runtime
	if o.Protocol != "" {
		// Loaded before the other findings are reported: a protocol that breaks WF-1 or
		// WF-2 is refused with a wf1_violation audit entry (WF-5).
		p, err := protocol.LoadDir(ctx, o.Dir, protocol.LoadOptions{Name: o.Protocol, PinnedMode: o.Mode, Audit: st, Logger: log,
			Tenant: o.Tenant, Principal: o.Principal})
		if err != nil {
			return nil, err
		}
		if modes, err = protocol.New(protocol.Config{Protocol: p, PinnedMode: o.Mode, Sessions: st, Audit: st, Logger: log}); err != nil {
			return nil, err
		}
	} else if o.Mode != "" {
		return nil, errors.New("a mode needs a protocol (--protocol)")
	}
	if len(diags) > 0 {
		return nil, fmt.Errorf("%s: %d spec problems (run toolgen check), first: %s", o.Dir, len(diags), diags[0])
	}
	policy, err := runtime.NewPolicy(policyload.Rules(tree.Policy))
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	reg := runtime.NewRegistry()
	if err := reg.Register(tools.Builtins()...); err != nil {
		return nil, err
	}
	ws := o.Workspace
	if ws == "" {
		ws = o.Dir
	}
	if ws, err = filepath.Abs(ws); err != nil {
		return nil, err
	}
	artifacts := runtime.NewFSArtifactWriter(filepath.Join(o.Dir, DefaultDBDir, "artifacts"))
	cfg := runtime.Config{
		Registry: reg, Store: st, Policy: policy, WorkerID: o.WorkerID, Logger: log,
		Artifacts:    artifacts,
		WorkspaceFor: func(string, string) string { return ws },
		Metrics:      o.Metrics,
	}
	if modes != nil {
		cfg.Modes = modes
		cfg.AfterCall = func(ctx context.Context, c runtime.Call, out runtime.Outcome) error {
			_, err := modes.AfterCall(ctx, c, out)
			return err
		}
	}
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	p, err := runtime.NewPipeline(cfg)
	if err != nil {
		return nil, err
	}
	return &Host{Dir: o.Dir, Workspace: ws, Tree: tree, Store: st, Registry: reg, Policy: policy, Pipeline: p,
		Modes: modes, Logger: log}, nil
}

// Close disconnects the upstream servers and releases the store.
func (h *Host) Close() error {
	var errs []error
	for _, u := range h.upstreams {
		errs = append(errs, u.Close())
	}
	return errors.Join(append(errs, h.Store.Close())...)
}

// ConnectServers connects the upstream MCP servers of servers/*.yaml named in ids (all
// of them when ids is empty) and registers their tools as mcp.<server_id>.*. A server
// that cannot be reached is reported in the returned error and skipped; the others
// stay connected (a dead upstream never takes the builtins down).
func (h *Host) ConnectServers(ctx context.Context, stderr io.Writer, ids ...string) error {
	egress := upstream.NewEgress(h.Tree.Policy)
	var errs []error
	for _, srv := range h.Tree.Servers {
		if len(ids) > 0 && !slices.Contains(ids, srv.ServerID) {
			continue
		}
		u, err := upstream.Connect(ctx, upstream.Options{Server: srv, Registry: h.Registry, Store: h.Store,
			Egress: egress, Tenant: srv.Tenant, Logger: h.Logger.With("server", srv.ServerID), Stderr: stderr})
		if err != nil {
			errs = append(errs, fmt.Errorf("server %s: %w", srv.ServerID, err))
			continue
		}
		h.upstreams = append(h.upstreams, u)
	}
	return errors.Join(errs...)
}

// OpenStore opens the store a DB option names (see Options.DB).
func OpenStore(ctx context.Context, dir, db string) (store.Store, error) {
	switch {
	case strings.HasPrefix(db, "postgres://"), strings.HasPrefix(db, "postgresql://"):
		return postgres.Open(ctx, db)
	case db == "":
		if err := os.MkdirAll(filepath.Join(dir, DefaultDBDir), 0o700); err != nil {
			return nil, err
		}
		db = filepath.Join(dir, DefaultDBDir, "toolrun.db")
	case strings.Contains(db, "://"):
		return nil, errors.New("--db: want a postgres:// URL or the path of a SQLite file, got " + redact(db))
	}
	return sqlite.Open(ctx, db)
}

// redact drops the user information of a URL-like string, for error messages.
func redact(s string) string {
	if i, j := strings.Index(s, "://"), strings.LastIndex(s, "@"); i >= 0 && j > i {
		return s[:i+3] + "…@" + s[j+1:]
	}
	return s
}
