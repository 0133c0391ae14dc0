package testscripts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/host"
	"github.com/toolgen/toolgen/runtime/store"
)

// The scale-out soak (issue 16): N `toolrun serve --http` replicas on one store behind
// a round-robin reverse proxy without stickiness, clients at both revisions (2025-11-25
// sessions, 2026-07-28 without) making mixed calls through it — reads, idempotent and non-idempotent writes, calls held for approval and
// approved through the operator service — while one replica after another is
// SIGKILLed and restarted. Afterwards: no call ran twice, none was lost, every
// interrupted call was decided by the replicas' own sweep, every session kept its
// mode wherever it was served, and no client was told its session was not found.
//
// Sizes: SCALEOUT_CALLS calls (default 240: make test's short form; `make scaleout`
// runs 2,400), a kill every SCALEOUT_KILL_EVERY calls (default 60; 300 long).

// scaleoutSpec is the spec root every replica serves: the builtins the calls use and
// a protocol whose mode the sessions move into, so a replica that never saw a session
// must read its mode from the store to serve it.
var scaleoutSpec = map[string]string{
	"protocols/flow.yaml": `name: flow
initial_mode: look
modes:
  look:
    tools: [workspace.read_text, protocol.dispatch]
  edit:
    tools: [workspace.read_text, workspace.write_text, protocol.dispatch]
`,
	// Clients' arguments are external_untrusted (MCP): without a rule every write
	// would be held; only writes under .git/ are (approval_when).
	"policy.yaml": `rules:
  - name: soak-writes
    tools: [workspace.write_text]
    allow_when: "true"
`,
}

// replica is one `toolrun serve --http` process at a fixed port, killed and restarted
// in place.
type replica struct {
	t    *testing.T
	args []string

	mu   sync.Mutex
	base string // http://ADDR, from its serving line: toolrun picks its port at every start
	cmd  *exec.Cmd
	done chan struct{}
	errb *syncBuf
}

// start starts the replica on a port of its own choosing (a restarted replica gets a
// new one, which the balancer reads at each request) and waits until it serves.
func (r *replica) start() {
	r.t.Helper()
	cmd := exec.Command("toolrun", append([]string{"serve", "--http", "127.0.0.1:0"}, r.args...)...)
	errb := &syncBuf{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	base := strings.TrimSuffix(servingURL(r.t, errb, done, sec14idWait), "/mcp")
	r.mu.Lock()
	r.base, r.cmd, r.done, r.errb = base, cmd, done, errb
	r.mu.Unlock()
}

// where is the replica's current base URL.
func (r *replica) where() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.base
}

// kill SIGKILLs the replica and waits for it to be gone.
func (r *replica) kill() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

func (r *replica) stop() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(sec14idWait):
		cmd.Process.Kill()
		<-done
	}
}

// roundRobin is the load balancer: each request to the next replica, where it is now,
// no stickiness. A replica that is down answers 502, as a real balancer would before
// its health check noticed.
func roundRobin(reps []*replica) http.Handler {
	var next atomic.Uint64
	var proxies sync.Map // base URL -> *httputil.ReverseProxy
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		base := reps[next.Add(1)%uint64(len(reps))].where()
		rp, ok := proxies.Load(base)
		if !ok {
			u, _ := url.Parse(base)
			p := httputil.NewSingleHostReverseProxy(u)
			p.FlushInterval = -1                    // SSE
			p.ErrorLog = log.New(io.Discard, "", 0) // a killed replica's cut streams are expected
			rp, _ = proxies.LoadOrStore(base, p)
		}
		rp.(*httputil.ReverseProxy).ServeHTTP(w, r)
	})
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// soakCall is one call a client makes, retried with its call id until it ends.
type soakCall struct {
	tool string
	args map[string]any
	id   string
	kind string // read, put, append, held
}

func TestScaleOutSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the scale-out soak is an acceptance test (-short skips it)")
	}
	stores := sec14idStores(t)
	for _, name := range []string{"postgres", "sqlite"} {
		t.Run(name, func(t *testing.T) { scaleoutSoak(t, stores[name](t)) })
	}
}

