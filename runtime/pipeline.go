package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgen/toolgen/internal/growstack"
	"github.com/toolgen/toolgen/internal/names"
	"github.com/toolgen/toolgen/runtime/store"
)

// Defaults of a Pipeline's Config.
//
// The lease and the tool timeout bound different things. A call's lease is renewed
// every Lease/3 for as long as its tool runs in this process (see maintenance.go), so
// a tool may run up to its timeout (DefaultToolTimeout, or the spec's timeout) however
// short the lease; the lease only bounds how long a call of a crashed worker waits
// before another worker's sweep may decide it. A crashed worker's call is therefore
// recovered within Lease + SweepInterval × (1 + SweepJitter) by any live worker that
// has its tool (45 s with the defaults), plus the time to re-run it.
const (
	DefaultLease         = 30 * time.Second
	DefaultApprovalHold  = 300 * time.Second // POL-3: a hold is bounded
	DefaultApprovalPoll  = 200 * time.Millisecond
	DefaultToolTimeout   = 60 * time.Second
	DefaultMaxAttempts   = 5 // reclaims without a watermark before a call ends crash_loop
	DefaultSweepInterval = 12 * time.Second
	// DefaultSweepJitter spreads the sweeps of many workers: each pass waits
	// SweepInterval × (1 ± SweepJitter), drawn anew every time.
	DefaultSweepJitter = 0.25
)

// ModeResolver answers WF-3/WF-4 for the pipeline: the active mode of a tenant's
// session and whether it holds a tool. A session's mode is keyed by (tenant, session)
// (SES-1): another tenant's session of the same id has a mode of its own. A nil
// ModeResolver means no protocol: every tool is in mode.
type ModeResolver interface {
	ActiveMode(ctx context.Context, tenant, sessionID, tool string) (mode string, inMode bool, err error)
}

// Config assembles a Pipeline.
type Config struct {
	Registry     *Registry
	Store        store.Store
	Policy       *Policy // nil: no operator rules
	Modes        ModeResolver
	WorkerID     string        // lease owner; must be unique per process
	Lease        time.Duration // default DefaultLease
	ApprovalHold time.Duration // default DefaultApprovalHold
	ApprovalPoll time.Duration // default DefaultApprovalPoll
	MaxAttempts  int           // default DefaultMaxAttempts
	// RetryWindow is how long after an identical write settled a call without a call
	// id is still its retry (default DefaultRetryWindow; see stepIdentity).
	RetryWindow time.Duration
	// SweepInterval is the mean time between two recovery passes of the maintenance
	// Start runs (default DefaultSweepInterval); SweepJitter, in [0, 1), spreads it
	// (default DefaultSweepJitter; a negative value means none).
	SweepInterval time.Duration
	SweepJitter   float64
	Artifacts     ArtifactWriter
	Credentials   CredentialResolver
	// WorkspaceFor gives the workspace of a tenant's run when recovery re-executes a
	// call recorded without one (before store migration 007). A call records its own
	// Call.Workspace, and recovery re-runs it there.
	WorkspaceFor func(tenant, runID string) string
	Logger       *slog.Logger
	Metrics      *Metrics // nil: no metrics
	// Tracer, when set, records one span per call ("execute_tool <name>", as the
	// OpenTelemetry GenAI conventions name it) with the tool name, call id, status and
	// reason code — classification, never arguments or results.
	Tracer trace.Tracer
	// AfterCall, when set, is told every outcome Execute returns, on every path (MCP,
	// toolrun call, the bridge, recovery's re-executions excluded). The protocol runtime
	// uses it to apply a succeeded protocol.dispatch to the session's mode. Its error is
	// returned by Execute, with the outcome: the call itself is recorded either way.
	AfterCall func(ctx context.Context, c Call, o Outcome) error
	// ScriptPrincipal, when set, gives the principal of a tenant's principal id as the
	// host knows it now. Recovery re-executes a call as the id its row recorded, without
	// scopes or claims; a script it re-runs (sandbox.run_script, RT-12) makes its calls
	// as ScriptPrincipal's principal, so they pass the same checks as the first time,
	// decided now (SEC-3). Without it, or for an id it does not know, they carry none.
	ScriptPrincipal func(tenant, id string) (Principal, bool)
	// AfterStep, when set, is called after each named step of a call completes:
	// "resolve", "validate", "label", "key", "breaker", "policy", "persist", "hold",
	// "watermark" (the watermark commit returned), "execute", "shape", "settle". It
	// exists for the crash-injection harness, which kills the process there; leave it
	// nil in production.
	AfterStep func(step string)
}

// Pipeline is the one execution path of every tool call (RT-3). Execute is the only
// call site of Tool.Execute in the module.
type Pipeline struct {
	cfg Config
	log *slog.Logger

	// executing counts, per invocation id, the runs of runClaimed in progress in this
	// process: the leases the renewer keeps alive. A row this worker holds but no
	// longer executes — a write after its claim failed, or a claim whose
	// acknowledgement was lost — is not renewed: its lease runs out and the sweep
	// decides for it, where renewing every row of the worker kept it RUNNING for as
	// long as the process lived (found by runtime/chaostest). renewing is true while
	// the renewer goroutine runs (maintenance.go).
	mu        sync.Mutex
	executing map[int64]int
	renewing  bool

	maint maintenance
}

