package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolgen/toolgen/internal/identity"
	"github.com/toolgen/toolgen/internal/policyload"
	"github.com/toolgen/toolgen/internal/protocolload"
	"github.com/toolgen/toolgen/mcp/upstream"
	"github.com/toolgen/toolgen/model"
	"github.com/toolgen/toolgen/protocol"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/postgres"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
	"github.com/toolgen/toolgen/spec"
)

// DefaultStateDir is where the embedded store and the artifacts live, relative to the
// spec root, when Config.StateDir is empty.
const DefaultStateDir = ".toolrun"

// Defaults of Config.
const (
	DefaultPrincipal = "agent"
	DefaultTenant    = "default"
)

// Config says what a host assembles. Only Dir (or FS) is needed: every other field has
// a default.
type Config struct {
	// Dir is the spec root on disk: tools/, servers/, protocols/, devices/,
	// policy.yaml and principals.yaml are read from it ("" is "."). FS, when set, is
	// the spec root instead (an embed.FS of the author's specs, for example); Dir then
	// only names it in messages, and StateDir or Store must say where the store is.
	Dir string
	FS  fs.FS
	// Tools are the author's implementations, adapted by their generated wrappers
	// (gen.NewAcmeLookup(impl), ...). Each must have its spec under tools/ at the same
	// definition (HOST-3).
	Tools []runtime.Tool
	// Builtins names the builtin tools to serve besides Tools ("protocol.dispatch",
	// "review.approve", ...; AllBuiltins is every one). Their specs are embedded: the
	// spec root need not hold them.
	Builtins []string
	// Store is the store: a postgres:// (or postgresql://) URL for many workers, the
	// path of a SQLite file, or "" for StateDir/toolrun.db.
	Store string
	// StateDir holds the embedded store and the artifacts; "" is Dir/.toolrun.
	StateDir string
	// Workspace is the directory the workspace builtins (workspace.*, review.*) are
	// confined to, or a template of one: {tenant} (WorkspaceTenant) and {run}
	// (WorkspaceRun) segments give each tenant, and each run, a directory of its own,
	// created on first use ("/srv/ws/{tenant}", "/srv/ws/{tenant}/{run}"). "" is none:
	// those builtins answer no_workspace. It must stay out of the spec root and the
	// state directory, and hold {tenant} when principals.yaml names several tenants;
	// New refuses it otherwise (SEC-1, see workspaceLayout).
	Workspace string
	// Protocol names protocols/<Protocol>.yaml, whose modes filter and gate the calls
	// (WF-3..5); "" runs without one. Mode pins the host to one of its modes.
	Protocol, Mode string
	// Principal is the local caller: of stdio connections, of Call without a principal,
	// and of HTTP requests when there is no principals.yaml (then only loopback is
	// served). With principals.yaml it must be declared there. "" is DefaultPrincipal.
	Principal string
	// Tenant is the local principal's tenant when there is no principals.yaml ("" is
	// DefaultTenant); with the file, the file says it.
	Tenant string
	// Scopes, when not nil, narrows the local principal's scopes to these (with
	// principals.yaml, to those of these it holds; without, to exactly these).
	Scopes []string
	// Session is the session id of stdio connections that name none in _meta; "" is
	// a random id per connection.
	Session string
	// Servers selects which upstream servers of servers/*.yaml New connects: nil is
	// every one, an empty non-nil slice none.
	Servers []string
	// WorkerID is the lease owner of this process; "" picks a unique one.
	WorkerID string
	// Lease, SweepInterval and ApprovalHold tune the pipeline (the runtime.Default*
	// values when zero; see runtime.Config). A tool's own timeout is its spec's.
	Lease, SweepInterval, ApprovalHold time.Duration
	// RetryWindow is how long after an identical write settled a call whose client
	// sent no call id is still taken for its retry (runtime.Config.RetryWindow; 0 is
	// runtime.DefaultRetryWindow). See the README's "Which call is this?".
	RetryWindow time.Duration
	// MaxCachedSessions bounds the per-session state this process keeps in memory —
	// pinned catalogs, session owners — in sessions (0 is
	// runtime.DefaultMaxCachedSessions). The store holds all of it: a session evicted
	// here is read back when it returns, and sees what it saw (SEC-2, SES-1).
	MaxCachedSessions int
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Tracer, when set, records one span per call (runtime.Config.Tracer).
	Tracer trace.Tracer
	// HTTP holds the HTTP server's limits: allowed Host names, connection caps and
	// timeouts (see HTTPConfig; every field has a default).
	HTTP HTTPConfig
	// Test holds knobs for tests only; leave it zero in production.
	Test TestConfig
}