func scaleoutSoak(t *testing.T, db string) {
	calls, killEvery := envInt("SCALEOUT_CALLS", 240), envInt("SCALEOUT_KILL_EVERY", 60)
	const replicas, clients = 3, 4
	dir := sec14idRoot(t, []string{"workspace.read_text", "workspace.write_text", "protocol.dispatch"}, scaleoutSpec)
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "README"), []byte("the soak's workspace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--no-servers", "--dir", dir, "--db", db, "--workspace", ws, "--protocol", "flow",
		"--lease", "1s", "--sweep", "500ms", "--hold", "100ms"}
	var reps []*replica
	for range replicas {
		r := &replica{t: t, args: args}
		r.start()
		reps = append(reps, r)
	}
	t.Cleanup(func() {
		for _, r := range reps {
			r.stop()
			if t.Failed() {
				t.Logf("replica %s stderr:\n%s", r.where(), r.errb.String())
			}
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lb := &http.Server{Handler: roundRobin(reps)}
	go lb.Serve(ln)
	t.Cleanup(func() { lb.Close() })
	endpoint := "http://" + ln.Addr().String() + "/mcp"

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	op, err := host.OpenOperator(ctx, host.Config{Dir: dir, Store: db})
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	approver, err := op.Principal("operator")
	if err != nil {
		t.Fatal(err)
	}

	var done atomic.Int64
	var sessionNotFound, lost atomic.Int64
	outcomes := sync.Map{} // call id -> final status
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Half the clients speak 2025-11-25 (a session, Mcp-Session-Id, that any replica
			// must serve), half 2026-07-28 (no MCP session; the toolgen session handle).
			version := "2026-07-28"
			if c%2 == 0 {
				version = "2025-11-25"
			}
			cl := &soakClient{t: t, endpoint: endpoint, session: fmt.Sprintf("soak-%d", c), version: version, notFound: &sessionNotFound}
			defer cl.close()
			// Into edit: the session's mode lives in the store; every replica serves it.
			cl.finish(ctx, soakCall{tool: "protocol.dispatch", args: map[string]any{"mode": "edit", "reason": "soak"}, id: fmt.Sprintf("d-%d", c)})
			for i := 0; int(done.Load()) < calls; i++ {
				call := soakCallFor(c, i)
				status := cl.finish(ctx, call)
				if status == "" {
					lost.Add(1)
				}
				outcomes.Store(call.id, status)
				done.Add(1)
				if n := cl.toolsInMode(ctx); n != "edit" {
					t.Errorf("session %s: served in mode %q after %d calls, want edit", cl.session, n, i)
				}
			}
		}()
	}
	// The approver decides held calls as they come, through the store.
	approverDone := make(chan struct{})
	go func() {
		defer close(approverDone)
		for ctx.Err() == nil {
			held, err := op.Approvals(ctx, approver)
			if err == nil {
				for _, inv := range held {
					op.Approve(ctx, approver, inv.ID, "soak")
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	// The chaos: a replica SIGKILLed and restarted every killEvery calls.
	killerDone := make(chan struct{})
	kills := 0
	go func() {
		defer close(killerDone)
		next := int64(killEvery)
		for ctx.Err() == nil {
			if done.Load() >= next {
				r := reps[rand.IntN(len(reps))]
				r.kill()
				r.start()
				kills++
				next += int64(killEvery)
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	wg.Wait()
	cancel()
	<-approverDone
	<-killerDone

	st, err := host.OpenStore(context.Background(), db, filepath.Join(dir, ".toolrun"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Every interrupted call is decided by the replicas' own sweep: wait until no row
	// is RUNNING or PENDING with a decision to run.
	var rows []*store.Invocation
	for deadline := time.Now().Add(sec14idWait); ; time.Sleep(100 * time.Millisecond) {
		rows, err = st.InvocationList(context.Background(), store.InvocationFilter{})
		if err != nil {
			t.Fatal(err)
		}
		open := 0
		for _, r := range rows {
			if !r.Status.Terminal() {
				open++
			}
		}
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls still not settled a minute after the clients stopped", open)
		}
	}
	// No call ran twice: each append's line is in its log at most once, exactly once
	// when the call succeeded.
	var appended, uncertain int
	for _, r := range rows {
		if r.Status == store.StatusUncertain {
			uncertain++
		}
	}
	outcomes.Range(func(k, v any) bool {
		id, status := k.(string), v.(string)
		if !strings.HasPrefix(id, "a-") {
			return true
		}
		c, _ := strconv.Atoi(strings.Split(id, "-")[1])
		data, _ := os.ReadFile(filepath.Join(ws, fmt.Sprintf("log-%d.txt", c)))
		n := bytes.Count(data, []byte(id+"\n"))
		switch {
		case n > 1:
			t.Errorf("append %s ran %d times", id, n)
		case status == "succeeded" && n != 1:
			t.Errorf("append %s succeeded but its line is there %d times", id, n)
		}
		appended++
		return true
	})
	if lost.Load() > 0 {
		t.Errorf("%d calls never ended", lost.Load())
	}
	if n := sessionNotFound.Load(); n > 0 {
		t.Errorf("clients were told %d times that their session was not found", n)
	}
	t.Logf("%d calls (%d appends) through %d replicas, %d kills; %d rows, %d UNCERTAIN", done.Load(), appended, replicas, kills, len(rows), uncertain)
}

// soakCallFor is client c's i-th call: a read, an idempotent write, an append (not
// idempotent), or a write under .git/ held for approval.
func soakCallFor(c, i int) soakCall {
	switch i % 5 {
	case 0, 1:
		return soakCall{tool: "workspace.read_text", args: map[string]any{"path": "README"}, id: fmt.Sprintf("r-%d-%d", c, i), kind: "read"}
	case 2:
		return soakCall{tool: "workspace.write_text", args: map[string]any{"path": fmt.Sprintf("state-%d.txt", c), "text": strconv.Itoa(i), "mode": "overwrite"},
			id: fmt.Sprintf("p-%d-%d", c, i), kind: "put"}
	case 3:
		id := fmt.Sprintf("a-%d-%d", c, i)
		return soakCall{tool: "workspace.write_text", args: map[string]any{"path": fmt.Sprintf("log-%d.txt", c), "text": id + "\n", "mode": "append"}, id: id, kind: "append"}
	}
	return soakCall{tool: "workspace.write_text", args: map[string]any{"path": fmt.Sprintf(".git/held-%d-%d", c, i), "text": "x", "mode": "overwrite"},
		id: fmt.Sprintf("h-%d-%d", c, i), kind: "held"}
}

// soakClient is one agent: a go-sdk client through the balancer, in one toolgen
// session, reconnecting when a replica's death ends its MCP session.
type soakClient struct {
	t        *testing.T
	endpoint string
	session  string
	version  string // the protocol revision it speaks
	notFound *atomic.Int64
	cs       *mcp.ClientSession
}

func (c *soakClient) close() {
	if c.cs != nil {
		c.cs.Close()
	}
}

func (c *soakClient) connect(ctx context.Context) error {
	if c.cs != nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "soak", Version: "v1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: c.endpoint, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: c.version})
	if err != nil {
		c.note(err)
		return err
	}
	c.cs = cs
	return nil
}

// note counts an answer that says the session is not found.
func (c *soakClient) note(err error) {
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "session not found") {
		c.notFound.Add(1)
	}
}

// finish makes call, retrying it with its call id through whatever replica answers,
// until it ends: its final status ("succeeded", "uncertain", "denied", "failed"), or
// "" when it never did.
func (c *soakClient) finish(ctx context.Context, call soakCall) string {
	meta := mcp.Meta{"io.toolgen/session_id": c.session, "io.toolgen/call_id": call.id}
	for attempt := 0; attempt < 400; attempt++ {
		if err := c.connect(ctx); err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		res, err := c.cs.CallTool(cctx, &mcp.CallToolParams{Name: strings.ReplaceAll(call.tool, ".", "__"), Arguments: call.args, Meta: meta})
		cancel()
		if err != nil {
			c.note(err)
			c.cs.Close()
			c.cs = nil
			continue
		}
		status, _ := res.Meta["io.toolgen/status"].(string)
		var shape struct {
			Retryable bool `json:"retryable"`
		}
		if res.IsError {
			raw, _ := json.Marshal(res.StructuredContent)
			json.Unmarshal(raw, &shape)
			if shape.Retryable {
				time.Sleep(20 * time.Millisecond)
				continue
			}
		}
		return status
	}
	return ""
}

// toolsInMode says which mode a tools/list through the balancer shows the session.
func (c *soakClient) toolsInMode(ctx context.Context) string {
	for attempt := 0; attempt < 100; attempt++ {
		if err := c.connect(ctx); err != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		res, err := c.cs.ListTools(cctx, &mcp.ListToolsParams{Meta: mcp.Meta{"io.toolgen/session_id": c.session}})
		cancel()
		if err != nil {
			c.note(err)
			c.cs.Close()
			c.cs = nil
			continue
		}
		mode, _ := res.Meta["io.toolgen/mode"].(string)
		return mode
	}
	return ""
}