// NewPipeline returns a pipeline over cfg, filling defaults.
func NewPipeline(cfg Config) (*Pipeline, error) {
	if cfg.Registry == nil || cfg.Store == nil {
		return nil, errors.New("runtime: a pipeline needs a Registry and a Store")
	}
	if !cfg.Registry.persistsPins() {
		// Sessions' pins live in the store the calls are recorded in (SES-1): every
		// process on it, and this one after a restart, serves a session one catalog.
		if err := cfg.Registry.PersistPins(cfg.Store, 0); err != nil {
			return nil, err
		}
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = "worker-" + randomToken()
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.ApprovalHold <= 0 {
		cfg.ApprovalHold = DefaultApprovalHold
	}
	if cfg.ApprovalPoll <= 0 {
		cfg.ApprovalPoll = DefaultApprovalPoll
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.RetryWindow <= 0 {
		cfg.RetryWindow = DefaultRetryWindow
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	switch {
	case cfg.SweepJitter == 0:
		cfg.SweepJitter = DefaultSweepJitter
	case cfg.SweepJitter < 0:
		cfg.SweepJitter = 0
	case cfg.SweepJitter >= 1:
		return nil, errors.New("runtime: SweepJitter must be below 1")
	}
	if cfg.Policy == nil {
		p, err := NewPolicy(nil)
		if err != nil {
			return nil, err
		}
		cfg.Policy = p
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pipeline{cfg: cfg, log: log}, nil
}

// Store is the store the pipeline records calls in: the MCP server claims session ids
// in it (SES-1), so that every process on the store agrees who owns a session.
func (p *Pipeline) Store() store.Store { return p.cfg.Store }

// WorkerID is the lease owner this pipeline writes.
func (p *Pipeline) WorkerID() string { return p.cfg.WorkerID }

func (p *Pipeline) after(step string) {
	if p.cfg.AfterStep != nil {
		p.cfg.AfterStep(step)
	}
}

// Call is one tool call as a caller makes it.
type Call struct {
	Tenant    string
	Principal Principal
	SessionID string
	// Unpinned makes the call resolve against the registry's current catalog for its
	// tenant, pinning nothing under SessionID (which it is still recorded and moded
	// under): a one-shot call of an operator that names no session. A call that
	// belongs to a session leaves it false, so the session's pins decide (MCP-7).
	Unpinned bool
	RunID    string
	// NewRun says no call can have been made in RunID before this one: the run was
	// created for this call's own request (the MCP server's session minted for a
	// request that named none, whose id is the run's). The pipeline then skips the
	// read of the run's earlier calls (call identity, SES-2, and the breaker's
	// counter, RT-8), which could only find none (issue 20). Leave it false for a run
	// id anyone could have sent before: a wrong true decides the call as the run's
	// first (the first generation of a derived id, a breaker count of zero); the key's
	// uniqueness still keeps a write from running twice under one key.
	NewRun bool
	Step   int
	CallID string
	// Derived says the caller sent no call id: CallID is derived from the tool and the
	// arguments (the MCP server's DerivedCallID), and names the calls of that tool
	// with those arguments in the run and step. The pipeline decides whether this one
	// is a retry of the latest of them or a new one, which it names CallID-N (SES-2;
	// see stepIdentity).
	Derived bool
	Tool    string
	Args    json.RawMessage
	// ContextTrust are the labels of the context items in the request that produced
	// the call; origin_trust is their minimum (RT-6).
	ContextTrust []Trust
	// ArgumentTrust is the label the caller carries with the arguments; "" (unknown
	// provenance) is external_untrusted.
	ArgumentTrust Trust
	Workspace     string
	Target        string
}

// sessionKey is the pinned catalog the call resolves against: its tenant's session, or
// none (the current catalog) for an unpinned call.
func (c *Call) sessionKey() SessionKey {
	if c.Unpinned {
		return SessionKey{Tenant: c.Tenant}
	}
	return SessionKey{Tenant: c.Tenant, ID: c.SessionID}
}

// call is the state of one call as it moves through the steps.
type call struct {
	Call
	reg           *registered
	spec          *ToolSpec
	canonicalArgs []byte
	args          map[string]any
	originTrust   Trust
	argumentTrust Trust
	key           string
	argsHash      string
	mode          string
	decision      Decision
	idemWhen      *bool
	// onlyBound: the tool binds arguments and the caller supplied none of its own, so
	// every argument comes from the platform (stepLabel).
	onlyBound  bool
	inv        *store.Invocation
	recordOnce bool // idempotent none/read: the row is written once, at step 13
	// keyFree: step 4 found no row with the call's key, so a record-once call skips
	// its dedupe read at step 8. For a derived call id that is a new generation (or
	// the first); for a named call that may be recorded once, the key read with the
	// breaker's counter (store.PriorCallsParams.Key). A row with that key can then only
	// come from a concurrent identical call (or a caller that named its own call like
	// a generation), and step 13's insert answers with that record — the read has run
	// once more, which a read may.
	keyFree bool
	// breaker is the breaker's counter, read with the call's identity (stepIdentity)
	// and decided on at step 5.
	breaker store.BreakerCounts
	start   time.Time
	// pinnedName: step 1 found the name in the session's pinned catalog (withdrawn or
	// changed since), which only the registry fills; see toolLabel.
	pinnedName bool
	// script is what a sandbox tool's bridge shares with its call (bridgeContext): the
	// held call a script was torn down at.
	script *bridgeHost
}

// toolLabel is the call's gen_ai.tool.name for metrics and spans: the tool's name when
// the registry knows it, UnknownLabel otherwise. Never the caller's raw name: that set
// is unbounded, and every distinct value would be a series kept for the life of the
// process (SEC-2).
func (c *call) toolLabel() string {
	if c.spec != nil || c.pinnedName {
		return c.Tool
	}
	return UnknownLabel
}

// Execute runs one call through the fourteen steps of RT-3, in order. Nothing before
// step 8 touches the world; nothing after step 11 can undo step 11. It returns an error
// only when the store is unusable and no outcome can be recorded; every decision about
// the call itself is an Outcome.
func (p *Pipeline) Execute(ctx context.Context, in Call) (o Outcome, err error) {
	// The store's statements run deep, and a call's goroutine is often new: its stack
	// grows once, here, rather than copy by copy inside them (package growstack).
	growstack.Grow()
	if p.cfg.Tracer != nil {
		var span trace.Span
		// The tool is named once step 1 has said whether the registry knows it (the
		// span keeps what it is given until it is exported; see call.toolLabel).
		ctx, span = p.cfg.Tracer.Start(ctx, "execute_tool", trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.call.id", in.CallID)))
		defer func() {
			tool := UnknownLabel
			if p.cfg.Registry.knows(SessionKey{Tenant: in.Tenant, ID: in.SessionID}, in.Tool) {
				tool = in.Tool
			}
			span.SetName("execute_tool " + tool)
			span.SetAttributes(attribute.String("gen_ai.tool.name", tool),
				attribute.String("toolgen.status", statusLabel(o.Status)))
			if o.ReasonCode != "" {
				span.SetAttributes(attribute.String("error.type", reasonLabel(o.ReasonCode)))
			}
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, "store failure")
			}
			span.End()
		}()
	}
	o, err = p.execute(ctx, in)
	if err == nil && p.cfg.AfterCall != nil {
		err = p.cfg.AfterCall(ctx, in, o)
	}
	return o, err
}

func (p *Pipeline) execute(ctx context.Context, in Call) (Outcome, error) {
	c := &call{Call: in, start: time.Now()}
	o, stop, err := p.stepResolve(ctx, c) // 1
	if err != nil {
		return Outcome{}, err
	}
	if stop {
		return p.stepEmit(ctx, c, o), nil
	}
	p.after("resolve")
	if o, stop := p.stepValidateArgs(c); stop { // 2
		return p.stepEmit(ctx, c, o), nil
	}
	p.after("validate")
	p.stepLabel(c) // 3
	p.after("label")
	if err := p.stepIdentity(ctx, c); err != nil { // 4: the call id, its key, and the breaker's counter
		return Outcome{}, err
	}
	p.after("key")
	o, stop = p.stepBreaker(c) // 5
	p.after("breaker")
	if !stop {
		o, stop, err = p.stepPolicy(ctx, c) // 6
		if err != nil {
			return Outcome{}, err
		}
		p.after("policy")
	}
	if stop { // a refusal is recorded (it counts for the breaker) and returned, never another row's outcome
		o, err = p.recordRefusal(ctx, c, o)
		if err != nil {
			return Outcome{}, err
		}
		return p.stepEmit(ctx, c, o), nil
	}
	if o, stop, err := p.stepPersist(ctx, c); err != nil || stop { // 7 and 8
		if err != nil {
			return Outcome{}, err
		}
		return p.stepEmit(ctx, c, o), nil
	}
	p.after("persist")
	// The row is durable: tell the context's RecordObserver (recorded.go).
	observeRecorded(ctx, c.inv)
	if o, stop, err := p.stepApprovalHold(ctx, c); err != nil || stop { // 9 and 10
		if err != nil {
			return Outcome{}, err
		}
		return p.stepEmit(ctx, c, o), nil
	}
	p.after("hold")
	o, err = p.runClaimed(ctx, c) // 11, 12, 13
	if err != nil {
		return Outcome{}, err
	}
	return p.stepEmit(ctx, c, o), nil // 14
}

// stepResolve is step 1: the pinned catalog of the caller's tenant's session names the
// tool. The error is the store's: the pin could not be read or written.
func (p *Pipeline) stepResolve(ctx context.Context, c *call) (Outcome, bool, error) {
	reg, reason, err := p.cfg.Registry.resolve(ctx, c.sessionKey(), c.Tool)
	if err != nil {
		return Outcome{}, false, err
	}
	if reason == "" && !reg.spec.VisibleTo(c.Tenant) {
		reason = ReasonUnknownTool // another tenant's server or device: as if it did not exist (ID-2)
	}
	c.pinnedName = reason == ReasonToolWithdrawn || reason == ReasonToolChanged
	if reason != "" {
		return NewOutcome(reason, c.CallID), true, nil
	}
	c.reg, c.spec = reg, reg.spec
	return Outcome{}, false, nil
}

// stepValidateArgs is step 2: decode the arguments, validate them against the input
// schema, and keep their canonical JSON (the key's input).
func (p *Pipeline) stepValidateArgs(c *call) (Outcome, bool) {
	raw := bytes.TrimSpace(c.Args)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	if c.reg.bound != nil {
		// SPEC-4: refuse a bound argument the caller supplied, then fill them all from
		// the verified caller and the call, before the key is computed.
		filled, supplied, reason, detail := bindArgs(&c.Call, c.reg.bound, raw)
		if reason != "" {
			return NewOutcome(reason, c.CallID).WithExternalDetail(detail), true
		}
		raw, c.onlyBound = filled, !supplied
	}
	if c.reg.workspacePaths != nil {
		raw = resolveWorkspacePaths(c.Workspace, c.reg.workspacePaths, raw)
	}
	canon, err := CanonicalJSON(raw)
	if err != nil {
		return NewOutcome(ReasonInvalidArguments, c.CallID).WithExternalDetail(err.Error()), true
	}
	if canon[0] != '{' { // canonical JSON has no leading whitespace
		return NewOutcome(ReasonInvalidArguments, c.CallID).WithExternalDetail("arguments must be a JSON object"), true
	}
	if c.reg.input != nil {
		if err := c.reg.input.validate(canon); err != nil {
			return NewOutcome(ReasonInvalidArguments, c.CallID).WithExternalDetail(err.Error()), true
		}
	}
	c.canonicalArgs = canon
	// The decoded arguments are for CEL only: decoded when an expression may read them.
	if c.reg.exprs.idempotentWhen != nil || c.reg.exprs.approvalWhen != nil || p.cfg.Policy.hasRules() {
		var args map[string]any
		if err := json.Unmarshal(canon, &args); err != nil {
			return NewOutcome(ReasonInvalidArguments, c.CallID).WithExternalDetail(err.Error()), true
		}
		c.args = c.reg.argTypes.Normalize(args)
	}
	return Outcome{}, false
}

// stepLabel is step 3: origin_trust is the minimum over the request's context items;
// argument_trust is what the caller carried, external_untrusted when unknown (RT-6).
// Nothing raises a label.
func (p *Pipeline) stepLabel(c *call) {
	c.originTrust = OriginTrust(c.ContextTrust)
	c.argumentTrust = ParseTrust(string(c.ArgumentTrust))
	if c.onlyBound {
		// argument_trust is the minimum over the fields the caller supplied; a bound
		// field is system, and here the caller supplied none (SPEC-4).
		c.argumentTrust = TrustSystem
	}
}

// mayRecordOnce reports whether an allowed call of spec is recorded once, after it
// ran (step 13), instead of before (step 7): an idempotent none or read call.
func mayRecordOnce(spec *ToolSpec) bool {
	return spec.Idempotency.RetrySafe() && spec.SideEffect != SideEffectWrite && !spec.Suspends
}

// stepKey is step 4 (RT-5), once the call id is decided (stepIdentity). The attempt
// number is never an input.
func (p *Pipeline) stepKey(c *call) {
	c.key = IdempotencyKey(KeyInput{
		Tenant: c.Tenant, RunID: c.RunID, Step: c.Step, CallID: c.CallID,
		Tool: c.spec.Name, ToolVersion: c.spec.Version, CanonicalArgs: c.canonicalArgs,
	})
}

// stepBreaker is step 5: one counter per (tenant, run, tool, canonical args) (RT-8,
// SEC-3), read at step 4 in the statement that reads the call's identity. A run id is
// the tenant's: another tenant's calls in a run of the same id neither count here nor
// can be observed through a refusal, as the idempotency key, which includes the
// tenant, already keeps their records apart.
func (p *Pipeline) stepBreaker(c *call) (Outcome, bool) {
	if reason, refused := BreakerCheck(c.breaker); refused {
		c.decision = Decision{Verdict: VerdictDeny, ReasonCode: reason}
		return NewOutcome(ReasonCode(reason), c.CallID), true
	}
	return Outcome{}, false
}

// stepPolicy is step 6 (POL-1): allow, deny or needs_approval, and the recorded value
// of idempotent_when, which recovery reads (RT-4).
func (p *Pipeline) stepPolicy(ctx context.Context, c *call) (Outcome, bool, error) {
	inMode := true
	if p.cfg.Modes != nil {
		mode, ok, err := p.cfg.Modes.ActiveMode(ctx, c.Tenant, c.SessionID, c.spec.Name)
		if err != nil {
			return Outcome{}, false, fmt.Errorf("runtime: active mode: %w", err)
		}
		c.mode, inMode = mode, ok
	}
	if c.reg.exprs.idempotentWhen != nil {
		held, err := c.reg.exprs.idempotentWhen.Eval(ctx, map[string]any{"args": c.args})
		held = held && err == nil // an expression that cannot be evaluated never makes a retry safe
		c.idemWhen = &held
	}
	d, err := p.cfg.Policy.Decide(ctx, DecisionInput{
		Spec: c.spec, Principal: c.Principal, InMode: inMode,
		OriginTrust: c.originTrust, ArgumentTrust: c.argumentTrust,
		Args: c.args, ApprovalWhen: c.reg.exprs.approvalWhen,
	})
	if err != nil {
		return Outcome{}, false, fmt.Errorf("runtime: policy: %w", err)
	}
	c.decision = d
	if d.Verdict == VerdictDeny {
		return NewOutcome(ReasonCode(d.ReasonCode), c.CallID), true, nil
	}
	return Outcome{}, false, nil
}

// recordRefusal persists a breaker or policy denial as a terminal DENIED row (one
// commit): it counts for the breaker, and the denial is in the audit view. The row
// is recorded under a key of its own (the call's key, store.RefusalKeySuffix, a
// random tail), never the call's: a refusal is a decision about this attempt, not an
// outcome of the call, so it never occupies the key and is never replayed. The same
// call made again is decided again — after a dispatch into the mode that allows it,
// with the scope granted, or the policy changed, it runs (SES-2).
//
// If the key already has a row, the refusal is this caller's and is returned as it is:
// never that row's recorded outcome, and the row is not touched (issue 14, finding 5:
// a principal without a tool's scope presented the key of a tenant-mate's read and
// received its recorded file contents). A recorded outcome is returned only to a
// caller who passes the same checks now, so the one case where the row answers is
// the breaker's: its counts include the call's own row (breaker.go), so a retry of a
// call recorded terminal is refused by its own record — it is answered from that
// record instead, once it passes step 6 now.
func (p *Pipeline) recordRefusal(ctx context.Context, c *call, o Outcome) (Outcome, error) {
	if c.mode == "" && p.cfg.Modes != nil {
		// A breaker refusal comes before step 6 resolved the mode; the row still records
		// the mode that was active (WF-5).
		mode, _, err := p.cfg.Modes.ActiveMode(ctx, c.Tenant, c.SessionID, c.spec.Name)
		if err != nil {
			return Outcome{}, fmt.Errorf("runtime: active mode: %w", err)
		}
		c.mode = mode
	}
	inv, err := p.cfg.Store.InvocationGetByKey(ctx, c.key)
	if errors.Is(err, store.ErrNotFound) {
		call := p.recordedCall(c)
		call.Key += store.RefusalKeySuffix + randomToken()
		params := store.InsertSettled(call, store.SettleDenied(string(o.ReasonCode), mustJSON(o)))
		if c.inv, _, err = p.cfg.Store.InvocationInsert(ctx, params); err != nil {
			return Outcome{}, fmt.Errorf("runtime: record denial: %w", err)
		}
		return o, nil
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("runtime: record denial: %w", err)
	}
	if isBreakerReason(o.ReasonCode) && inv.Status.Terminal() {
		po, denied, err := p.stepPolicy(ctx, c)
		if err != nil {
			return Outcome{}, err
		}
		if !denied {
			if ro, refused := p.replayRefusal(c, inv); refused {
				return p.refuseReplay(ctx, c, ro, inv)
			}
			c.inv = inv
			return p.recorded(c, inv), nil
		}
		o = po
	}
	return p.refuseReplay(ctx, c, o, inv)
}

func isBreakerReason(r ReasonCode) bool {
	return r == ReasonRepeatedDenial || r == ReasonLoopDetected || r == ReasonUncertainRepeat
}

// replayRefusal is the check of step 8 beyond step 6: a caller whose call needs an
// approval gets the recorded outcome of another principal's call only if that call
// was itself held and decided; a row recorded without an approval (allowed for its
// own caller) answers only its own caller.
func (p *Pipeline) replayRefusal(c *call, inv *store.Invocation) (Outcome, bool) {
	if c.decision.Verdict == VerdictNeedsApproval && inv.Decision != VerdictNeedsApproval && inv.Principal != c.Principal.ID {
		return NewOutcome(ReasonReplayNeedsApproval, c.CallID), true
	}
	return Outcome{}, false
}

// AuditReplayRefused is the kind of the audit entry of a refusal the pipeline could not
// record as a row, because the key already had one (another principal's call, or this
// caller's own earlier one that succeeded): the refused attempt still shows in the
// audit view.
const AuditReplayRefused = "replay_refused"

// refuseReplay returns o, this caller's refusal, for a key whose row inv stands. The
// refusal cannot be recorded under the key, so it is audited instead — except for a
// retry of the caller's own recorded denial, which says nothing new.
func (p *Pipeline) refuseReplay(ctx context.Context, c *call, o Outcome, inv *store.Invocation) (Outcome, error) {
	if inv.Status == store.StatusDenied && inv.Principal == c.Principal.ID {
		return o, nil
	}
	detail, err := json.Marshal(map[string]any{"reason_code": o.ReasonCode, "invocation": inv.ID})
	if err != nil {
		return Outcome{}, err
	}
	if _, err := p.cfg.Store.AuditAppend(ctx, store.AuditEntry{Tenant: c.Tenant, Kind: AuditReplayRefused,
		Principal: c.Principal.ID, SessionID: c.SessionID, Mode: c.mode, Tool: c.spec.Name, Key: c.key, Detail: detail}); err != nil {
		return Outcome{}, fmt.Errorf("runtime: audit refused replay: %w", err)
	}
	return o, nil
}

func (p *Pipeline) recordedCall(c *call) store.Call {
	return store.Call{
		Key: c.key, Tenant: c.Tenant, Principal: c.Principal.ID, SessionID: c.SessionID,
		RunID: c.RunID, Step: c.Step, CallID: c.CallID, Tool: c.spec.Name,
		ToolVersion: c.spec.Version, ToolSHA256: c.spec.SchemaSHA256, Idempotency: string(c.spec.Idempotency),
		IdempotentWhen: c.idemWhen, Args: c.canonicalArgs, ArgsHash: c.argsHash,
		OriginTrust: string(c.originTrust), ArgumentTrust: string(c.argumentTrust),
		Mode: c.mode, Decision: c.decision.Verdict, Workspace: c.Workspace,
	}
}

// stepPersist is steps 7 and 8. A held call is recorded PENDING; any other call is
// recorded RUNNING under this worker's lease in the same insert (7 and 10 fused, no
// approval can intervene). An idempotent none/read call (that cannot suspend) is not recorded yet: it reads
// the key (step 8) and records its row once, at step 13 — a crash before that leaves
// nothing to recover and the caller simply retries. A key that already has a row is
// step 8: a terminal row's recorded outcome is returned without executing.
func (p *Pipeline) stepPersist(ctx context.Context, c *call) (Outcome, bool, error) {
	if c.decision.Verdict == VerdictAllow && mayRecordOnce(c.spec) {
		if c.keyFree {
			c.recordOnce = true
			return Outcome{}, false, nil
		}
		inv, err := p.cfg.Store.InvocationGetByKey(ctx, c.key)
		switch {
		case errors.Is(err, store.ErrNotFound):
			c.recordOnce = true
			return Outcome{}, false, nil
		case err != nil:
			return Outcome{}, false, fmt.Errorf("runtime: dedupe: %w", err)
		}
		return p.dedupe(ctx, c, inv)
	}
	params := store.InsertRunning(p.recordedCall(c), p.cfg.WorkerID, p.cfg.Lease)
	if c.decision.Verdict == VerdictNeedsApproval {
		params = store.InsertHeld(p.recordedCall(c))
	}
	inv, inserted, err := p.cfg.Store.InvocationInsert(ctx, params)
	if err != nil {
		return Outcome{}, false, fmt.Errorf("runtime: persist invocation: %w", err)
	}
	c.inv = inv
	if inserted {
		if params.Status() == store.StatusPending {
			p.auditHeld(ctx, c)
		}
		return Outcome{}, false, nil
	}
	return p.dedupe(ctx, c, inv)
}

// AuditHeld is the kind of the audit entry that says why a call was held for
// approval: its detail is [HeldDetail].
const AuditHeld = "held"

// HeldDetail is the detail of an AuditHeld entry: which check of POL-1 held the
// invocation (Cause, one of the Hold* constants), the operator rule when one did, and
// the decision's Why.
type HeldDetail struct {
	Invocation int64  `json:"invocation"`
	Cause      string `json:"cause"`
	Rule       string `json:"rule,omitempty"`
	Why        string `json:"why"`
}

// auditHeld records why c was held, as an audit entry beside its PENDING row: the row
// keeps its decision (needs_approval), the entry says which rule, condition or cell of
// the risk x trust matrix decided it, for the reviewer who approves it (issue 18). It
// is one more commit on a path that waits for a person. A failure to write it is
// logged, not the call's: the hold stands, and the reviewer sees that no reason was
// recorded.
func (p *Pipeline) auditHeld(ctx context.Context, c *call) {
	detail, err := json.Marshal(HeldDetail{Invocation: c.inv.ID, Cause: c.decision.Cause, Rule: c.decision.Rule, Why: c.decision.Why})
	if err == nil {
		_, err = p.cfg.Store.AuditAppend(ctx, store.AuditEntry{Tenant: c.Tenant, Kind: AuditHeld, Principal: c.Principal.ID,
			SessionID: c.SessionID, Mode: c.mode, Tool: c.spec.Name, Key: c.key, Detail: detail})
	}
	if err != nil {
		p.log.Warn("runtime: the reason of a hold was not recorded", "invocation", c.inv.ID, "err", err)
	}
}

// dedupe is step 8 for a key that already has a row.
func (p *Pipeline) dedupe(ctx context.Context, c *call, inv *store.Invocation) (Outcome, bool, error) {
	c.inv = inv
	switch {
	case inv.Status.Terminal():
		// Step 6 has passed for this caller; the recorded outcome is theirs unless it
		// was recorded without an approval they need.
		if o, refused := p.replayRefusal(c, inv); refused {
			o, err := p.refuseReplay(ctx, c, o, inv)
			return o, true, err
		}
		return p.recorded(c, inv), true, nil
	case inv.Status == store.StatusPending && inv.Decision == VerdictNeedsApproval:
		c.decision.Verdict = VerdictNeedsApproval // the hold of the first attempt stands
		return Outcome{}, false, nil
	case inv.SuspendedAt != nil && awaitsApproval(inv):
		// A script suspended until a held call is decided: its recorded outcome says so.
		return p.recorded(c, inv), true, nil
	case inv.SuspendedAt != nil:
		o := NewOutcome(ReasonCallSuspended, c.CallID)
		return o, true, nil
	case inv.Status == store.StatusPending && inv.Decision == VerdictAllow:
		// Released for a retry (or reclaimed by the sweep): this caller runs it now.
		claimed, err := p.cfg.Store.InvocationClaimIfPending(ctx, inv.ID, p.cfg.WorkerID, p.cfg.Lease)
		if errors.Is(err, store.ErrConflict) {
			return NewOutcome(ReasonCallInProgress, c.CallID), true, nil
		}
		if err != nil {
			return Outcome{}, false, fmt.Errorf("runtime: claim released call: %w", err)
		}
		c.inv = claimed
		c.idemWhen = claimed.IdempotentWhen
		return Outcome{}, false, nil
	default: // RUNNING under some lease, or PENDING for the sweep's retry
		return NewOutcome(ReasonCallInProgress, c.CallID), true, nil
	}
}

// awaitsApproval reports whether inv is suspended until a held call is decided.
func awaitsApproval(inv *store.Invocation) bool {
	_, ok := store.AwaitedApproval(inv.ResumeToken)
	return ok
}

// recorded returns the outcome stored on a row (step 8).
func (p *Pipeline) recorded(c *call, inv *store.Invocation) Outcome {
	var o Outcome
	if len(inv.Outcome) > 0 && json.Unmarshal(inv.Outcome, &o) == nil {
		o.Replayed = true
		return o
	}
	// A terminal row always carries its outcome; fall back to its reason code.
	o = NewOutcome(ReasonCode(inv.ReasonCode), c.CallID)
	o.Replayed = true
	return o
}

// stepApprovalHold is steps 9 and 10 for a held call: wait, bounded, for a persisted
// decision by another principal (POL-3), then claim. Past the bound the call ends
// unavailable/approval_pending (retryable); its row stays PENDING and a retry with the
// same key resumes the wait.
//
// The wait reads the decision when the store wakes it (store.Waker: on PostgreSQL a
// notification from the decision's transaction, whichever process decided) and
// otherwise every store.WaitInterval: ApprovalPoll on a store without wake-ups from
// other processes, the store's fallback (seconds) on one with them.
func (p *Pipeline) stepApprovalHold(ctx context.Context, c *call) (Outcome, bool, error) {
	if c.decision.Verdict != VerdictNeedsApproval {
		return Outcome{}, false, nil
	}
	holdCtx, cancel := context.WithTimeout(ctx, p.cfg.ApprovalHold)
	defer cancel()
	waker := store.WakerOf(p.cfg.Store)
	// Subscribed before the first read: a decision committed after that read wakes it.
	sub := waker.Subscribe(store.ApprovalTopic(c.inv.Tenant, c.key))
	defer sub.Close()
	w := newStoreWait(waker, sub, p.cfg.ApprovalPoll, holdObserver(ctx), p.cfg.ApprovalHold)
	defer w.stop()
	// The first read is not bounded by the hold: a decision already recorded (a retry,
	// a script re-executed after the decision) is seen however short the bound.
	readCtx := ctx
	for {
		w.observe()
		a, err := p.cfg.Store.ApprovalGet(readCtx, c.key)
		readCtx = holdCtx
		switch {
		case err == nil && a.Approved:
			inv, err := p.cfg.Store.InvocationClaimIfPending(ctx, c.inv.ID, p.cfg.WorkerID, p.cfg.Lease)
			if errors.Is(err, store.ErrConflict) {
				// Another worker claimed the approved call first: a caller's concurrent
				// retry, or a host's maintenance running approved calls. This caller
				// still waits for the outcome, within its hold.
				o, err := p.awaitRecorded(holdCtx, c)
				return o, true, err
			}
			if err != nil {
				return Outcome{}, false, fmt.Errorf("runtime: claim approved call: %w", err)
			}
			c.inv = inv
			return Outcome{}, false, nil
		case err == nil:
			o := NewOutcome(ReasonApprovalDenied, c.CallID)
			if err := p.settlePending(ctx, c, o); err != nil {
				return Outcome{}, false, err
			}
			return o, true, nil
		case !errors.Is(err, store.ErrNotFound) && holdCtx.Err() == nil:
			return Outcome{}, false, fmt.Errorf("runtime: read approval: %w", err)
		}
		if !w.wait(holdCtx) {
			return NewOutcome(ReasonApprovalPending, c.CallID), true, nil
		}
	}
}

// awaitRecorded waits, until ctx ends, for the held call another worker claimed to
// reach a terminal row, and returns its recorded outcome; past the bound the call is
// still in progress (retryable: the caller's retry finds it). It reads the row when
// the store wakes it for the call's status (store.CallTopic) and otherwise as the
// hold does.
func (p *Pipeline) awaitRecorded(ctx context.Context, c *call) (Outcome, error) {
	waker := store.WakerOf(p.cfg.Store)
	sub := waker.Subscribe(store.CallTopic(c.inv.Tenant, c.inv.Key))
	defer sub.Close()
	w := newStoreWait(waker, sub, p.cfg.ApprovalPoll, nil, 0)
	defer w.stop()
	for {
		inv, err := p.cfg.Store.InvocationGet(ctx, c.inv.ID)
		switch {
		case err == nil && inv.Status.Terminal():
			c.inv = inv
			return p.recorded(c, inv), nil
		case err != nil && ctx.Err() == nil:
			return Outcome{}, fmt.Errorf("runtime: read claimed call: %w", err)
		}
		if !w.wait(ctx) {
			return NewOutcome(ReasonCallInProgress, c.CallID), nil
		}
	}
}

// settlePending ends a held call that was denied: claim it, then settle it DENIED.
func (p *Pipeline) settlePending(ctx context.Context, c *call, o Outcome) error {
	inv, err := p.cfg.Store.InvocationClaimIfPending(ctx, c.inv.ID, p.cfg.WorkerID, p.cfg.Lease)
	if errors.Is(err, store.ErrConflict) {
		return nil // another caller of the same key is settling it
	}
	if err != nil {
		return fmt.Errorf("runtime: claim denied call: %w", err)
	}
	return p.settle(ctx, inv.Fence(), store.SettleDenied(string(o.ReasonCode), mustJSON(o)))
}

// runClaimed is steps 11 to 13 for a call this worker holds (or, for a record-once
// read, will record): execute, shape, persist.
func (p *Pipeline) runClaimed(ctx context.Context, c *call) (Outcome, error) {
	if c.inv != nil {
		p.trackExecuting(c.inv.ID, 1)
		defer p.trackExecuting(c.inv.ID, -1)
	}
	res, tc, execErr := p.stepExecute(ctx, c) // 11
	p.after("execute")
	o := p.stepShape(ctx, c, res, execErr, tc) // 12
	p.after("shape")
	o, err := p.stepSettle(ctx, c, o, tc) // 13
	if err == nil {
		p.after("settle")
	}
	return o, err
}

// stepExecute is step 11, the only call of Tool.Execute. The tool's MarkEffectSent
// commits effect_sent_at, fenced, before it returns.
func (p *Pipeline) stepExecute(ctx context.Context, c *call) (res ToolResult, tc *ExecContext, err error) {
	timeout := c.spec.Timeout
	if timeout <= 0 {
		timeout = DefaultToolTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	var fence store.Fence
	if c.inv != nil {
		fence = c.inv.Fence()
	}
	tc = NewExecContext(ExecContextConfig{
		Identity: Identity{
			Tenant: c.Tenant, Principal: c.Principal.ID, RunID: c.RunID, Step: c.Step,
			CallID: c.CallID, IdempotencyKey: c.key,
		},
		Budget:      Budget{MaxOutputBytes: c.spec.OutputMaxBytes},
		Deadline:    deadline,
		Target:      c.Target,
		Workspace:   c.Workspace,
		Artifacts:   p.cfg.Artifacts,
		Credentials: p.cfg.Credentials,
		MarkEffectSent: func(ctx context.Context) error {
			if c.recordOnce {
				return errors.New("runtime: a none/read tool has no effect to mark")
			}
			// The token is made here, not per call: most calls never mark.
			if err := p.markEffectSent(ctx, fence, randomToken()); err != nil {
				return err
			}
			p.after("watermark")
			return nil
		},
	})
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("runtime: tool %s panicked: %v", c.spec.Name, r)
		}
	}()
	ctx = p.bridgeContext(ctx, c) // only a sandbox adapter's tool gets the bridge (RT-12)
	res, err = c.reg.tool.Execute(ctx, tc, json.RawMessage(c.canonicalArgs))
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return res, tc, err
}

// markEffectSent writes the watermark. A transient error is retried with the same
// token, so a write whose acknowledgement was lost is recognised as our own; the
// effect is sent only after a definite success.
func (p *Pipeline) markEffectSent(ctx context.Context, f store.Fence, token string) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		err = p.cfg.Store.InvocationMarkEffectSentIfLeased(ctx, f, token)
		// Only an ambiguous failure is retried: a fence that does not hold, another
		// token's watermark or invalid input will not change on retry.
		if err == nil || errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrConflict) ||
			errors.Is(err, store.ErrInvalid) || ctx.Err() != nil {
			break
		}
		// A short pause: a retry at once meets the same hiccup (a failover, a full
		// connection pool). The same token makes a retry of a write that did commit
		// succeed again, so retrying is always safe.
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
		}
	}
	if err != nil {
		return &watermarkError{err: err}
	}
	return nil
}

