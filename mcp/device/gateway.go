package device

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/names"
	"github.com/toolgen/toolgen/mcp/upstream"
	"github.com/toolgen/toolgen/model"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// The handshake.
const (
	// ConnectPath is where the gateway accepts devices.
	ConnectPath = "/devices/connect"
	// UpgradeProtocol is the Upgrade token of the device channel.
	UpgradeProtocol = "toolgen-mcp/1"
	// IDHeader carries the device id.
	IDHeader = "Toolgen-Device-Id"
)

// Audit entry kinds written by the gateway.
const (
	AuditConnected    = "device_connected"
	AuditDisconnected = "device_disconnected"
	AuditRefused      = "device_refused"
)

// Refusal reasons (the audit detail's "reason").
const (
	ReasonUnknownDevice        = "unknown_device"
	ReasonBadToken             = "bad_token"
	ReasonAlreadyConnected     = "already_connected"
	ReasonToolOutsideNamespace = "tool_outside_namespace"
	ReasonHandshakeFailed      = "handshake_failed"
)

// Options configures a Gateway.
type Options struct {
	// Devices are the operator's device files (model.Tree.Devices, which spec produces).
	Devices []*model.Device
	// Registry receives the devices' tools as device.{id}.{name}. Required.
	Registry *runtime.Registry
	// Store records the catalog history and the audit entries. Required.
	Store upstream.Store
	// Tenant is the tenant of the audit entries of refusals no device file accounts for
	// (an unknown device id): the operator's. Everything about a known device — its
	// tools, its connections' audit entries and events — is the tenant its file names.
	Tenant string
	// Logger receives the gateway's log lines; nil discards them.
	Logger *slog.Logger
	// ConnectTimeout bounds a device's MCP handshake and first listing (default
	// upstream.DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// ToolTimeout and OutputMaxBytes are passed to the adapter (see upstream.Options).
	ToolTimeout    time.Duration
	OutputMaxBytes int
	// RefusalWindow and RefusalBurst bound the audit entries of refused connections
	// (defaults DefaultRefusalWindow, DefaultRefusalBurst): per device and reason (every
	// unknown id counting as one device), the first RefusalBurst refusals of a window
	// get an entry each, the rest one summary entry with their count when the window
	// ends, so refused attempts cannot grow the store faster than that (SEC-2).
	RefusalWindow time.Duration
	RefusalBurst  int
}

// Gateway accepts devices on ConnectPath (it is an http.Handler) and keeps one adapter
// per device for the life of the process.
type Gateway struct {
	opts    Options
	log     *slog.Logger
	devices map[string]*model.Device

	refusals *refusals

	mu     sync.Mutex
	state  map[string]*deviceState
	closed bool
}

type deviceState struct {
	up     *upstream.Upstream // nil until the first successful connection
	online bool
	busy   bool // a connection is being set up
}

