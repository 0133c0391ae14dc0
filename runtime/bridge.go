package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/toolgen/toolgen/internal/names"
	"github.com/toolgen/toolgen/runtime/store"
)

// ErrScriptTornDown is returned by Bridge.Call when an approval hold outlived its bound:
// the orchestration script must be torn down and re-executed from the start, and its
// earlier calls will be found at step 8 with their recorded outcomes (RT-12).
var ErrScriptTornDown = errors.New("runtime: approval hold expired; tear the script down and re-execute it")

// Bridge is how an orchestration script calls tools: through the same pipeline, with
// call_id = hash(script) + ":" + the ordinal of the call in the script, counted by the
// bridge (RT-12). A re-executed script (same text, same run and step) produces the same
// call ids, so every call that already has a terminal row returns its recorded outcome
// instead of running again. Replay safety assumes the script is deterministic; the
// watermark bounds the rest.
type Bridge struct {
	p          *Pipeline
	base       Call
	scriptHash string
	host       *bridgeHost // nil for a bridge made by NewBridge

	mu sync.Mutex
	n  int
}

// NewBridge returns a bridge for one execution of script. base carries the identity
// (tenant, principal, session, run, step, trust labels, workspace) every call shares.
func NewBridge(p *Pipeline, base Call, script []byte) *Bridge {
	return &Bridge{p: p, base: base, scriptHash: ScriptHash(script)}
}

// ScriptHash is the hash a script's call ids start with: the hex of the first 16 bytes
// of its SHA-256. The audit view finds a script's calls by it (run, step and
// ScriptHash(script) + ":" + ordinal).
func ScriptHash(script []byte) string {
	sum := sha256.Sum256(script)
	return hex.EncodeToString(sum[:16])
}

// ScriptOrdinal splits a call id the bridge made into its script hash and ordinal;
// false for any other call id.
func ScriptOrdinal(callID string) (hash string, ordinal int, ok bool) {
	hash, n, found := strings.Cut(callID, ":")
	if !found || len(hash) != 32 || strings.Trim(hash, "0123456789abcdef") != "" {
		return "", 0, false
	}
	ordinal, err := strconv.Atoi(n)
	if err != nil || ordinal < 1 || strconv.Itoa(ordinal) != n {
		return "", 0, false
	}
	return hash, ordinal, true
}

// ScriptHash is the hash prefix of every call id this bridge makes.
func (b *Bridge) ScriptHash() string { return b.scriptHash }

// Calls is the number of calls the bridge has made (the ordinal of the last one).
func (b *Bridge) Calls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// Call runs one tool call of the script, with the base call's argument trust.
func (b *Bridge) Call(ctx context.Context, tool string, args json.RawMessage) (Outcome, error) {
	return b.CallTrust(ctx, tool, args, b.base.ArgumentTrust)
}

// CallTrust runs one tool call of the script whose arguments carry the label trust
// (carried provenance, ADR-0021 decision 11). The label is never raised above the base
// call's: a script's calls are at most as trusted as the call that carried the script
// (RT-6).
func (b *Bridge) CallTrust(ctx context.Context, tool string, args json.RawMessage, trust Trust) (Outcome, error) {
	b.mu.Lock()
	b.n++
	ordinal := b.n
	b.mu.Unlock()
	c := b.base
	c.Tool, c.Args = tool, args
	c.ArgumentTrust = MinTrust(ParseTrust(string(b.base.ArgumentTrust)), ParseTrust(string(trust)))
	c.CallID = b.scriptHash + ":" + strconv.Itoa(ordinal)
	// The row of the call, once recorded, names the approval a hold waits for.
	var key string
	prev, _ := ctx.Value(recordObserverKey{}).(RecordObserver)
	ctx = WithRecordObserver(ctx, func(inv *store.Invocation) {
		key = inv.Key
		if prev != nil {
			prev(inv)
		}
	})
	o, err := b.p.Execute(ctx, c)
	if err != nil {
		return o, err
	}
	if o.ReasonCode == ReasonApprovalPending {
		if b.host != nil && key != "" {
			b.host.hold(key)
		}
		return o, ErrScriptTornDown
	}
	return o, nil
}

// bridgeKey carries, in the context of a sandbox tool's execution, what BridgeFrom needs.
type bridgeKey struct{}

type bridgeHost struct {
	p    *Pipeline
	base Call

	mu      sync.Mutex
	heldKey string // the key of the held call the script was torn down at
}

// hold records that the script was torn down at the held call whose key is key.
func (h *bridgeHost) hold(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.heldKey = key
}

// held is the key of the held call the script was torn down at, "" if none.
func (h *bridgeHost) held() string {
	if h == nil {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.heldKey
}

// bridgeContext is how step 11 hands a sandbox adapter's tool (a tool registered with
// RegisterAdapter("sandbox", ...), such as sandbox.run_script) the bridge to the
// pipeline: no other tool finds it in its context (RT-2 holds for every other tool). The
// base call is the script's call as decided: its tenant, principal, session, run, step
// and workspace, its origin_trust as the context label and its argument_trust, so that
// every call of the script is at most as trusted as the call that carried it.
func (p *Pipeline) bridgeContext(ctx context.Context, c *call) context.Context {
	if !c.reg.adapter || names.Domain(c.spec.Name) != sandboxDomain {
		return ctx
	}
	base := c.Call
	base.CallID, base.Derived, base.Tool, base.Args = "", false, "", nil
	base.ContextTrust = []Trust{c.originTrust}
	base.ArgumentTrust = c.argumentTrust
	if base.Principal.Scopes == nil && base.Principal.Claims == nil && p.cfg.ScriptPrincipal != nil {
		// Recovery re-runs the script as the recorded id only (Config.ScriptPrincipal).
		if pr, ok := p.cfg.ScriptPrincipal(base.Tenant, base.Principal.ID); ok && pr.ID == base.Principal.ID && pr.Tenant == base.Tenant {
			base.Principal = pr
		}
	}
	c.script = &bridgeHost{p: p, base: base}
	return context.WithValue(ctx, bridgeKey{}, c.script)
}

// sandboxDomain is the reserved domain of the script runner.
const sandboxDomain = "sandbox"

// BridgeFrom returns a bridge for one execution of script, made from inside a sandbox
// tool's Execute: its calls are the script's calls, through the pipeline that runs the
// sandbox tool, as the caller of the sandbox tool. false outside a sandbox tool.
func BridgeFrom(ctx context.Context, script []byte) (*Bridge, bool) {
	h, ok := ctx.Value(bridgeKey{}).(*bridgeHost)
	if !ok {
		return nil, false
	}
	b := NewBridge(h.p, h.base, script)
	b.host = h
	return b, true
}

// scriptReason maps the failure code a sandbox tool reports to its own reason code
// (script_*, runtime/reasons.yaml), so that how a script ended is the outcome's
// reason_code. Any other code stays tool_failure.
func scriptReason(spec *ToolSpec, code string) (ReasonCode, bool) {
	r := ReasonCode(code)
	if names.Domain(spec.Name) != sandboxDomain || !strings.HasPrefix(code, "script_") || !r.Known() {
		return "", false
	}
	return r, true
}

func scriptReasonOK(spec *ToolSpec, code string) bool {
	_, ok := scriptReason(spec, code)
	return ok
}