type watermarkError struct{ err error }

func (e *watermarkError) Error() string { return "record watermark: " + e.err.Error() }
func (e *watermarkError) Unwrap() error { return e.err }

// stepShape is step 12: turn what the tool returned into the outcome — validate the
// result, lower trust only, excerpt and artifactize large output, envelope untrusted
// content. A failure after the watermark is recorded as such: it never pretends the
// effect did not happen.
func (p *Pipeline) stepShape(ctx context.Context, c *call, res ToolResult, execErr error, tc *ExecContext) Outcome {
	marked := tc.EffectMarked()
	if execErr != nil {
		var wm *watermarkError
		reason, unavailable := adapterUnavailable(execErr)
		switch {
		case errors.As(execErr, &wm) && errors.Is(execErr, store.ErrLeaseLost):
			return NewOutcome(ReasonLeaseLost, c.CallID)
		case errors.As(execErr, &wm):
			return NewOutcome(ReasonWatermarkFailed, c.CallID)
		case marked && !c.spec.Idempotency.RetrySafeWhen(c.idemWhen):
			// The effect may have been sent and a retry is not safe: a person decides.
			return NewOutcome(ReasonEffectMayHaveHappened, c.CallID).WithExternalDetail(execErr.Error())
		case unavailable && names.Reserved(c.spec.Name):
			// DEV-3: the device (or upstream server) is offline, or went away mid-call with
			// no effect in doubt.
			return NewOutcome(reason, c.CallID).WithExternalDetail(execErr.Error())
		case errors.Is(execErr, context.DeadlineExceeded):
			return NewOutcome(ReasonTimeout, c.CallID)
		case errors.Is(execErr, context.Canceled):
			return NewOutcome(ReasonCanceled, c.CallID)
		default:
			return NewOutcome(ReasonToolError, c.CallID).WithExternalDetail(execErr.Error())
		}
	}
	if !res.OK {
		detail, reason := "the tool reported a failure without detail", ReasonToolFailure
		if res.Failure != nil {
			detail = res.Failure.Code + ": " + res.Failure.Message
			switch {
			case res.Failure.Code == string(ReasonInputRequestDeclined) && names.Reserved(c.spec.Name):
				// MCP-6: an adapter declined the server's request for input (sampling,
				// roots, elicitation); only an adapter's tool can claim this reason.
				reason = ReasonInputRequestDeclined
			case scriptReasonOK(c.spec, res.Failure.Code):
				// SCR-1: how a script ended (a budget, a hold, its own error) is the reason.
				reason, _ = scriptReason(c.spec, res.Failure.Code)
			case res.Failure.Retryable && (!marked || c.spec.Idempotency.RetrySafeWhen(c.idemWhen)):
				// A failure the tool calls retryable is reported so only when a retry is safe.
				reason = ReasonToolFailureRetryable
			}
		}
		return NewOutcome(reason, c.CallID).WithExternalDetail(detail)
	}
	if c.reg.output != nil && len(res.Structured) > 0 {
		if err := c.reg.output.validate(res.Structured); err != nil {
			return NewOutcome(ReasonInvalidResult, c.CallID).WithExternalDetail(err.Error())
		}
	}
	ceiling := c.spec.OutputTrust
	res.Trust = LowerOnly(ceiling, res.Trust)
	for i := range res.Content {
		res.Content[i].Trust = LowerOnly(res.Trust, res.Content[i].Trust)
	}
	if c.spec.OutputMaxBytes > 0 {
		shaped, err := ExcerptResult(ctx, res, c.spec.OutputMaxBytes, p.cfg.Artifacts, "application/json")
		if err != nil {
			return NewOutcome(ReasonToolError, c.CallID).WithExternalDetail("artifact: " + err.Error())
		}
		res = shaped
	}
	for i, it := range res.Content {
		if it.Trust == TrustExternalUntrusted {
			res.Content[i].Text = Envelope(it.Trust, c.spec.Name, it.Text)
		}
	}
	return Succeeded(c.CallID, res)
}

