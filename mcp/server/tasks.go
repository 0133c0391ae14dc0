package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// The Tasks extension (SEP-2663, issue 16 point 2; doc.go, "Tasks"). A task is the
// invocation row: its id names the row, its status, result and timestamps are read
// from the row, so any replica on the store answers tasks/get and tasks/cancel, and a
// task outlives the client and the replica that created it.

// ExtensionTasks is the id of the Tasks extension, advertised under
// capabilities.extensions and declared by a client under the request's
// _meta io.modelcontextprotocol/clientCapabilities.extensions.
const ExtensionTasks = "io.modelcontextprotocol/tasks"

// The methods of the Tasks extension.
const (
	methodTasksGet    = "tasks/get"
	methodTasksUpdate = "tasks/update"
	methodTasksCancel = "tasks/cancel"
)

// Task statuses (SEP-2663).
const (
	TaskWorking   = "working"
	TaskCompleted = "completed"
	TaskFailed    = "failed"
	TaskCancelled = "cancelled"
)

// TaskIDPrefix starts every task id: "tgt-" + the invocation id + "-" + a MAC.
const TaskIDPrefix = "tgt-"

// AuditTaskCancel is the kind of the audit entry of a tasks/cancel that cancelled a
// call before it ran.
const AuditTaskCancel = "task_cancel"

// taskParams are the params of tasks/get, tasks/update and tasks/cancel.
type taskParams struct {
	mcp.ParamsBase
	TaskID         string         `json:"taskId"`
	InputResponses map[string]any `json:"inputResponses,omitempty"`
}

// ackResult answers tasks/update and tasks/cancel: an empty result.
type ackResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// taskResult is a CreateTaskResult (resultType "task", no result or error) and a
// DetailedTask of tasks/get (resultType "complete").
type taskResult struct {
	mcp.ResultBase
	ResultType     string              `json:"resultType"`
	TaskID         string              `json:"taskId"`
	Status         string              `json:"status"`
	StatusMessage  string              `json:"statusMessage,omitempty"`
	CreatedAt      string              `json:"createdAt"`
	LastUpdatedAt  string              `json:"lastUpdatedAt"`
	TTLMs          *int64              `json:"ttlMs"` // null: the row is kept, the task never expires
	PollIntervalMs int64               `json:"pollIntervalMs,omitempty"`
	Result         *mcp.CallToolResult `json:"result,omitempty"`
	Error          *jsonrpc.Error      `json:"error,omitempty"`
}

// addTaskMethods registers the Tasks methods; the middleware answers them
// (serveTaskMethod), since it has the request's credentials.
func (s *Server) addTaskMethods() error {
	unreachable := func(context.Context, *mcp.ServerSession, *taskParams) (*ackResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "toolgen: internal error"}
	}
	for _, m := range []string{methodTasksGet, methodTasksUpdate, methodTasksCancel} {
		if err := mcp.AddReceivingCustomMethod(s.mcp, m, unreachable); err != nil {
			return fmt.Errorf("mcp/server: %s: %w", m, err)
		}
	}
	return nil
}

// declaresTasks reports whether a request's _meta declares the Tasks extension among
// the client's capabilities (revision 2026-07-28 carries them in every request).
func declaresTasks(meta mcp.Meta) bool {
	caps, _ := meta["io.modelcontextprotocol/clientCapabilities"].(map[string]any)
	exts, _ := caps["extensions"].(map[string]any)
	_, ok := exts[ExtensionTasks]
	return ok
}

// wantsTask reports whether a tools/call may be answered with a task: the client
// declared the extension in the request (an opt-in per request, SEP-2663).
func wantsTask(req *mcp.CallToolRequest) bool {
	return req.Params != nil && declaresTasks(req.Params.Meta)
}

// taskRuns are the task calls this server runs now, by invocation id: tasks/cancel
// reaches the ones running here at once; the others watch their row (watchCancel).
type taskRuns struct {
	mu sync.Mutex
	m  map[int64]context.CancelFunc
}

