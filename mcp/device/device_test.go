package device_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/mcp/device"
	"github.com/toolgen/toolgen/model"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
	"github.com/toolgen/toolgen/spec"
)

const (
	labToken    = "lab-token-0123456789"
	writerToken = "writer-token-9876543210"
)

func digest(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

// deviceFile loads a devices/ID.yaml through the spec loader, into the run-time model.
func deviceFile(t *testing.T, id, token, classification, extra string) *model.Device {
	t.Helper()
	doc := fmt.Sprintf("device_id: %s\ntenant: acme\ntoken_sha256: %s\nclassification: %s\n%s", id, digest(token), classification, extra)
	d, diags := spec.LoadDevice("devices/"+id+".yaml", "devices/"+id+".yaml", []byte(doc))
	if len(diags) > 0 || d == nil {
		t.Fatalf("device file: %v", diags)
	}
	return d.Model()
}

// rig is a gateway on an httptest server, with a registry, a SQLite store and a pipeline.
type rig struct {
	t     *testing.T
	ctx   context.Context
	reg   *runtime.Registry
	store store.Store
	p     *runtime.Pipeline
	gw    *device.Gateway
	url   string
	n     int
}

func newRig(t *testing.T) *rig {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "toolgen.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := &rig{t: t, ctx: ctx, reg: runtime.NewRegistry(), store: st}
	r.p, err = runtime.NewPipeline(runtime.Config{Registry: r.reg, Store: st, Artifacts: runtime.NewFSArtifactWriter(t.TempDir()), WorkerID: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	r.gw, err = device.NewGateway(device.Options{Registry: r.reg, Store: st, Devices: []*model.Device{
		deviceFile(t, "lab", labToken, "{side_effect: read, risk: low, idempotency: idempotent, required_scopes: [device.lab]}", "allow_tools: [echo, hang, slow_echo]\n"),
		deviceFile(t, "writer", writerToken, "{side_effect: write, risk: low, idempotency: non_idempotent, required_scopes: [device.writer]}", ""),
	}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(device.ConnectPath, r.gw)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { r.gw.Close(); srv.Close() })
	r.url = srv.URL
	return r
}

// localServer is the device's MCP server: echo, hang (blocks until cancelled, after
// telling started) and whatever extra tools a test adds.
func localServer(started chan<- string, extra ...string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "laptop", Version: "v1"}, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)
	s.AddTool(&mcp.Tool{Name: "echo", Description: "Echo.", InputSchema: schema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + string(req.Params.Arguments)}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "hang", Description: "Hangs.", InputSchema: schema}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if started != nil {
			started <- "hang"
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	s.AddTool(&mcp.Tool{Name: "not_allowed", Description: "Not on allow_tools.", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	for _, name := range extra {
		s.AddTool(&mcp.Tool{Name: name, Description: "Extra.", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	}
	return s
}

// connect dials the gateway as id and serves s over the channel until the returned
// connection is closed; it waits until the gateway has the device online (or refused it).
func (r *rig) connect(id, token string, s *mcp.Server) (net.Conn, error) {
	r.t.Helper()
	conn, err := device.Dial(r.ctx, r.url, id, token)
	if err != nil {
		return nil, err
	}
	go s.Run(context.Background(), &mcp.IOTransport{Reader: conn, Writer: conn})
	r.t.Cleanup(func() { conn.Close() })
	return conn, nil
}

func (r *rig) waitOnline(id string, want bool) {
	r.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if r.gw.Online(id) == want {
			return
		}
	}
	r.t.Fatalf("device %s online = %v, want %v", id, !want, want)
}

var principal = runtime.Principal{ID: "alice", Tenant: "acme", Scopes: []string{"device.lab", "device.writer"}}

func (r *rig) call(session, tool, args string) runtime.Outcome {
	r.t.Helper()
	r.n++
	o, err := r.p.Execute(r.ctx, runtime.Call{
		Tenant: "acme", Principal: principal, SessionID: session, RunID: "run-" + session, Step: r.n,
		CallID: fmt.Sprintf("call-%d", r.n), Tool: tool, Args: json.RawMessage(args),
		ContextTrust: []runtime.Trust{runtime.TrustUser}, ArgumentTrust: runtime.TrustUser,
	})
	if err != nil {
		r.t.Fatalf("Execute(%s): %v", tool, err)
	}
	return o
}

func (r *rig) audit(kind string) []store.AuditEntry {
	r.t.Helper()
	all, err := r.store.AuditList(r.ctx, "", 0, 1000)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []store.AuditEntry
	for _, e := range all {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func (r *rig) deviceTools() []string {
	var out []string
	for _, s := range r.reg.Current() {
		if strings.HasPrefix(s.Name, "device.") {
			out = append(out, s.Name)
		}
	}
	return out
}

func want(t *testing.T, o runtime.Outcome, status runtime.OutcomeStatus, reason runtime.ReasonCode) {
	t.Helper()
	if o.Status != status || o.ReasonCode != reason {
		detail := ""
		if o.ExternalDetail != nil {
			detail = o.ExternalDetail.Text
		}
		t.Fatalf("outcome %s/%s (%s), want %s/%s", o.Status, o.ReasonCode, detail, status, reason)
	}
}

// TestDeviceConnectsAndServes: the device's tools appear as device.lab.*, only those on
// allow_tools, output external_untrusted, and a call round-trips through the pipeline.
func TestDeviceConnectsAndServes(t *testing.T) {
	r := newRig(t)
	if _, err := r.connect("lab", labToken, localServer(nil)); err != nil {
		t.Fatal(err)
	}
	r.waitOnline("lab", true)
	if got := strings.Join(r.deviceTools(), ","); got != "device.lab.echo,device.lab.hang" {
		t.Fatalf("device tools = %s", got)
	}
	o := r.call("s1", "device.lab.echo", `{"text":"hi"}`)
	want(t, o, runtime.OutcomeSucceeded, "")
	if o.Result.Trust != runtime.TrustExternalUntrusted || !strings.Contains(o.Result.Content[0].Text, `echo: {"text":"hi"}`) {
		t.Fatalf("result %+v", o.Result)
	}
	if got := r.audit(device.AuditConnected); len(got) != 1 || got[0].Tool != "device.lab" {
		t.Fatalf("device_connected entries: %+v", got)
	}
	// The catalog's first records (catalog_drift, added), then the connection. The
	// gateway appends device_connected right after the device went online, so the
	// event may land a moment after the call above.
	want := []string{store.EventCatalogDrift, store.EventCatalogDrift, store.EventDeviceConnected}
	var kinds []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		evs, err := r.store.EventList(r.ctx, store.EventFilter{})
		if err != nil {
			t.Fatal(err)
		}
		kinds = kinds[:0]
		for _, e := range evs {
			if e.Server == "lab" {
				kinds = append(kinds, e.Kind)
			}
		}
		if len(kinds) >= len(want) || time.Now().After(deadline) {
			break
		}
	}
	if !slices.Equal(kinds, want) {
		t.Fatalf("device events %v", kinds)
	}
}

// TestDeviceRefusals: an unknown id, a wrong token, a token of another device, a second
// connection of an online device and a tool named into another namespace are refused,
// register nothing and are audited with their reason.
func TestDeviceRefusals(t *testing.T) {
	r := newRig(t)
	for _, c := range []struct{ id, token, reason string }{
		{"ghost", labToken, device.ReasonUnknownDevice},
		{"lab", "wrong", device.ReasonBadToken},
		{"lab", writerToken, device.ReasonBadToken},
		{"lab", "", device.ReasonBadToken},
	} {
		_, err := r.connect(c.id, c.token, localServer(nil))
		if !errors.Is(err, device.ErrRefused) {
			t.Fatalf("%s with token %q: err = %v, want ErrRefused", c.id, c.token, err)
		}
	}
	reasons := func() []string {
		var out []string
		for _, e := range r.audit(device.AuditRefused) {
			var d struct{ Reason string }
			json.Unmarshal(e.Detail, &d)
			out = append(out, d.Reason)
			if strings.Contains(string(e.Detail), labToken) || strings.Contains(string(e.Detail), writerToken) {
				t.Fatalf("a token is in the audit entry: %s", e.Detail)
			}
		}
		return out
	}
	if got := strings.Join(reasons(), ","); got != "unknown_device,bad_token,bad_token,bad_token" {
		t.Fatalf("refusal reasons = %s", got)
	}
	if tools := r.deviceTools(); len(tools) != 0 {
		t.Fatalf("tools registered by refused devices: %v", tools)
	}

	// A device naming a tool in another namespace: the whole device is refused.
	for _, name := range []string{"mcp.fs.write_file", "sandbox__exec", "device.other.steal"} {
		before := len(reasons())
		if _, err := r.connect("writer", writerToken, localServer(nil, name)); err != nil {
			t.Fatalf("dial: %v", err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if len(reasons()) > before {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no refusal audited", name)
			}
		}
		if got := reasons(); got[len(got)-1] != device.ReasonToolOutsideNamespace {
			t.Fatalf("%s: refusal reasons %v", name, got)
		}
		if tools := r.deviceTools(); len(tools) != 0 || r.gw.Online("writer") {
			t.Fatalf("%s: tools %v, online %v", name, tools, r.gw.Online("writer"))
		}
	}
	// One that only repeats its own namespace is served.
	if _, err := r.connect("writer", writerToken, localServer(nil, "device.writer.note")); err != nil {
		t.Fatal(err)
	}
	r.waitOnline("writer", true)

	// A second connection while online: 409, nothing changes.
	_, err := r.connect("writer", writerToken, localServer(nil))
	if err == nil || errors.Is(err, device.ErrRefused) || !strings.Contains(err.Error(), "409") {
		t.Fatalf("second connection: %v, want a 409", err)
	}
	if !r.gw.Online("writer") {
		t.Fatal("the first connection was dropped by the second")
	}
}

// TestDeviceLoss: offline tools stay advertised and answer device_offline; a device lost
// mid-call gives device_disconnected for a read, UNCERTAIN for a watermarked
// non-idempotent call; dialling again restores service, also to the pinned session.
func TestDeviceLoss(t *testing.T) {
	r := newRig(t)
	started := make(chan string, 1)
	lab, err := r.connect("lab", labToken, localServer(started))
	if err != nil {
		t.Fatal(err)
	}
	r.waitOnline("lab", true)
	want(t, r.call("s1", "device.lab.echo", `{}`), runtime.OutcomeSucceeded, "")

	// Lost mid-call, read/idempotent: device_disconnected, retryable.
	done := make(chan runtime.Outcome, 1)
	go func() { done <- r.call("s1", "device.lab.hang", `{}`) }()
	<-started
	lab.Close()
	o := <-done
	want(t, o, runtime.OutcomeUnavailable, runtime.ReasonDeviceDisconnected)
	if !o.Retryable {
		t.Fatal("device_disconnected must be retryable")
	}
	r.waitOnline("lab", false)

	// Offline: still advertised to the session, device_offline.
	if tools, err := r.reg.Tools(context.Background(), runtime.SessionKey{Tenant: "acme", ID: "s1"}); err != nil || len(tools) == 0 {
		t.Fatal("offline device's tools are no longer advertised")
	}
	want(t, r.call("s1", "device.lab.echo", `{}`), runtime.OutcomeUnavailable, runtime.ReasonDeviceOffline)
	for deadline := time.Now().Add(10 * time.Second); len(r.audit(device.AuditDisconnected)) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("device_disconnected entries: %+v", r.audit(device.AuditDisconnected))
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		evs, err := r.store.EventList(r.ctx, store.EventFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(evs, func(e store.Event) bool { return e.Kind == store.EventDeviceDisconnected && e.Server == "lab" }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no device_disconnected event")
		}
	}

	// Back: the same session calls again.
	if _, err := r.connect("lab", labToken, localServer(started)); err != nil {
		t.Fatal(err)
	}
	r.waitOnline("lab", true)
	want(t, r.call("s1", "device.lab.echo", `{}`), runtime.OutcomeSucceeded, "")
	want(t, r.call("s2", "device.lab.echo", `{}`), runtime.OutcomeSucceeded, "")

	// Lost mid-call, non-idempotent with the watermark set: UNCERTAIN.
	wstarted := make(chan string, 1)
	w, err := r.connect("writer", writerToken, localServer(wstarted))
	if err != nil {
		t.Fatal(err)
	}
	r.waitOnline("writer", true)
	go func() { done <- r.call("s3", "device.writer.hang", `{}`) }()
	<-wstarted
	w.Close()
	o = <-done
	want(t, o, runtime.OutcomeUncertain, runtime.ReasonEffectMayHaveHappened)
}

// TestDeviceBelongsToItsTenant: a device's tools exist for the tenant its file names
// only (issue 14, finding 10): another tenant's call is unknown_tool, as for a tool
// that does not exist, and the connection's audit entries and events are the device's
// tenant's.
func TestDeviceBelongsToItsTenant(t *testing.T) {
	r := newRig(t)
	if _, err := r.connect("lab", labToken, localServer(nil)); err != nil {
		t.Fatal(err)
	}
	r.waitOnline("lab", true)
	for _, tool := range r.reg.Current() {
		if strings.HasPrefix(tool.Name, "device.lab.") && tool.Tenant != "acme" {
			t.Errorf("%s registered for tenant %q, want acme", tool.Name, tool.Tenant)
		}
	}
	other := runtime.Principal{ID: "mallory", Tenant: "globex", Scopes: principal.Scopes}
	o, err := r.p.Execute(r.ctx, runtime.Call{Tenant: "globex", Principal: other, SessionID: "g1", RunID: "g1",
		CallID: "c1", Tool: "device.lab.echo", Args: json.RawMessage(`{"text":"the notes"}`),
		ContextTrust: []runtime.Trust{runtime.TrustUser}, ArgumentTrust: runtime.TrustUser})
	if err != nil {
		t.Fatal(err)
	}
	want(t, o, runtime.OutcomeDenied, runtime.ReasonUnknownTool)
	tools, err := r.reg.Tools(r.ctx, runtime.SessionKey{Tenant: "globex", ID: "g1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range tools {
		if strings.HasPrefix(s.Name, "device.") {
			t.Errorf("globex's catalog holds %s", s.Name)
		}
	}
	want(t, r.call("a1", "device.lab.echo", `{"text":"mine"}`), runtime.OutcomeSucceeded, "")
	for _, e := range r.audit(device.AuditConnected) {
		if e.Tenant != "acme" {
			t.Errorf("device_connected audited in tenant %q, want acme", e.Tenant)
		}
	}
	evs, err := r.store.EventList(r.ctx, store.EventFilter{Tenant: "globex"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if strings.HasPrefix(e.Tool, "device.") {
			t.Errorf("globex's event stream shows %s %s", e.Kind, e.Tool)
		}
	}
}