// stepSettle is step 13: persist the terminal status and outcome, fenced. A control
// tool that asked to suspend is marked suspended instead (RT-11).
func (p *Pipeline) stepSettle(ctx context.Context, c *call, o Outcome, tc *ExecContext) (Outcome, error) {
	// Only a call that claims success without having marked is flagged: a Prepare that
	// refused (a tool failure before any effect) rightly returns unmarked.
	missing := c.spec.Idempotency.NeedsWatermark() && !tc.EffectMarked() && o.Status == OutcomeSucceeded
	if missing {
		p.log.Warn("tool returned without marking the watermark", "tool", c.spec.Name, "call_id", c.CallID, "key", c.key)
		p.cfg.Metrics.watermarkMissing(ctx, c.spec.Name)
	}
	status := statusOf(o)
	if held := c.script.held(); held != "" && o.ReasonCode == ReasonScriptSuspended && !c.recordOnce {
		// A script torn down at a call held past the hold bound is suspended until that
		// call is decided (RT-11, RT-12); recovery then re-executes it (recover.go).
		token := store.AwaitApprovalToken(held, c.key)
		err := p.retryWrite(ctx, func(ctx context.Context) error {
			return p.cfg.Store.InvocationSuspendIfLeased(ctx, c.inv.Fence(), token, mustJSON(o))
		})
		if errors.Is(err, store.ErrLeaseLost) {
			return NewOutcome(ReasonLeaseLost, c.CallID), nil
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("runtime: suspend script: %w", err)
		}
		return o, nil
	}
	if o.Status != OutcomeSucceeded && o.Retryable && o.ReasonCode != ReasonLeaseLost &&
		(!tc.EffectMarked() || c.spec.Idempotency.RetrySafeWhen(c.idemWhen)) {
		// A retryable outcome with no effect in doubt is not recorded as final: a
		// retry with the same key runs the call again instead of replaying the failure.
		if c.recordOnce {
			return o, nil // no row: the caller simply retries
		}
		err := p.retryWrite(ctx, func(ctx context.Context) error {
			return p.cfg.Store.InvocationReleaseIfLeased(ctx, c.inv.Fence())
		})
		if errors.Is(err, store.ErrLeaseLost) {
			return NewOutcome(ReasonLeaseLost, c.CallID), nil
		}
		if err != nil {
			return Outcome{}, fmt.Errorf("runtime: release for retry: %w", err)
		}
		return o, nil
	}
	if c.recordOnce {
		// a lost read record only means the read runs again
		params := store.InsertRecordOnce(p.recordedCall(c), store.Settlement{
			Status: status, ReasonCode: string(o.ReasonCode), Outcome: mustJSON(o),
		})
		inv, inserted, err := p.cfg.Store.InvocationInsert(ctx, params)
		if err != nil {
			return Outcome{}, fmt.Errorf("runtime: record outcome: %w", err)
		}
		c.inv = inv
		if !inserted && inv.Status.Terminal() {
			return p.recorded(c, inv), nil // a concurrent identical call recorded first
		}
		return o, nil
	}
	if o.ReasonCode == ReasonLeaseLost {
		return o, nil // the row is no longer ours; the sweep decides it
	}
	if reason, suspend := tc.SuspendRequested(); suspend && c.spec.Suspends && o.Status == OutcomeSucceeded {
		token := randomToken()
		o.Suspended = &Suspension{ResumeToken: token, Reason: reason}
		if err := p.retryWrite(ctx, func(ctx context.Context) error {
			return p.cfg.Store.InvocationSuspendIfLeased(ctx, c.inv.Fence(), token, mustJSON(o))
		}); err != nil {
			if errors.Is(err, store.ErrLeaseLost) {
				return NewOutcome(ReasonLeaseLost, c.CallID), nil
			}
			return Outcome{}, fmt.Errorf("runtime: suspend: %w", err)
		}
		return o, nil
	}
	if status == store.StatusUncertain {
		p.cfg.Metrics.uncertain(ctx, c.spec.Name)
	}
	err := p.settle(ctx, c.inv.Fence(), store.Settlement{
		Status: status, ReasonCode: string(o.ReasonCode), Outcome: mustJSON(o),
	}.WithWatermarkMissing(missing))
	if errors.Is(err, store.ErrLeaseLost) {
		return NewOutcome(ReasonLeaseLost, c.CallID), nil
	}
	if err != nil {
		return Outcome{}, err
	}
	return o, nil
}