func (t *taskRuns) add(id int64, cancel context.CancelFunc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[int64]context.CancelFunc{}
	}
	t.m[id] = cancel
}

func (t *taskRuns) remove(id int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, id)
}

func (t *taskRuns) cancel(id int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.m[id]; ok {
		c()
		return true
	}
	return false
}

// taskDone is what the pipeline returned for a task call.
type taskDone struct {
	o   runtime.Outcome
	err error
}

// callToolTask answers a tools/call of a client that opted into tasks. The call runs
// in the background, detached from the request: it is answered with its result when
// it ends first, with a task as soon as its durable row is held for approval, or with
// a task once it has run for TaskAfter (a call with no row yet — a read recorded only
// once it ran — is answered when it ends). The background call ends with the server
// (Shutdown): a held call stays PENDING and runs once approved, on any replica (its
// maintenance re-runs approved calls), and its task reports it.
func (s *Server) callToolTask(ctx context.Context, req *mcp.CallToolRequest) (mcp.Result, error) {
	if s.stopping.Err() != nil {
		return nil, errShuttingDown
	}
	c, err := s.prepareCall(ctx, req)
	if err != nil {
		return nil, err
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	unstop := context.AfterFunc(s.stopping, cancel)
	recorded := make(chan *store.Invocation, 1)
	bg = runtime.WithRecordObserver(bg, func(inv *store.Invocation) {
		cp := *inv
		select {
		case recorded <- &cp:
		default:
		}
	})
	done := make(chan taskDone, 1)
	handed := make(chan struct{}) // closed when the request was answered with a task
	go func() {
		o, err := s.opts.Pipeline.Execute(bg, c.call)
		done <- taskDone{o, err}
		unstop()
		cancel()
		select {
		case <-handed:
			if err != nil {
				s.log.Error("mcp/server: a task's call could not be recorded", "tool", logName(c.call.Tool), "call_id", c.id.CallID, "error", err)
			}
		default:
		}
	}()
	// The call becomes a task as soon as it is held, or once it has both a row and run
	// longer than TaskAfter — in either order: a row recorded after the timer fired is
	// handed out at once (found by a test that hung when a loaded machine recorded the
	// row late).
	var inv *store.Invocation
	long := false
	after := time.NewTimer(s.opts.TaskAfter)
	defer after.Stop()
	for {
		select {
		case d := <-done:
			return modernResult{s.finishCall(ctx, c, d.o, d.err)}, nil
		case inv = <-recorded:
			held := inv.Status == store.StatusPending && inv.Decision == store.DecisionNeedsApproval
			if !held && !long {
				continue // running: a task once it runs long
			}
		case <-after.C:
			long = true
			if inv == nil {
				continue // no row yet: a task once it has one, or answered when it ends
			}
		case <-ctx.Done():
			// The client left before it had a task: the call is cancelled as any
			// call whose client left (a held call stays PENDING).
			cancel()
			d := <-done
			return modernResult{s.finishCall(bg, c, d.o, d.err)}, nil
		}
		s.tasks.add(inv.ID, cancel)
		close(handed)
		go s.watchCancel(bg, inv.ID, c.call.Tenant, cancel)
		s.log.Debug("mcp/server: tools/call answered with a task", "tool", logName(c.call.Tool), "call_id", c.id.CallID, "invocation", inv.ID)
		return s.task(inv, "task"), nil
	}
}

// watchCancel ends a task's background call when its row was cancelled through
// another replica: it reads the row every TaskPoll until the call ends.
func (s *Server) watchCancel(ctx context.Context, id int64, tenant string, cancel context.CancelFunc) {
	defer s.tasks.remove(id)
	tick := time.NewTicker(s.opts.TaskPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		inv, err := s.opts.Pipeline.Store().InvocationGet(ctx, id)
		if err == nil && inv.Tenant == tenant && inv.ReasonCode == string(runtime.ReasonTaskCancelled) {
			cancel()
			return
		}
	}
}

// TaskID is the task id of invocation inv: "tgt-" + its id + "-" + the first 32 hex
// digits of HMAC-SHA256(secret, tenant, id, key). Any replica with the deployment's
// secret (Options.CallIDSecret) recognises it; nobody without it can forge one.
func TaskID(secret []byte, tenant string, id int64, key string) string {
	return TaskIDPrefix + strconv.FormatInt(id, 10) + "-" + taskMAC(secret, tenant, id, key)
}

func taskMAC(secret []byte, tenant string, id int64, key string) string {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("io.toolgen/task\x00" + tenant + "\x00" + strconv.FormatInt(id, 10) + "\x00" + key))
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// errTaskNotFound answers a task id that is unknown, forged, or another tenant's: the
// same error for all three (SEP-2663: -32602).
func errTaskNotFound(id string) error {
	return invalidParams("task %q not found", logName(id))
}

// taskRow reads the row a task id names, for tenant.
func (s *Server) taskRow(ctx context.Context, taskID, tenant string) (*store.Invocation, error) {
	rest, ok := strings.CutPrefix(taskID, TaskIDPrefix)
	num, mac, ok2 := strings.Cut(rest, "-")
	id, err := strconv.ParseInt(num, 10, 64)
	if !ok || !ok2 || err != nil || id <= 0 {
		return nil, errTaskNotFound(taskID)
	}
	inv, err := s.opts.Pipeline.Store().InvocationGet(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, errTaskNotFound(taskID)
	case err != nil:
		s.log.Error("mcp/server: a task's row could not be read", "task", logName(taskID), "error", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "toolgen: the task could not be read"}
	}
	if inv.Tenant != tenant || !hmac.Equal([]byte(mac), []byte(taskMAC(s.opts.CallIDSecret, inv.Tenant, inv.ID, inv.Key))) {
		return nil, errTaskNotFound(taskID)
	}
	return inv, nil
}

// serveTaskMethod answers tasks/get, tasks/update and tasks/cancel.
func (s *Server) serveTaskMethod(ctx context.Context, method string, extra *mcp.RequestExtra, p *taskParams) (mcp.Result, error) {
	if !declaresTasks(p.Meta) {
		data, _ := json.Marshal(mcp.MissingRequiredClientCapabilityData{
			RequiredCapabilities: &mcp.ClientCapabilities{Extensions: map[string]any{ExtensionTasks: map[string]any{}}}})
		return nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Data: data,
			Message: fmt.Sprintf("toolgen: %s needs the %s extension declared in the request's client capabilities", method, ExtensionTasks)}
	}
	principal, err := s.principalOf(extra)
	if err != nil {
		return nil, err
	}
	inv, err := s.taskRow(ctx, p.TaskID, principal.Tenant)
	if err != nil {
		return nil, err
	}
	switch method {
	case methodTasksGet:
		return s.task(inv, "complete"), nil
	case methodTasksUpdate:
		// toolgen asks a client for no input (MCP-6): there is nothing to update.
		return &ackResult{ResultType: "complete"}, nil
	}
	return s.cancelTask(ctx, principal, inv)
}