// TestConfig holds the knobs of a host in a test (River's Config.Test): none of them
// belongs in a production configuration.
type TestConfig struct {
	// AfterStep is runtime.Config.AfterStep: told after each named pipeline step, for
	// crash drills that SIGKILL the process there.
	AfterStep func(step string)
	// ApprovalPoll is runtime.Config.ApprovalPoll.
	ApprovalPoll time.Duration
	// EpochPoll is how often the forced-epoch watcher reads the catalog history
	// without a wake-up of the store (0 is a second; see watchForcedEpochs).
	EpochPoll time.Duration
}

// AllBuiltins names every builtin tool, for Config.Builtins.
var AllBuiltins = builtinNames()

// Host is an assembled host. Close it when done.
type Host struct {
	cfg        Config
	dir        string // the spec root as named in messages
	root       fs.FS
	stateDir   string
	workspaces *workspaceLayout
	tree       *spec.Tree
	model      *model.Tree // what the run-time parts are given: tree's run-time model
	st         store.Store
	reg        *runtime.Registry
	pipe       *runtime.Pipeline
	modes      *protocol.Runtime // nil without a protocol
	metrics    *promMetrics
	verifier   *identity.Verifier // nil without principals.yaml
	// callIDSecret keys the derived call ids, the store's (loadCallIDSecret).
	callIDSecret []byte
	log          *slog.Logger
	upstreams    []*upstream.Upstream

	mu      sync.Mutex
	started bool
	stop    context.CancelFunc // the forced-epoch watcher
	http    *httpParts         // built on first use of Handler
}

// New loads and checks the spec root, opens the store, registers the tools and builds
// the pipeline; it connects the upstream servers Config.Servers selects (one that
// cannot be reached is logged and skipped: a dead upstream never takes the other tools
// down). Any spec finding, and any disagreement between specs and implementations, is
// an error: a host never runs specs toolgen would reject.
func New(ctx context.Context, cfg Config) (*Host, error) {
	h, err := open(cfg)
	if err != nil {
		return nil, err
	}
	tree, diags, err := spec.LoadFS(h.root, h.dir)
	if err != nil {
		return nil, err
	}
	h.tree, h.model = tree, tree.Model()
	var tools []runtime.Tool
	if len(diags) == 0 {
		// Before the store is opened: a host that cannot run its specs leaves nothing
		// behind (no state directory in an author's module).
		if tools, err = h.tools(); err != nil {
			return nil, err
		}
	}
	if h.st, err = OpenStore(ctx, cfg.Store, h.stateDir); err != nil {
		return nil, err
	}
	if err := h.assemble(ctx, diags, tools); err != nil {
		h.st.Close()
		return nil, err
	}
	if cfg.Servers == nil || len(cfg.Servers) > 0 {
		if err := h.connectServers(ctx, cfg.Servers); err != nil {
			h.log.Error("upstream servers not connected", "err", err)
		}
	}
	return h, nil
}

