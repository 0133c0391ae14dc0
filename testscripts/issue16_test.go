package testscripts

// Issue 16, points 1 to 3, against real `toolrun serve --http` processes on one store
// (a SQLite file two processes share, and a PostgreSQL schema when TOOLGEN_PG_DSN is
// set): a 2025-11-25 session opened on one replica and served by the other (list,
// call, a held call approved by `toolrun approve`), refused to another tenant's token;
// a task for a held call created on one replica, polled by a new client process on
// another after the first replica was SIGKILLed, completed once approved; a task
// cancelled through a third replica ends cancelled and its call never runs. Every wait
// is bounded by i16Wait, a failure guard, never an assertion about time.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/mcppeers"
)

const i16Wait = 60 * time.Second

// i16Replica is one `toolrun serve --http` process.
type i16Replica struct {
	base string
	cmd  *exec.Cmd
	done chan error
	errb *syncBuf
}

// i16Serve starts a replica on a port of its own choosing and waits until it serves.
func i16Serve(t *testing.T, args ...string) *i16Replica {
	t.Helper()
	r := &i16Replica{done: make(chan error, 1), errb: &syncBuf{}}
	r.cmd = exec.Command("toolrun", append([]string{"serve", "--http", "127.0.0.1:0", "--no-servers"}, args...)...)
	r.cmd.Stderr = r.errb
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { r.done <- r.cmd.Wait(); close(r.done); close(exited) }()
	t.Cleanup(func() {
		r.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-r.done:
		case <-time.After(i16Wait):
			r.cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("toolrun serve %s stderr:\n%s", r.base, r.errb.String())
		}
	})
	r.base = strings.TrimSuffix(servingURL(t, r.errb, exited, i16Wait), "/mcp")
	return r
}

// kill SIGKILLs the replica: a replica's death, nothing shut down cleanly.
func (r *i16Replica) kill(t *testing.T) {
	t.Helper()
	r.cmd.Process.Kill()
	select {
	case <-r.done:
	case <-time.After(i16Wait):
		t.Fatal("a SIGKILLed replica did not exit")
	}
}

