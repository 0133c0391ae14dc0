package server

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/textsafe"
	"github.com/toolgen/toolgen/runtime"
)

// The _meta keys of toolgen, on requests (the ids of a call) and on results.
const (
	MetaSessionID = "io.toolgen/session_id"
	MetaRunID     = "io.toolgen/run_id"
	MetaStep      = "io.toolgen/step"
	MetaCallID    = "io.toolgen/call_id"

	MetaStatus       = "io.toolgen/status"
	MetaTrust        = "io.toolgen/trust"
	MetaMIMEType     = "io.toolgen/mime_type"
	MetaReplayed     = "io.toolgen/replayed"
	MetaArtifacts    = "io.toolgen/artifacts"
	MetaSuspended    = "io.toolgen/suspended"
	MetaMode         = "io.toolgen/mode"
	MetaName         = "io.toolgen/name"
	MetaOutputSchema = "io.toolgen/output_schema"
)

// MaxIDBytes bounds an id sent in _meta.
const MaxIDBytes = 256

// maxStep bounds io.toolgen/step (it is an int everywhere, and an int64 in the key).
const maxStep = math.MaxInt32

// identity is who a call is, in the words of DESIGN.md 1b.
type identity struct {
	SessionID string
	RunID     string
	Step      int
	CallID    string
	// Derived: the client sent no call id; CallID is DerivedCallID's, the base of the
	// generations the pipeline chooses among (runtime.Call.Derived).
	Derived bool
	// NewRun: the run is a session minted for this request (runtime.Call.NewRun).
	NewRun bool
}

// DerivedCallID is the call id of a call whose client sent none: "auto-" + the first
// 16 hex digits of HMAC-SHA256(secret, length-prefixed tool + canonical JSON of args),
// tool being the registry name. Absent, empty or null arguments count as {}, as the
// pipeline reads them. Arguments that are not canonical JSON (the pipeline denies them
// invalid_arguments) are hashed as they are.
//
// It is keyed (issue 14, finding 5): the ids are published (in /events, in results,
// in the review queues), and a plain hash of the tool and its arguments would let
// anyone who reads one test guessed arguments offline — which file, which recipient —
// and replay the id. secret is a per-deployment secret every host on one store
// shares (the host reads it from the store), so every process derives the same id
// for the same call and a retry through another process still finds its record.
func DerivedCallID(secret []byte, tool string, args json.RawMessage) string {
	raw := bytes.TrimSpace(args)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	if canon, err := runtime.CanonicalJSON(raw); err == nil {
		raw = canon
	}
	h := hmac.New(sha256.New, secret)
	// The tool's length first: "a" + "b{}" and "ab" + "{}" are different calls.
	h.Write(binary.AppendUvarint(nil, uint64(len(tool))))
	h.Write([]byte(tool))
	h.Write(raw)
	return "auto-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// CallIDSecretBytes is the size of the secret New draws when Options.CallIDSecret is
// empty, and the least a host should store.
const CallIDSecretBytes = 32

// sessionOf is the session a request belongs to: _meta io.toolgen/session_id, else the
// connection's default (Serve), else the MCP session id (HTTP Mcp-Session-Id).
//
// A session belongs to the tenant that used it first, in the store (SES-1): the claim
// is atomic across every process on the store and survives restarts, and ownership
// never moves. Another tenant naming the id gets [errSessionUnavailable], which says
// nothing of the session — not whose it is, not its mode or its tools — and is the
// same whoever owns it. (That the id is taken is the one thing a first-use-wins name
// cannot hide; ids a client did not choose — Mcp-Session-Id, a connection's — are
// random.) Besides, every session-keyed state is keyed by (tenant, session), so even
// a claim bypassed would reach no state of the owner's. A session the server minted
// is bound to its tenant by the MAC in its id until its first echo writes it to the
// store (minted.go). minted reports a session minted for this request, which no
// request can have used before.
func (s *Server) sessionOf(ctx context.Context, ss *mcp.ServerSession, meta mcp.Meta, tenant string) (id string, minted bool, err error) {
	id, err = s.sessionID(ctx, ss, meta)
	if err != nil {
		return "", false, err
	}
	if id == "" {
		// A request that carries no session at all — revision 2026-07-28 over HTTP,
		// which has no protocol session — gets a new one, handed back in the result's
		// _meta MetaSessionID: a client that echoes it keeps its pinned catalog and
		// mode; one that does not makes each request a session of its own (doc.go). It
		// is written to the store only if it comes back (minted.go).
		return s.mint(tenant), true, nil
	}
	if owner, ok := s.owners.Get(id); ok {
		if owner != tenant {
			return "", false, errSessionUnavailable(id)
		}
		return id, false, nil
	}
	if isMintedForm(id) {
		if done, err := s.openMinted(ctx, tenant, id); done || err != nil {
			return id, false, err
		}
	}
	owned, err := s.opts.Sessions.SessionClaim(ctx, tenant, id)
	if err != nil {
		s.log.Error("mcp/server: the session's owner could not be read or recorded", "error", err)
		return "", false, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "toolgen: the session could not be opened"}
	}
	if !owned {
		return "", false, errSessionUnavailable(id)
	}
	s.owners.Add(id, tenant)
	return id, false, nil
}