// open resolves where cfg's spec root and state are.
func open(cfg Config) (*Host, error) {
	h := &Host{cfg: cfg, log: cfg.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.dir = cfg.Dir
	if h.dir == "" {
		h.dir = "."
	}
	h.root = cfg.FS
	if h.root == nil {
		st, err := os.Stat(h.dir)
		if err != nil {
			return nil, fmt.Errorf("spec root: %w", err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("spec root %s is not a directory", h.dir)
		}
		h.root = os.DirFS(h.dir)
	}
	h.stateDir = cfg.StateDir
	if h.stateDir == "" {
		if cfg.FS != nil && cfg.Store == "" {
			return nil, errors.New("host: a spec root given as an fs.FS needs Config.StateDir or Config.Store (where the store lives)")
		}
		h.stateDir = filepath.Join(h.dir, DefaultStateDir)
	}
	return h, nil
}

func (h *Host) assemble(ctx context.Context, diags spec.Diagnostics, tools []runtime.Tool) error {
	cfg := h.cfg
	principal := cfg.Principal
	if principal == "" {
		principal = DefaultPrincipal
	}
	if cfg.Protocol != "" {
		// Loaded before the other findings are reported: a protocol that breaks WF-1 or
		// WF-2 is refused with a wf1_violation audit entry (WF-5).
		p, err := protocolload.LoadFS(ctx, h.root, h.dir, protocolload.Options{Name: cfg.Protocol, PinnedMode: cfg.Mode,
			Audit: h.st, Logger: h.log, Tenant: h.localTenant(), Principal: principal})
		if err != nil {
			return err
		}
		if h.modes, err = protocol.New(protocol.Config{Protocol: p, PinnedMode: cfg.Mode, Sessions: h.st, Audit: h.st, Logger: h.log}); err != nil {
			return err
		}
	} else if cfg.Mode != "" {
		return errors.New("a mode needs a protocol")
	}
	if len(diags) > 0 {
		return fmt.Errorf("%s: %d spec problems (run toolgen check), first: %s", h.dir, len(diags), diags[0])
	}
	if h.tree.Principals != nil {
		v, err := identity.New(ctx, h.model.Principals, h.root)
		if err != nil {
			return fmt.Errorf("%s: %w", spec.PrincipalsFile, err)
		}
		h.verifier = v
	}
	if err := h.loadCallIDSecret(ctx); err != nil {
		return err
	}
	policy, err := runtime.NewPolicy(policyload.Rules(h.tree.Policy))
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	h.reg = runtime.NewRegistry()
	if err := register(h.reg, tools); err != nil {
		return err
	}
	if err := h.reg.PersistPins(h.st, cfg.MaxCachedSessions); err != nil {
		return err
	}
	if err := h.checkProtocolTools(); err != nil {
		return err
	}
	if h.workspaces, err = newWorkspaceLayout(cfg.Workspace, h.stateDirs(), h.tree.Principals, h.log); err != nil {
		return err
	}
	if h.metrics, err = newPromMetrics(); err != nil {
		return err
	}
	rc := runtime.Config{
		Registry: h.reg, Store: h.st, Policy: policy, WorkerID: cfg.WorkerID, Logger: h.log,
		Artifacts:     runtime.NewFSArtifactWriter(filepath.Join(h.stateDir, "artifacts")),
		WorkspaceFor:  h.workspaces.For,
		Metrics:       h.metrics.Pipeline,
		Tracer:        cfg.Tracer,
		Lease:         cfg.Lease,
		SweepInterval: cfg.SweepInterval,
		ApprovalHold:  cfg.ApprovalHold,
		RetryWindow:   cfg.RetryWindow,
		ApprovalPoll:  cfg.Test.ApprovalPoll,
		AfterStep:     cfg.Test.AfterStep,
		ScriptPrincipal: func(tenant, id string) (runtime.Principal, bool) {
			p, err := h.Principal(id) // with the narrowing of Config.Scopes
			return p, err == nil && p.Tenant == tenant
		},
	}
	if h.modes != nil {
		modes := h.modes
		rc.Modes = modes
		rc.AfterCall = func(ctx context.Context, c runtime.Call, out runtime.Outcome) error {
			_, err := modes.AfterCall(ctx, c, out)
			return err
		}
	}
	if h.pipe, err = runtime.NewPipeline(rc); err != nil {
		h.metrics.Close(context.Background())
		return err
	}
	return nil
}

// checkProtocolTools refuses a protocol that names a tool this host does not serve:
// SPEC-8 holds at build time against every spec toolgen knows, and at run time against
// what this host registered (an adapter's mcp.* and device.* tools arrive later and are
// not checked here).
func (h *Host) checkProtocolTools() error {
	if h.modes == nil {
		return nil
	}
	var p *spec.Protocol
	for _, x := range h.tree.Protocols {
		if x.Name == h.cfg.Protocol {
			p = x
		}
	}
	if p == nil {
		return nil
	}
	served := map[string]bool{}
	for _, s := range h.reg.Current() {
		served[s.Name] = true
	}
	for _, mode := range p.Modes {
		for _, ref := range mode.Tools {
			name := ref.Name
			if strings.HasPrefix(name, "mcp.") || strings.HasPrefix(name, spec.DeviceDomain+".") {
				continue
			}
			if served[name] {
				continue
			}
			hint := "register its implementation in Config.Tools"
			if slices.Contains(AllBuiltins, name) {
				hint = "add it to Config.Builtins"
			}
			return fmt.Errorf("%s:%d:%d: mode %s names %s, which this host does not serve: %s",
				h.display(p.File), ref.Pos.Line, ref.Pos.Col, mode.Name, name, hint)
		}
	}
	return nil
}

// display is a spec-root-relative path as messages print it.
func (h *Host) display(rel string) string {
	if h.dir == "." || h.dir == "" {
		return rel
	}
	return filepath.ToSlash(filepath.Join(h.dir, rel))
}

// Close stops the maintenance, disconnects the upstream servers and releases the store.
func (h *Host) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := []error{h.Stop(ctx)}
	h.mu.Lock()
	parts := h.http
	h.mu.Unlock()
	if parts != nil {
		parts.close()
	}
	for _, u := range h.upstreams {
		errs = append(errs, u.Close())
	}
	if h.metrics != nil {
		errs = append(errs, h.metrics.Close(ctx))
	}
	return errors.Join(append(errs, h.st.Close())...)
}

// Start runs the host's maintenance until Stop or Close (LIFE-1): the pipeline's
// periodic recovery pass, and the watcher that applies forced catalog epochs recorded
// by any process on the store (MCP-7). ServeStdio, Serve and ListenAndServe call it;
// an embedder serving Handler from its own server calls it once. Starting a started
// host is a no-op.
func (h *Host) Start(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.started {
		return nil
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if err := h.watchForcedEpochs(wctx); err != nil {
		cancel()
		return err
	}
	if err := h.pipe.Start(wctx); err != nil {
		cancel()
		return err
	}
	if err := h.startNotifier(wctx); err != nil { // notifications.yaml's webhooks (issue 18)
		cancel()
		h.pipe.Stop(context.WithoutCancel(ctx))
		return err
	}
	h.started, h.stop = true, cancel
	return nil
}

// Stop ends what Start began, waiting until ctx is done for a recovery pass in
// progress.
func (h *Host) Stop(ctx context.Context) error {
	h.mu.Lock()
	started, stop := h.started, h.stop
	h.started, h.stop = false, nil
	h.mu.Unlock()
	if !started {
		return nil
	}
	err := h.pipe.Stop(ctx)
	stop()
	return err
}

// Recover runs one recovery pass now (the sweep Start runs periodically): expired
// leases of this host's tools are decided and retryable calls re-run; rows of tools
// this host does not have are counted, never touched.
func (h *Host) Recover(ctx context.Context) (runtime.RecoveryReport, error) {
	return h.pipe.Recover(ctx)
}

// Pipeline, Registry and Store are the parts, for an embedder that needs more than the
// host offers (a batch through the pipeline, a custom listing). Every call must still
// go through the Pipeline.
func (h *Host) Pipeline() *runtime.Pipeline { return h.pipe }
func (h *Host) Registry() *runtime.Registry { return h.reg }
func (h *Host) Store() store.Store          { return h.st }

// Dir is the spec root as the host names it.
func (h *Host) Dir() string { return h.dir }

// WorkspaceFor is the workspace of a tenant's run ("" when the host serves none):
// Config.Workspace with its placeholders filled in, the directory created.
func (h *Host) WorkspaceFor(tenant, run string) string { return h.workspaces.For(tenant, run) }

// stateDirs are the directories holding the host's state and the operator's files,
// which a workspace must stay out of, by what they are.
func (h *Host) stateDirs() map[string]offLimits {
	dirs := map[string]offLimits{"state directory": {dir: h.stateDir}}
	if h.cfg.FS == nil {
		dirs["spec root"] = offLimits{dir: h.dir}
	}
	if db := h.cfg.Store; db != "" && !strings.Contains(db, "://") {
		dirs["store's directory"] = offLimits{dir: filepath.Dir(db), mayHold: true}
	}
	return dirs
}

// connectServers connects the upstream MCP servers named in ids (all of them when ids
// is nil) and registers their tools as mcp.<server_id>.*.
func (h *Host) connectServers(ctx context.Context, ids []string) error {
	egress := upstream.NewEgress(h.model.EgressAllow)
	var errs []error
	for _, srv := range h.model.Servers {
		if ids != nil && !slices.Contains(ids, srv.ServerID) {
			continue
		}
		u, err := upstream.Connect(ctx, upstream.Options{Server: srv, Registry: h.reg, Store: h.st,
			Egress: egress, Tenant: srv.Tenant, Logger: h.log.With("server", srv.ServerID), Stderr: os.Stderr})
		if err != nil {
			errs = append(errs, fmt.Errorf("server %s: %w", srv.ServerID, err))
			continue
		}
		h.upstreams = append(h.upstreams, u)
	}
	return errors.Join(errs...)
}

// OpenStore opens the store a Config.Store value names: a postgres:// URL, a SQLite
// file, or "" for stateDir/toolrun.db (the directory is created, private).
func OpenStore(ctx context.Context, db, stateDir string) (store.Store, error) {
	switch {
	case strings.HasPrefix(db, "postgres://"), strings.HasPrefix(db, "postgresql://"):
		return postgres.Open(ctx, db)
	case db == "":
		if err := os.MkdirAll(stateDir, 0o700); err != nil {
			return nil, err
		}
		db = filepath.Join(stateDir, "toolrun.db")
	case strings.Contains(db, "://"):
		return nil, errors.New("store: want a postgres:// URL or the path of a SQLite file, got " + redact(db))
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