// NewGateway returns a gateway for the devices of opts.Devices.
func NewGateway(opts Options) (*Gateway, error) {
	if opts.Registry == nil || opts.Store == nil {
		return nil, errors.New("device: Options.Registry and Store are required")
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = upstream.DefaultConnectTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{opts: opts, log: log, devices: map[string]*model.Device{}, state: map[string]*deviceState{}}
	g.refusals = newRefusals(opts.RefusalWindow, opts.RefusalBurst, func(ctx context.Context, id string, detail map[string]any) {
		g.audit(ctx, AuditRefused, id, detail)
		g.log.Warn("device refusals counted, not audited one by one", "reason", detail["reason"], "device_id", id, "count", detail["count"])
	})
	for _, d := range opts.Devices {
		if d == nil || d.DeviceID == "" || d.TokenSHA256 == "" || d.Server == nil || d.Tenant == "" {
			return nil, fmt.Errorf("device: a device file without device_id, tenant, token_sha256 or classification: %+v", d)
		}
		g.devices[d.DeviceID] = d
	}
	return g, nil
}

// Online reports whether the device is connected now.
func (g *Gateway) Online(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.state[id]
	return st != nil && st.online
}

// ServeHTTP authenticates a device and runs the MCP client over the upgraded connection.
// It returns once the device's tools are registered (or the connection refused); the
// connection lives on until the device hangs up or the gateway closes.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	claimed := r.Header.Get(IDHeader)
	refuse := func(code int, reason, text string) {
		if g.admitRefusal(r.Context(), claimed, reason, r.RemoteAddr) {
			g.audit(r.Context(), AuditRefused, claimed, map[string]any{"reason": reason, "remote_addr": r.RemoteAddr, "claimed_id": bound(claimed)})
			g.log.Warn("device refused", "reason", reason, "claimed_id", bound(claimed), "remote_addr", r.RemoteAddr)
		}
		http.Error(w, text, code)
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "the device channel is GET with Upgrade: "+UpgradeProtocol, http.StatusMethodNotAllowed)
		return
	}
	if !headerHas(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), UpgradeProtocol) {
		w.Header().Set("Upgrade", UpgradeProtocol)
		http.Error(w, "the device channel needs Connection: Upgrade and Upgrade: "+UpgradeProtocol, http.StatusUpgradeRequired)
		return
	}
	d, why := g.authenticate(claimed, r.Header.Get("Authorization"))
	if d == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="toolgen-devices"`)
		refuse(http.StatusUnauthorized, why, "device authentication failed")
		return
	}
	if !g.reserve(d.DeviceID) {
		refuse(http.StatusConflict, ReasonAlreadyConnected, "device "+d.DeviceID+" is already connected")
		return
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		g.release(d.DeviceID, nil, false)
		http.Error(w, "the connection cannot be upgraded", http.StatusInternalServerError)
		return
	}
	_ = conn.SetDeadline(time.Time{}) // the server's header deadlines no longer apply
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+UpgradeProtocol+"\r\n\r\n"); err != nil {
		conn.Close()
		g.release(d.DeviceID, nil, false)
		return
	}
	// Bytes the device sent after its request (none, as the gateway speaks first) are
	// in rw's reader: read through it.
	transport := &mcp.IOTransport{Reader: readCloser{rw.Reader, conn}, Writer: conn}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), g.opts.ConnectTimeout)
	defer cancel()
	if err := g.connect(ctx, d, transport, r.RemoteAddr); err != nil {
		conn.Close()
		reason := ReasonHandshakeFailed
		var out *outsideError
		if errors.As(err, &out) {
			reason = ReasonToolOutsideNamespace
		}
		if g.admitRefusal(ctx, d.DeviceID, reason, r.RemoteAddr) {
			g.audit(ctx, AuditRefused, d.DeviceID, map[string]any{"reason": reason, "remote_addr": r.RemoteAddr, "error": bound(err.Error())})
			g.log.Warn("device connection refused", "device_id", d.DeviceID, "reason", reason, "error", err)
		}
	}
}

// admitRefusal counts a refusal and reports whether it gets an audit entry of its own
// (see Options.RefusalWindow): the key is the device when the id is one of the
// operator's files, and one shared key for every id that is not, so an attacker
// inventing ids cannot multiply the keys.
func (g *Gateway) admitRefusal(ctx context.Context, claimed, reason, remote string) bool {
	key := refusalKey{reason: reason}
	if g.devices[claimed] != nil {
		key.device = claimed
	}
	if host, _, err := net.SplitHostPort(remote); err == nil {
		remote = host // each attempt has a port of its own
	}
	return g.refusals.admit(ctx, key, remote, claimed)
}

// connect runs the adapter over the upgraded connection: the first connection of the
// device connects it, a later one reconnects the same adapter.
func (g *Gateway) connect(ctx context.Context, d *model.Device, t mcp.Transport, remote string) error {
	g.mu.Lock()
	st := g.state[d.DeviceID]
	up := st.up
	g.mu.Unlock()
	var err error
	if up == nil {
		up, err = upstream.Connect(ctx, upstream.Options{
			Server: d.Server, Domain: upstream.DeviceDomain, Transport: t,
			Registry: g.opts.Registry, Store: g.opts.Store, Tenant: d.Tenant, // its tools are its tenant's alone
			Logger:         g.log.With("device_id", d.DeviceID),
			ToolTimeout:    g.opts.ToolTimeout,
			OutputMaxBytes: g.opts.OutputMaxBytes,
			CheckTools:     g.checkTools(d),
			OnConnectionLost: func(err error) {
				g.lost(d.DeviceID, err)
			},
		})
	} else {
		err = up.Reconnect(ctx, t)
	}
	if err != nil {
		g.release(d.DeviceID, up, false)
		return err
	}
	if !g.release(d.DeviceID, up, true) {
		_ = up.Close()
		return errors.New("the gateway is closed")
	}
	g.audit(ctx, AuditConnected, d.DeviceID, map[string]any{"remote_addr": remote, "protocol": up.ProtocolVersion(), "tools": up.ToolNames()})
	g.event(ctx, store.EventDeviceConnected, d.DeviceID)
	g.log.Info("device connected", "device_id", d.DeviceID, "remote_addr", remote, "tools", len(up.ToolNames()))
	return nil
}

// reserve marks a device as connecting; false if it is online or connecting already.
func (g *Gateway) reserve(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.state[id]
	if st == nil {
		st = &deviceState{}
		g.state[id] = st
	}
	if g.closed || st.online || st.busy {
		return false
	}
	st.busy = true
	return true
}

// release ends a reservation; online says whether the device is now connected. It
// reports false when the gateway closed meanwhile.
func (g *Gateway) release(id string, up *upstream.Upstream, online bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.state[id]
	st.busy = false
	if up != nil {
		st.up = up
	}
	st.online = online && !g.closed
	return !g.closed
}

// lost is the adapter's report that the device's connection ended.
func (g *Gateway) lost(id string, err error) {
	g.mu.Lock()
	st := g.state[id]
	wasOnline := st != nil && st.online
	if st != nil {
		st.online = false
	}
	g.mu.Unlock()
	if !wasOnline {
		return
	}
	ctx := context.Background()
	g.audit(ctx, AuditDisconnected, id, map[string]any{"error": bound(fmt.Sprint(err))})
	g.event(ctx, store.EventDeviceDisconnected, id)
	g.log.Warn("device disconnected; its tools answer device_offline until it dials again", "device_id", id)
}

// Close disconnects every device and withdraws their tools, and writes the summary
// entries of refusals counted so far.
func (g *Gateway) Close() error {
	g.refusals.close()
	g.mu.Lock()
	g.closed = true
	var ups []*upstream.Upstream
	for _, st := range g.state {
		if st.up != nil {
			ups = append(ups, st.up)
		}
		st.online = false
	}
	g.mu.Unlock()
	var errs []error
	for _, up := range ups {
		errs = append(errs, up.Close())
	}
	return errors.Join(errs...)
}

// authenticate returns the device the request proves to be, or nil and why not. The
// presented token is hashed and compared with the file's digest in constant time; an
// unknown id is compared against a digest too, so the time taken does not tell whether
// the id exists.
func (g *Gateway) authenticate(id, authorization string) (*model.Device, string) {
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok {
		token = ""
	}
	sum := sha256.Sum256([]byte(token))
	d := g.devices[id]
	want := unknownDigest
	if d != nil {
		if b, err := hex.DecodeString(d.TokenSHA256); err == nil && len(b) == sha256.Size {
			want = [sha256.Size]byte(b)
		}
	}
	match := subtle.ConstantTimeCompare(sum[:], want[:]) == 1
	switch {
	case d == nil:
		return nil, ReasonUnknownDevice
	case !match || token == "":
		return nil, ReasonBadToken
	}
	return d, ""
}

// unknownDigest is compared against when the id is unknown: no token hashes to it in
// practice (it is not the digest of anything chosen).
var unknownDigest = sha256.Sum256([]byte("toolgen: no such device"))

// outsideError is a device's tool named into another namespace.
type outsideError struct{ remote string }

func (e *outsideError) Error() string {
	return fmt.Sprintf("the device lists tool %q, named into another namespace: a device may only serve tools in its own device.ID. namespace", bound(e.remote))
}

// checkTools is the adapter's CheckTools for device d: refuse a name into another
// namespace, drop what allow_tools does not allow.
func (g *Gateway) checkTools(d *model.Device) func(context.Context, []*mcp.Tool) ([]*mcp.Tool, error) {
	return func(_ context.Context, tools []*mcp.Tool) ([]*mcp.Tool, error) {
		domains := g.domains()
		var keep []*mcp.Tool
		for _, t := range tools {
			if t == nil {
				continue
			}
			if outsideNamespace(t.Name, d.DeviceID, domains) {
				return nil, &outsideError{remote: t.Name}
			}
			if !d.Allows(t.Name) {
				g.log.Info("device tool not in allow_tools: ignored", "device_id", d.DeviceID, "remote_name", bound(t.Name))
				continue
			}
			keep = append(keep, t)
		}
		return keep, nil
	}
}

// domains are the registry domains a device's tool name may not claim: the reserved
// ones and those of the builtins registered now.
func (g *Gateway) domains() map[string]bool {
	out := map[string]bool{}
	for _, r := range names.ReservedDomains {
		out[r] = true
	}
	for _, s := range g.opts.Registry.Current() {
		if !names.Reserved(s.Name) {
			out[names.Domain(s.Name)] = true
		}
	}
	return out
}

// outsideNamespace reports whether a remote tool name is a qualified registry or wire
// name of another namespace: its first segment, up to "." or "__", is a reserved or
// builtin domain — except its own device.{id}. prefix, which only repeats where it is.
func outsideNamespace(remote, id string, domains map[string]bool) bool {
	lower := strings.ToLower(remote)
	for _, own := range []string{"device." + id + ".", "device__" + id + "__"} {
		if strings.HasPrefix(lower, own) {
			return false
		}
	}
	first := lower
	if i := strings.Index(first, "."); i >= 0 {
		first = first[:i]
	} else if i := strings.Index(first, "__"); i >= 0 {
		first = first[:i]
	} else {
		return false
	}
	return domains[first]
}

func (g *Gateway) audit(ctx context.Context, kind, id string, detail map[string]any) {
	b, _ := json.Marshal(detail)
	tool := ""
	if id != "" && names.Segment.MatchString(id) && len(id) <= names.MaxBytes {
		tool = upstream.DeviceDomain + "." + id
	}
	if _, err := g.opts.Store.AuditAppend(context.WithoutCancel(ctx), store.AuditEntry{Tenant: g.tenantOf(id), Kind: kind, Tool: tool, Detail: b}); err != nil {
		g.log.Error("device audit entry not written", "kind", kind, "error", err)
	}
}

// tenantOf is the tenant a device's audit entries and events belong to: its file's, so
// that its tenant's operators see its connections and other tenants do not; the
// operator's for an id no file names.
func (g *Gateway) tenantOf(id string) string {
	if d := g.devices[id]; d != nil {
		return d.Tenant
	}
	return g.opts.Tenant
}

// event appends a device event to the stream (EV-1): the device and its tool namespace,
// nothing the device said.
func (g *Gateway) event(ctx context.Context, kind, id string) {
	if _, err := g.opts.Store.EventAppend(context.WithoutCancel(ctx), store.Event{
		Kind: kind, Tenant: g.tenantOf(id), Server: id, Tool: upstream.DeviceDomain + "." + id,
	}); err != nil {
		g.log.Error("device event not written", "kind", kind, "error", err)
	}
}

// headerHas reports whether a comma-separated header holds token (case-insensitive).
func headerHas(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, part := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}

// bound cuts text from a device for logs and audit entries.
func bound(s string) string {
	const max = 64
	if len(s) > max {
		return strings.ToValidUTF8(s[:max], "") + "…"
	}
	return s
}

// readCloser reads through the hijacked connection's buffered reader and closes the
// connection.
type readCloser struct {
	r *bufio.Reader
	c net.Conn
}

func (r readCloser) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r readCloser) Close() error               { return r.c.Close() }