// cancelTask answers tasks/cancel. A call that has not run (held for approval, or
// waiting for its retry) is settled denied/task_cancelled in the store — whichever
// replica holds it, nothing runs it afterwards — with an audit entry; the local
// background call, if any, ends. A call running here is cancelled as a call whose
// client left; one running on another replica, or already ended, is left as it is
// (cancellation is cooperative, SEP-2663). The answer is always the empty ack.
func (s *Server) cancelTask(ctx context.Context, principal runtime.Principal, inv *store.Invocation) (mcp.Result, error) {
	ts, ok := s.opts.Pipeline.Store().(store.Tasks)
	if ok && inv.Status == store.StatusPending {
		o := runtime.NewOutcome(runtime.ReasonTaskCancelled, inv.CallID)
		outcome, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		detail, _ := json.Marshal(map[string]any{"invocation": inv.ID, "call_id": inv.CallID})
		_, err = ts.InvocationCancelPending(ctx, inv.Tenant, inv.ID,
			store.SettleDenied(string(o.ReasonCode), outcome),
			&store.AuditEntry{Tenant: inv.Tenant, Kind: AuditTaskCancel, Principal: principal.ID, SessionID: inv.SessionID,
				Mode: inv.Mode, Tool: inv.Tool, Key: inv.Key, Detail: detail})
		switch {
		case err == nil:
			s.tasks.cancel(inv.ID)
		case errors.Is(err, store.ErrConflict): // it left PENDING meanwhile
		default:
			s.log.Error("mcp/server: tasks/cancel could not record the cancellation", "invocation", inv.ID, "error", err)
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "toolgen: the task could not be cancelled"}
		}
	} else if inv.Status == store.StatusRunning {
		s.tasks.cancel(inv.ID)
	}
	return &ackResult{ResultType: "complete"}, nil
}

