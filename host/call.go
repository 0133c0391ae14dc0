package host

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"

	"github.com/toolgen/toolgen/internal/textsafe"
	mcpserver "github.com/toolgen/toolgen/mcp/server"
	"github.com/toolgen/toolgen/runtime"
)

// CallIDSecretName names the deployment secret (store.DeploymentSecrets.DeploymentSecretGetOrCreate)
// that keys the derived call ids (mcp/server.DerivedCallID): one per store, so every
// host on it derives the same id for the same call (a retry through another process
// finds its record), and nobody without the store can test guessed arguments against
// a published id (issue 14, finding 5).
const CallIDSecretName = "derived_call_id"

// loadCallIDSecret reads the store's call-id secret, creating it if this is the first
// host on the store.
func (h *Host) loadCallIDSecret(ctx context.Context) error {
	candidate := make([]byte, mcpserver.CallIDSecretBytes)
	rand.Read(candidate)
	secret, err := h.st.DeploymentSecretGetOrCreate(ctx, CallIDSecretName, candidate)
	if err != nil {
		return fmt.Errorf("store: the call-id secret: %w", err)
	}
	h.callIDSecret = secret
	return nil
}

// CallRequest is one call made through Host.Call.
type CallRequest struct {
	Tool string
	Args json.RawMessage // a JSON object; nil is {}
	// Principal is the caller; the zero value is Config.Principal (see Host.Principal).
	Principal runtime.Principal
	// SessionID, RunID ("" is the session), Step and CallID ("" is derived from the
	// tool and the canonical arguments, as the MCP server derives it, so a call retried
	// through either finds itself) name the call (RT-5). Ids are 1 to
	// mcp/server.MaxIDBytes bytes of printable ASCII without spaces, as over MCP. A
	// named session is pinned as over MCP, in the caller's tenant; "" is the session
	// "cli", which pins nothing: a one-shot operator call resolves against the host's
	// current catalog, so hosts with other tools on the same store, or this host after an
	// upgrade, are never held to a catalog an earlier call happened to pin.
	SessionID, RunID string
	Step             int
	CallID           string
	// ArgumentTrust is the label of the arguments ("" is user: the operator typed them).
	ArgumentTrust runtime.Trust
}

// Call runs one call through the pipeline, exactly as a tools/call over MCP would, and
// returns its outcome. The error is for an id outside the alphabet (nothing is
// recorded) and for a store that cannot record anything.
func (h *Host) Call(ctx context.Context, r CallRequest) (runtime.Outcome, error) {
	p := r.Principal
	if p.ID == "" {
		var err error
		if p, err = h.Principal(""); err != nil {
			return runtime.Outcome{}, err
		}
	}
	unpinned := r.SessionID == ""
	if unpinned {
		r.SessionID = "cli"
	}
	if r.RunID == "" {
		r.RunID = r.SessionID
	}
	if len(r.Args) == 0 {
		r.Args = json.RawMessage("{}")
	}
	derived := r.CallID == ""
	if derived {
		r.CallID = mcpserver.DerivedCallID(h.callIDSecret, r.Tool, r.Args)
	}
	for _, id := range []struct{ name, value string }{{"session", r.SessionID}, {"run", r.RunID}, {"call", r.CallID}} {
		if err := textsafe.CheckID(id.value, mcpserver.MaxIDBytes); err != nil {
			return runtime.Outcome{}, fmt.Errorf("the %s id %w (1 to %d bytes, %s)", id.name, err, mcpserver.MaxIDBytes, textsafe.IDAlphabet)
		}
	}
	if r.ArgumentTrust == "" {
		r.ArgumentTrust = runtime.TrustUser
	}
	return h.pipe.Execute(ctx, runtime.Call{
		Tenant: p.Tenant, Principal: p, SessionID: r.SessionID, Unpinned: unpinned, RunID: r.RunID, Step: r.Step,
		CallID: r.CallID, Derived: derived, Tool: r.Tool, Args: r.Args, ArgumentTrust: r.ArgumentTrust, Workspace: h.workspaces.For(p.Tenant, r.RunID),
	})
}