// i16Root is a spec root with the workspace builtins and two tenants' bot tokens, and
// an operator of acme who decides approvals; its workspace (per tenant) has a .git
// directory, where a write is held for approval.
func i16Root(t *testing.T) (dir, ws string) {
	t.Helper()
	dir = sec14idRoot(t, []string{"workspace.list", "workspace.read_text", "workspace.write_text"}, map[string]string{
		"principals.yaml": `tokens:
  - {id: a-bot, tenant: acme, scopes: [workspace.read, workspace.write], token_sha256: ` + sec14idDigest("a-bot-token") + `}
  - {id: b-bot, tenant: beta, scopes: [workspace.read, workspace.write], token_sha256: ` + sec14idDigest("b-bot-token") + `}
local:
  - {id: op, tenant: acme, scopes: [approvals.decide, workspace.read]}
`,
	})
	ws = t.TempDir()
	for _, d := range []string{"acme/.git", "beta/.git"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir, ws
}

// i16Approve approves, as acme's operator, the one call of acme waiting for approval.
func i16Approve(t *testing.T, common []string) {
	t.Helper()
	var ids [][]string
	for deadline := time.Now().Add(i16Wait); len(ids) == 0; time.Sleep(20 * time.Millisecond) {
		out, errs, code := sec14idToolrun(t, append([]string{"approvals", "--principal", "op"}, common...)...)
		if code != 0 {
			t.Fatalf("toolrun approvals: %d\n%s%s", code, out, errs)
		}
		ids = regexp.MustCompile(`(?m)^(\d+) +workspace.write_text +PENDING`).FindAllStringSubmatch(out, -1)
		if time.Now().After(deadline) {
			t.Fatal("no call was ever held")
		}
	}
	if len(ids) != 1 {
		t.Fatalf("want one held call, approvals lists %v", ids)
	}
	if out, errs, code := sec14idToolrun(t, append([]string{"approve", ids[0][1], "--principal", "op"}, common...)...); code != 0 {
		t.Fatalf("toolrun approve: %d\n%s%s", code, out, errs)
	}
}

// i16RoundRobin sends each request to the next replica, with a bearer token: a load
// balancer with no stickiness.
type i16RoundRobin struct {
	token string
	mu    sync.Mutex
	bases []string
	next  int
	count map[string]int
}

func (rr *i16RoundRobin) RoundTrip(req *http.Request) (*http.Response, error) {
	rr.mu.Lock()
	base := rr.bases[rr.next%len(rr.bases)]
	rr.next++
	rr.count[base]++
	rr.mu.Unlock()
	out := req.Clone(req.Context())
	out.URL.Host = strings.TrimPrefix(base, "http://")
	out.Host = out.URL.Host
	if req.GetBody != nil {
		out.Body, _ = req.GetBody()
	}
	out.Header.Set("Authorization", "Bearer "+rr.token)
	return http.DefaultTransport.RoundTrip(out)
}

// i16TaskScript is a client of the Tasks extension (revision 2026-07-28, by hand: no
// SDK client of Node or Go keeps a task handle), one process per command, so that a
// restart is a new process that knows only the task id:
//
//	node task.mjs create URL TOKEN [TEXT]   a held write of TEXT (default "approved"); prints the CreateTaskResult
//	node task.mjs get URL TOKEN ID   prints the DetailedTask
//	node task.mjs cancel URL TOKEN ID
const i16TaskScript = `
const [cmd, url, token, taskId] = process.argv.slice(2);
const meta = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
  'io.modelcontextprotocol/clientInfo': { name: 'task-client', version: '1' },
};
let method, params, name;
if (cmd === 'create') {
  method = 'tools/call'; name = 'workspace__write_text';
  params = { name, arguments: { path: '.git/NOTE', text: taskId || 'approved', mode: 'overwrite' }, _meta: { ...meta, 'io.toolgen/session_id': 'task-session' } };
} else {
  method = 'tasks/' + cmd; name = taskId;
  params = { taskId, _meta: meta };
}
const res = await fetch(url, {
  method: 'POST',
  headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': method, 'Mcp-Name': name, Authorization: 'Bearer ' + token },
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
});
const text = await res.text();
let msg;
if ((res.headers.get('content-type') || '').startsWith('text/event-stream')) {
  for (const line of text.split('\n')) if (line.startsWith('data: ') && line.length > 6) msg = JSON.parse(line.slice(6));
} else msg = JSON.parse(text);
console.log(JSON.stringify(msg));
process.exit(msg && msg.result ? 0 : 1);
`

// i16Task runs one task client process and returns its JSON-RPC result.
func i16Task(t *testing.T, node, script string, args ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), i16Wait)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, append([]string{script}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("task client %v: %v\n%s", args, err, out)
	}
	var msg struct {
		Result map[string]any `json:"result"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &msg); err != nil {
		t.Fatalf("task client %v: %v\n%s", args, err, out)
	}
	return msg.Result
}

func TestIssue16_Replicas(t *testing.T) {
	for name, db := range sec14idStores(t) {
		t.Run(name, func(t *testing.T) {
			dir, ws := i16Root(t)
			common := []string{"--dir", dir, "--db", db(t), "--workspace", filepath.Join(ws, "{tenant}")}
			serve := append([]string{"--principal", "op", "--hold", "1h", "--sweep", "100ms"}, common...)
			r1, r2 := i16Serve(t, serve...), i16Serve(t, serve...)
			note := filepath.Join(ws, "acme", ".git", "NOTE")

			t.Run("session-2025-11-25", func(t *testing.T) {
				rr := &i16RoundRobin{token: "a-bot-token", bases: []string{r1.base, r2.base}, count: map[string]int{}}
				held := make(chan struct{}, 1)
				cs, err := i15Client(held).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: r1.base + "/mcp",
					MaxRetries: -1, DisableStandaloneSSE: true, HTTPClient: &http.Client{Transport: rr}},
					&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				for range 2 {
					list, err := cs.ListTools(context.Background(), nil)
					if err != nil || !slices.ContainsFunc(list.Tools, func(t *mcp.Tool) bool { return t.Name == "workspace__write_text" }) {
						t.Fatalf("tools/list: %v %v", list, err)
					}
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "workspace__list", Arguments: map[string]any{}})
					if err != nil || res.IsError || i15Text(res) == "" {
						t.Fatalf("workspace__list: %v %v", res, err)
					}
				}
				answer := make(chan *mcp.CallToolResult, 1)
				go func() {
					res, err := heldCall(cs, nil)
					if err != nil {
						t.Errorf("the held call: %v", err)
					}
					answer <- res
				}()
				<-held // progress while held
				i16Approve(t, common)
				if res := <-answer; res == nil || res.IsError {
					t.Fatalf("the approved call: %+v", res)
				}
				if data, err := os.ReadFile(note); err != nil || string(data) != "approved" {
					t.Fatalf(".git/NOTE: %q %v", data, err)
				}
				rr.mu.Lock()
				if rr.count[r1.base] < 3 || rr.count[r2.base] < 3 {
					t.Errorf("requests per replica %v: both must serve the session", rr.count)
				}
				rr.mu.Unlock()

				// beta's token on the replica that did not open the session: refused, cleanly.
				req, _ := http.NewRequest(http.MethodPost, r2.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Session-Id", cs.ID())
				req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
				req.Header.Set("Authorization", "Bearer b-bot-token")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var body bytes.Buffer
				body.ReadFrom(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden || !strings.Contains(body.String(), `"id":5,"error":{"code":-32600`) ||
					!strings.Contains(body.String(), "cannot be used with these credentials") {
					t.Fatalf("another tenant's token on the session: %d %s", resp.StatusCode, body.String())
				}
			})

			t.Run("task", func(t *testing.T) {
				os.Remove(note)
				node, _ := i15Node(t)
				script := filepath.Join(t.TempDir(), "task.mjs")
				if err := os.WriteFile(script, []byte(i16TaskScript), 0o644); err != nil {
					t.Fatal(err)
				}
				created := i16Task(t, node, script, "create", r1.base+"/mcp", "a-bot-token")
				taskID, _ := created["taskId"].(string)
				if created["resultType"] != "task" || created["status"] != "working" || taskID == "" {
					t.Fatalf("the held call with the extension: %v", created)
				}
				// A new client process, on the other replica.
				if got := i16Task(t, node, script, "get", r2.base+"/mcp", "a-bot-token", taskID); got["status"] != "working" {
					t.Fatalf("tasks/get on replica 2: %v", got)
				}
				// Another tenant does not find it.
				ctx, cancel := context.WithTimeout(context.Background(), i16Wait)
				defer cancel()
				if out, err := exec.CommandContext(ctx, node, script, "get", r2.base+"/mcp", "b-bot-token", taskID).CombinedOutput(); err == nil ||
					!strings.Contains(string(out), `"code":-32602`) {
					t.Fatalf("tasks/get by another tenant: %v %s", err, out)
				}
				// The replica that holds the call dies; the approver decides; the other
				// replica's maintenance runs the approved call, and the task reports it.
				r1.kill(t)
				i16Approve(t, common)
				var got map[string]any
				for deadline := time.Now().Add(i16Wait); ; time.Sleep(50 * time.Millisecond) {
					got = i16Task(t, node, script, "get", r2.base+"/mcp", "a-bot-token", taskID)
					if got["status"] != "working" || time.Now().After(deadline) {
						break
					}
				}
				result, _ := got["result"].(map[string]any)
				if got["status"] != "completed" || result == nil || result["isError"] == true {
					t.Fatalf("the task after approval: %v", got)
				}
				if data, err := os.ReadFile(note); err != nil || string(data) != "approved" {
					t.Fatalf(".git/NOTE: %q %v", data, err)
				}

				// Cancelled through a third replica while held: cancelled, and never runs.
				os.Remove(note)
				r3 := i16Serve(t, serve...)
				created = i16Task(t, node, script, "create", r2.base+"/mcp", "a-bot-token", "cancelled")
				taskID, _ = created["taskId"].(string)
				if ack := i16Task(t, node, script, "cancel", r3.base+"/mcp", "a-bot-token", taskID); ack["resultType"] != "complete" {
					t.Fatalf("tasks/cancel: %v", ack)
				}
				if got := i16Task(t, node, script, "get", r2.base+"/mcp", "a-bot-token", taskID); got["status"] != "cancelled" {
					t.Fatalf("the cancelled task: %v", got)
				}
				out, _, _ := sec14idToolrun(t, append([]string{"approvals", "--principal", "op"}, common...)...)
				if strings.Contains(out, "PENDING") {
					t.Fatalf("a cancelled call is still held:\n%s", out)
				}
				out, _, _ = sec14idToolrun(t, append([]string{"audit", "--principal", "op"}, common...)...)
				if !strings.Contains(out, "task_cancel") || !strings.Contains(out, "DENIED task_cancelled") {
					t.Errorf("the audit log does not show the cancellation:\n%s", out)
				}
				if _, err := os.Stat(note); err == nil {
					t.Fatal("the cancelled call ran")
				}
			})
		})
	}
}

// i16TSv2Script is a TypeScript SDK v2 client (@modelcontextprotocol/client, .tooldeps)
// pinned to revision 2026-07-28: it lists the tools (the list hands back the toolgen
// session, which it echoes), lists the workspace, and makes the held write of TEXT,
// which returns once approved. argv: URL TEXT.
const i16TSv2Script = `
import { Client, StreamableHTTPClientTransport } from 'CLIENT';
const [url, text] = process.argv.slice(2);
const client = new Client({ name: 'ts-v2', version: '1' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
console.log('protocol ' + client.getNegotiatedProtocolVersion());
const list = await client.listTools();
const session = list._meta && list._meta['io.toolgen/session_id'];
console.log('session ' + session);
console.log('tools ' + list.tools.map((t) => t.name).join(','));
const meta = { 'io.toolgen/session_id': session };
const r1 = await client.callTool({ name: 'workspace__list', arguments: {}, _meta: meta });
console.log('list isError ' + !!r1.isError);
const r2 = await client.callTool({ name: 'workspace__write_text', arguments: { path: '.git/NOTE', text, mode: 'overwrite' }, _meta: meta },
  { timeout: 600000, onprogress: (p) => console.log('progress ' + p.message) });
console.log('held isError ' + !!r2.isError);
await client.close();
process.exit(0);
`

// i16TSv1Script is the TypeScript SDK 1.32 client (2025-11-25, the inspector's SDK),
// the same steps in its own session. argv: URL TEXT.
const i16TSv1Script = `
import { Client } from 'SDK/client/index.js';
import { StreamableHTTPClientTransport } from 'SDK/client/streamableHttp.js';
const [url, text] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url));
const client = new Client({ name: 'ts-v1', version: '1' }, { capabilities: {} });
await client.connect(transport);
console.log('protocol ' + transport.protocolVersion);
const list = await client.listTools();
console.log('tools ' + list.tools.map((t) => t.name).join(','));
const r1 = await client.callTool({ name: 'workspace__list', arguments: {} });
console.log('list isError ' + !!r1.isError);
const r2 = await client.callTool({ name: 'workspace__write_text', arguments: { path: '.git/NOTE', text, mode: 'overwrite' } },
  undefined, { timeout: 600000, onprogress: (p) => console.log('progress ' + p.message) });
console.log('held isError ' + !!r2.isError);
await client.close();
process.exit(0);
`

// i16Protocol writes the repository's protocol plan_implement_review and the specs it
// names into dir: a session starts in mode plan, which holds workspace.write_text and
// not review.approve.
func i16Protocol(t *testing.T, dir string) {
	t.Helper()
	for _, f := range []string{"tools/conversation.ask_user.yaml", "tools/protocol.dispatch.yaml", "tools/review.approve.yaml",
		"tools/review.merge.yaml", "tools/workspace.list.yaml", "tools/workspace.read_text.yaml", "tools/workspace.write_text.yaml",
		"protocols/plan_implement_review.yaml", "servers/everything.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// i16InMode checks a tool list: the plan mode's tools, and none of review's.
func i16InMode(t *testing.T, who string, names []string) {
	t.Helper()
	if !slices.Contains(names, "workspace__write_text") || !slices.Contains(names, "workspace__list") || slices.Contains(names, "review__approve") {
		t.Errorf("%s: tools/list %v, want the plan mode's tools only", who, names)
	}
}

// i16HeldNote waits for the held write's approval to land: the file says text.
func i16HeldNote(t *testing.T, text string) {
	t.Helper()
	if data, err := os.ReadFile(filepath.Join(os.Getenv("TOOLRUN_WORKSPACE"), ".git", "NOTE")); err != nil || string(data) != text {
		t.Fatalf(".git/NOTE: %q %v, want %q", data, err, text)
	}
}

// Point 1's clients on one URL of one `toolrun serve --http` with a protocol: the
// go-sdk client at 2026-07-28 (its default; over HTTP and, against `toolrun serve
// --stdio` on the same store, stdio) and at 2025-06-18, the TypeScript SDK v2 client
// pinned to 2026-07-28, the TypeScript SDK 1.32 client and the inspector 0.17.5 at
// 2025-11-25: each lists only its mode's tools, calls one, and has a held write
// approved (toolrun approve) and answered.
func TestIssue16_Clients(t *testing.T) {
	dir := i15Root(t)
	i16Protocol(t, dir)
	url, _, _, _ := i15ServeHTTP(t, dir, "--protocol", "plan_implement_review", "--hold", "1h")

	goSDK := func(t *testing.T, transport mcp.Transport, version, text string) {
		held := make(chan struct{}, 1)
		cs, err := i15Client(held).Connect(context.Background(), transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		want := version
		if want == "" {
			want = "2026-07-28" // the go-sdk client's default: server/discover, no initialize
		}
		if got := cs.InitializeResult().ProtocolVersion; got != want {
			t.Fatalf("the client speaks %s, want %s", got, want)
		}
		list, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range list.Tools {
			names = append(names, tool.Name)
		}
		i16InMode(t, "go-sdk "+version, names)
		var meta mcp.Meta
		if version == "" {
			// 2026-07-28: the session is the handle the list handed back.
			if list.CacheScope != "private" || list.TTLMs != 0 {
				t.Errorf("cache hints %d %q, want 0 and private", list.TTLMs, list.CacheScope)
			}
			if id, _ := list.Meta["io.toolgen/session_id"].(string); id != "" {
				meta = mcp.Meta{"io.toolgen/session_id": id}
			}
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "workspace__list", Arguments: map[string]any{}, Meta: meta})
		if err != nil || res.IsError {
			t.Fatalf("workspace__list: %v %+v", err, res)
		}
		answer := make(chan *mcp.CallToolResult, 1)
		go func() {
			p := &mcp.CallToolParams{Name: "workspace__write_text", Arguments: map[string]any{"path": ".git/NOTE", "text": text, "mode": "overwrite"}, Meta: meta}
			p.SetProgressToken("hold")
			res, err := cs.CallTool(context.Background(), p)
			if err != nil {
				t.Errorf("the held call: %v", err)
			}
			answer <- res
		}()
		<-held
		i15Approve(t, dir)
		if res := <-answer; res == nil || res.IsError {
			t.Fatalf("the approved call: %+v", res)
		}
		i16HeldNote(t, text)
	}
	t.Run("go-sdk-2026-07-28-http", func(t *testing.T) {
		hl := &i16Versions{}
		goSDK(t, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: hl}}, "", "go-2026-http")
		if v := hl.all(); len(v) == 0 || slices.ContainsFunc(v, func(s string) bool { return s != "2026-07-28" }) {
			t.Fatalf("request revisions %v, want 2026-07-28 only", v)
		}
	})
	t.Run("go-sdk-2026-07-28-stdio", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), i15Wait)
		defer cancel()
		cmd := exec.CommandContext(ctx, "toolrun", "serve", "--stdio", "--no-servers", "--dir", dir, "--protocol", "plan_implement_review", "--hold", "1h")
		goSDK(t, &mcp.CommandTransport{Command: cmd}, "", "go-2026-stdio")
	})
	t.Run("go-sdk-2025-06-18-http", func(t *testing.T) {
		goSDK(t, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, "2025-06-18", "go-2025-06-18")
	})
	node, sdk := i15Node(t)
	runNode := func(t *testing.T, src, text string, args ...string) string {
		script := filepath.Join(t.TempDir(), "client.mjs")
		if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), i15Wait)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
		out := &syncBuf{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		for !strings.Contains(out.String(), "progress waiting for approval") {
			select {
			case err := <-done:
				t.Fatalf("the client ended before its call was held (%v):\n%s", err, out.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
		i15Approve(t, dir)
		if code := waitExit(t, done, "the client"); code != 0 || !strings.Contains(out.String(), "held isError false") || !strings.Contains(out.String(), "list isError false") {
			t.Fatalf("the client: status %d\n%s", code, out.String())
		}
		i16HeldNote(t, text)
		return out.String()
	}
	t.Run("ts-sdk-v2-2026-07-28", func(t *testing.T) {
		client, err := filepath.Abs(filepath.Join("..", ".tooldeps", "node_modules", "@modelcontextprotocol", "client", "dist", "index.mjs"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(client); err != nil {
			t.Fatalf("the TypeScript SDK v2 client is missing (%v): run `make node-deps`", err)
		}
		out := runNode(t, strings.ReplaceAll(i16TSv2Script, "'CLIENT'", "'"+client+"'"), "ts-v2", url, "ts-v2")
		if !strings.Contains(out, "protocol 2026-07-28") || !strings.Contains(out, "session s-") {
			t.Fatalf("the TypeScript SDK v2 client:\n%s", out)
		}
		i16InMode(t, "ts-sdk-v2", strings.Split(regexp.MustCompile(`(?m)^tools (.*)$`).FindStringSubmatch(out)[1], ","))
	})
	t.Run("ts-sdk-1.32-2025-11-25", func(t *testing.T) {
		out := runNode(t, strings.ReplaceAll(i16TSv1Script, "'SDK/", "'"+sdk+"/"), "ts-v1", url, "ts-v1")
		if !strings.Contains(out, "protocol 2025-11-25") {
			t.Fatalf("the TypeScript SDK 1.32 client:\n%s", out)
		}
		i16InMode(t, "ts-sdk-1.32", strings.Split(regexp.MustCompile(`(?m)^tools (.*)$`).FindStringSubmatch(out)[1], ","))
	})
	t.Run("inspector-0.17.5", func(t *testing.T) {
		node, cli := mcppeers.Inspector(t)
		ctx, cancel := context.WithTimeout(context.Background(), i15Wait)
		defer cancel()
		out, err := exec.CommandContext(ctx, node, cli, "--cli", url, "--transport", "http", "--method", "tools/list").CombinedOutput()
		if err != nil {
			t.Fatalf("inspector tools/list: %v\n%s", err, out)
		}
		var list struct{ Tools []struct{ Name string } }
		if err := json.Unmarshal(out, &list); err != nil {
			t.Fatalf("inspector tools/list: %v\n%s", err, out)
		}
		var names []string
		for _, tool := range list.Tools {
			names = append(names, tool.Name)
		}
		i16InMode(t, "inspector", names)
		cmd := exec.CommandContext(ctx, node, cli, "--cli", url, "--transport", "http", "--method", "tools/call",
			"--tool-name", "workspace__write_text", "--tool-arg", "path=.git/NOTE", "--tool-arg", "text=inspector", "--tool-arg", "mode=overwrite")
		buf := &syncBuf{}
		cmd.Stdout, cmd.Stderr = buf, buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		for deadline := time.Now().Add(i15Wait); !strings.Contains(i15Toolrun(t, "approvals", "--dir", dir), "PENDING"); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the inspector's call was never held:\n%s", buf.String())
			}
		}
		i15Approve(t, dir)
		if code := waitExit(t, done, "the inspector"); code != 0 || strings.Contains(buf.String(), `"isError": true`) {
			t.Fatalf("the inspector's held call: status %d\n%s", code, buf.String())
		}
		i16HeldNote(t, "inspector")
	})
}

// i16Versions records the MCP-Protocol-Version of every request.
type i16Versions struct {
	mu sync.Mutex
	v  []string
}

func (l *i16Versions) RoundTrip(req *http.Request) (*http.Response, error) {
	l.mu.Lock()
	l.v = append(l.v, req.Header.Get("Mcp-Protocol-Version"))
	l.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func (l *i16Versions) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.v)
}