// task is the task of row inv: a CreateTaskResult (resultType "task") or the
// DetailedTask of tasks/get (resultType "complete"), with the result once the row is
// terminal (doc.go, "Tasks", for the status of each row).
func (s *Server) task(inv *store.Invocation, resultType string) *taskResult {
	t := &taskResult{
		ResultType:     resultType,
		TaskID:         TaskID(s.opts.CallIDSecret, inv.Tenant, inv.ID, inv.Key),
		Status:         TaskWorking,
		CreatedAt:      inv.CreatedAt.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt:  inv.UpdatedAt.UTC().Format(time.RFC3339Nano),
		PollIntervalMs: max(1, s.opts.TaskPoll.Milliseconds()),
	}
	switch {
	case inv.Status == store.StatusPending && inv.Decision == store.DecisionNeedsApproval:
		t.StatusMessage = HoldProgressMessage
	case inv.Status == store.StatusPending:
		t.StatusMessage = "waiting to run again"
	case inv.Status == store.StatusRunning && inv.SuspendedAt != nil:
		t.StatusMessage = "suspended: " + suspendedText
		if _, ok := store.AwaitedApproval(inv.ResumeToken); ok {
			// A script torn down at a held call: recovery re-executes it once that call is decided.
			t.StatusMessage = "suspended: " + scriptSuspendedText
		}
	case inv.Status == store.StatusRunning:
		t.StatusMessage = "running"
	case inv.ReasonCode == string(runtime.ReasonTaskCancelled):
		t.Status, t.StatusMessage = TaskCancelled, "cancelled by the client before it ran"
	case resultType == "complete":
		var o runtime.Outcome
		if len(inv.Outcome) == 0 || json.Unmarshal(inv.Outcome, &o) != nil {
			t.Status = TaskFailed
			t.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "toolgen: the call's recorded outcome could not be read"}
			break
		}
		t.Status = TaskCompleted
		if o.CallID == "" {
			o.CallID = inv.CallID
		}
		t.Result = toResult(o, identity{SessionID: inv.SessionID, RunID: inv.RunID, Step: inv.Step, CallID: inv.CallID})
		s.honourOutputSchema(context.Background(), t.Result, o, runtime.SessionKey{Tenant: inv.Tenant, ID: inv.SessionID}, inv.Tool)
	default:
		// A CreateTaskResult carries no result: the call ended as it was handed out.
		t.Status = TaskCompleted
	}
	t.Meta = mcp.Meta{MetaSessionID: inv.SessionID, MetaRunID: inv.RunID, MetaStep: inv.Step, MetaCallID: inv.CallID,
		MetaStatus: strings.ToLower(string(inv.Status))}
	return t
}