// errSessionUnavailable refuses a session id the caller's tenant does not own.
func errSessionUnavailable(id string) error {
	return invalidParams("session %q cannot be used with these credentials; name another session in _meta %q, or none to start a new one", logName(id), MetaSessionID)
}

// sessionID is the session the request names, or that its connection or MCP session
// is; "" if none.
func (s *Server) sessionID(ctx context.Context, ss *mcp.ServerSession, meta mcp.Meta) (string, error) {
	id, ok, err := metaID(meta, MetaSessionID)
	if err != nil || ok {
		return id, err
	}
	if id, _ := ctx.Value(connSessionKey{}).(string); id != "" {
		return id, nil
	}
	if ss != nil {
		return ss.ID(), nil
	}
	return "", nil
}

// MintedSessionPrefix starts the id of a session minted for a request that named none.
const MintedSessionPrefix = "s-"

// identityOf applies the ids rule (doc.go) to a tools/call.
func (s *Server) identityOf(ctx context.Context, ss *mcp.ServerSession, meta mcp.Meta, tenant, tool string, args json.RawMessage) (identity, error) {
	var id identity
	var minted bool
	var err error
	if id.SessionID, minted, err = s.sessionOf(ctx, ss, meta, tenant); err != nil {
		return id, err
	}
	run, ok, err := metaID(meta, MetaRunID)
	if err != nil {
		return id, err
	}
	id.RunID = id.SessionID
	if ok {
		id.RunID = run
	}
	id.NewRun = minted && !ok // the run is the session minted just now
	if id.Step, err = metaStep(meta); err != nil {
		return id, err
	}
	call, ok, err := metaID(meta, MetaCallID)
	if err != nil {
		return id, err
	}
	id.CallID, id.Derived = call, false
	if !ok {
		id.CallID, id.Derived = DerivedCallID(s.opts.CallIDSecret, tool, args), true
	}
	return id, nil
}

// metaID reads a string id from _meta: absent is (ok false); present, it must be a
// string of 1 to MaxIDBytes bytes of printable ASCII without spaces (textsafe.CheckID):
// ids are printed in the review queues, the audit view and the event stream, where a
// newline would forge a line and an escape sequence erase one (issue 14, finding 9).
func metaID(meta mcp.Meta, key string) (string, bool, error) {
	v, present := meta[key]
	if !present {
		return "", false, nil
	}
	s, isString := v.(string)
	if !isString {
		return "", false, invalidParams("_meta %q must be a string of 1 to %d bytes, %s", key, MaxIDBytes, textsafe.IDAlphabet)
	}
	if err := textsafe.CheckID(s, MaxIDBytes); err != nil {
		return "", false, invalidParams("_meta %q %v (1 to %d bytes, %s)", key, err, MaxIDBytes, textsafe.IDAlphabet)
	}
	return s, true, nil
}

// metaStep reads io.toolgen/step: an integer in [0, MaxInt32], as a JSON number or a
// string of decimal digits; absent is 0.
func metaStep(meta mcp.Meta) (int, error) {
	v, present := meta[MetaStep]
	if !present {
		return 0, nil
	}
	bad := invalidParams("_meta %q must be an integer from 0 to %d (a number or a string of digits)", MetaStep, maxStep)
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return 0, bad
		}
		f = float64(i)
	case string:
		if n == "" || len(n) > 10 {
			return 0, bad
		}
		for _, c := range n {
			if c < '0' || c > '9' {
				return 0, bad
			}
		}
		i, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return 0, bad
		}
		f = float64(i)
	default:
		return 0, bad
	}
	if f != math.Trunc(f) || f < 0 || f > maxStep {
		return 0, bad
	}
	return int(f), nil
}