// settle writes a terminal status, retrying a transient failure under the same fence
// (a settle whose acknowledgement was lost is recognised on retry).
func (p *Pipeline) settle(ctx context.Context, f store.Fence, s store.Settlement) error {
	return p.retryWrite(ctx, func(ctx context.Context) error { return p.cfg.Store.InvocationSettleIfLeased(ctx, f, s) })
}

func (p *Pipeline) retryWrite(ctx context.Context, write func(context.Context) error) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		// The outcome must be recorded even if the caller went away, but one attempt
		// must not hang forever on a connection that never answers.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeAttemptTimeout)
		err = write(actx)
		cancel()
		if err == nil || errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrConflict) {
			return err
		}
		time.Sleep(time.Duration(attempt+1) * 20 * time.Millisecond)
	}
	return fmt.Errorf("runtime: settle: %w", err)
}

// writeAttemptTimeout bounds one attempt of a fenced write retryWrite makes.
const writeAttemptTimeout = 10 * time.Second

// statusOf maps an outcome to the row status.
func statusOf(o Outcome) store.Status {
	switch o.Status {
	case OutcomeSucceeded:
		return store.StatusSucceeded
	case OutcomeDenied:
		return store.StatusDenied
	case OutcomeUnavailable:
		return store.StatusUnavailable
	case OutcomeUncertain:
		return store.StatusUncertain
	default:
		return store.StatusFailed
	}
}

// stepEmit is step 14: metrics, spans and the log line. Events carry classification,
// never payload.
func (p *Pipeline) stepEmit(ctx context.Context, c *call, o Outcome) Outcome {
	p.cfg.Metrics.call(ctx, c.toolLabel(), o, time.Since(c.start))
	if p.log.Enabled(ctx, slog.LevelDebug) { // the arguments would be boxed even when discarded
		p.log.Debug("tool call", "tool", c.Tool, "call_id", c.CallID, "status", o.Status, "reason_code", o.ReasonCode, "replayed", o.Replayed)
	}
	return o
}

func mustJSON(o Outcome) json.RawMessage {
	b, err := o.MarshalJSON() // directly: json.Marshal would re-scan and compact the result
	if err != nil {
		// An Outcome is plain data; failing to encode one is a programming error.
		panic(fmt.Sprintf("runtime: encode outcome: %v", err))
	}
	return b
}

func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
