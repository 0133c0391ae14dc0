package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
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

	mu sync.Mutex
	n  int
}

// NewBridge returns a bridge for one execution of script. base carries the identity
// (tenant, principal, session, run, step, trust labels, workspace) every call shares.
func NewBridge(p *Pipeline, base Call, script []byte) *Bridge {
	sum := sha256.Sum256(script)
	return &Bridge{p: p, base: base, scriptHash: hex.EncodeToString(sum[:16])}
}

// ScriptHash is the hash prefix of every call id this bridge makes.
func (b *Bridge) ScriptHash() string { return b.scriptHash }

// Call runs one tool call of the script.
func (b *Bridge) Call(ctx context.Context, tool string, args json.RawMessage) (Outcome, error) {
	b.mu.Lock()
	b.n++
	ordinal := b.n
	b.mu.Unlock()
	c := b.base
	c.Tool, c.Args = tool, args
	c.CallID = b.scriptHash + ":" + strconv.Itoa(ordinal)
	o, err := b.p.Execute(ctx, c)
	if err != nil {
		return o, err
	}
	if o.ReasonCode == ReasonApprovalPending {
		return o, ErrScriptTornDown
	}
	return o, nil
}
