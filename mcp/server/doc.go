// Package server serves the tool registry to agents over MCP (DESIGN.md MCP-9), on
// stdio and on Streamable HTTP, with github.com/modelcontextprotocol/go-sdk. It adds
// no judgement of its own: every tools/call goes through [runtime.Pipeline.Execute],
// and tools/list is a courtesy view of what the pipeline would accept.
//
// # Names, lists and modes (SPEC-1, WF-3, WF-4, MCP-7)
//
// A tool is served under its wire name, the registry name with "." replaced by "__"
// (internal/names.Wire): workspace.write_text is workspace__write_text. tools/list
// shows, for each session, the tools of the session's pinned catalog
// ([runtime.Registry.Tools]) that its active mode holds ([runtime.ModeResolver]);
// without a resolver, the whole pinned catalog. A tools/call for any other name — a
// tool of another mode, an unknown or withdrawn name, a registry name with dots — is
// still sent to the pipeline, which answers denied/not_in_mode, denied/unknown_tool or
// unavailable/tool_withdrawn: the pipeline is the judge, the list is a courtesy.
//
// Per-session lists are made by receiving middleware on one *mcp.Server, not by one
// *mcp.Server per session, because:
//
//   - the list is computed from the registry pin and the mode resolver at each
//     tools/list, so it is never a second, stale copy of catalog × mode that would have
//     to be re-synchronised when a session's mode changes mid-session;
//   - the SDK answers a tools/call for a name not registered on its Server with a
//     JSON-RPC error before any handler runs: that would be a second judge in front of
//     the pipeline. The middleware sends every tools/call name to the pipeline;
//   - StreamableHTTPHandler calls its getServer callback on every HTTP request, before
//     the session is known, so a server per session would need a side table keyed by
//     Mcp-Session-Id with its own lifecycle;
//   - Server.AddTool panics on an input schema whose top-level type is not "object";
//     this package never calls it. Schemas are sanitized for listing instead: a
//     missing schema or type becomes {"type":"object"}, a type list holding "object"
//     becomes "object", and a tool whose schema cannot describe an object (invalid
//     JSON, another type) is left out of the list with a warning — it stays callable
//     by name, and the pipeline validates its arguments.
//
// The cost: no automatic notifications/tools/list_changed (the tools capability says
// listChanged false; a client re-lists after a mode change).
//
// # The identity of a call (RT-5, 1b words)
//
// MCP clients carry no run, step or call ids. The rule: a tools/call takes them from
// the request's _meta when the client sends them — io.toolgen/session_id,
// io.toolgen/run_id, io.toolgen/step (an integer >= 0, or a string of decimal digits,
// since some clients can only send strings) and io.toolgen/call_id (strings of 1 to
// 256 bytes of printable ASCII without spaces: ids are printed in the review queues,
// the audit view and the event stream, where a newline would forge a line and an
// escape sequence erase one). Each missing one has a default: the session id is the
// MCP session (the HTTP Mcp-Session-Id; for a connection served by [Server.Serve] or
// [Server.ServeStdio], Options.SessionID or else a random id per connection; a request
// of revision 2026-07-28 over HTTP, which has no session, gets a new one, below); the run
// id is the session id; the step is 0; the call id is derived from the content,
// [DerivedCallID]: "auto-" + the first 16 hex digits of HMAC-SHA256 keyed with
// Options.CallIDSecret over the registry tool name and the canonical JSON of the
// arguments, where absent or null arguments count as {}. Keyed, because call ids are
// published (events, results, review queues): a plain hash would let anyone who reads
// one confirm guessed arguments offline. tools/list honours io.toolgen/session_id the
// same way. A malformed id is a JSON-RPC invalid-params error: it is the client's
// protocol mistake, not a call.
//
// # Whose session (SES-1)
//
// A session id belongs to the tenant that used it first, recorded in the store
// (Options.Sessions, the pipeline's store by default): the claim is atomic across every
// process on the store and survives restarts, and ownership never moves. A request of
// another tenant naming the id — in _meta, or as the HTTP session — is refused with one
// invalid-params error, the same whoever owns the session, that names neither the owner
// nor anything of the session. Owners are cached in memory, bounded by
// Options.MaxCachedSessions; an owner never changes, so an entry is never stale and an
// evicted one is read again. Behind the claim, the pinned catalog and the mode are keyed
// by (tenant, session) anyway.
//
// Consequence: without _meta ids, the same call with the same arguments in the same
// session is the same call (the same idempotency key). A retry finds its recorded
// outcome, or its pending approval and the decision on it (POL-3), and does not run
// again once an outcome is recorded; a call with other arguments has another key and
// can never consume this one's approval. A client that wants two distinct identical
// calls sends call ids. A client that retries on a new connection (a new MCP session)
// sends io.toolgen/session_id or io.toolgen/run_id (the derived call id does not
// depend on the connection, nor on the process, when every server on the store has
// the store's secret), or the retry is a new call.
//
// # Revision 2026-07-28 (MCP-10)
//
// The stateless revision is served beside the session-based ones (2025-11-25,
// 2025-06-18 and older), on the same URL and on stdio, negotiated as each revision
// says: per request from 2026-07-28 on (the version and the client's capabilities in
// each request's _meta, no initialize), per session (HTTP) or connection (stdio) by
// initialize before it. What the protocol no longer carries, toolgen carries as
// explicit handles in _meta, the same keys at every revision:
//
//   - The toolgen session, io.toolgen/session_id: its pinned catalog (MCP-7) and its
//     mode (WF-4) are keyed by (tenant, session) in the store (SES-1). A 2026-07-28
//     request over HTTP that names none gets a new session, minted by the server,
//     bound to the caller's tenant and handed back in the result's _meta
//     io.toolgen/session_id (tools/list and tools/call results, and tasks). A client
//     that echoes it keeps its session: the same pins, the same mode, the same derived
//     call ids (so its retry is a retry, SES-2). A client that does not makes each
//     request a session of its own: the current catalog and the protocol's initial
//     mode every time, and a retry that is a new call (in a run that is new too, so
//     the pipeline reads none of its earlier calls: runtime.Call.NewRun). Minting
//     writes nothing (issue 20): the id, "s-" + 9 characters of the minting
//     millisecond (so ids sort by it), 17 random and 16 MAC base32 characters,
//     carries a MAC over the tenant and the catalog it pinned, and the session is
//     written, owner and pins in one write, when a request first echoes it
//     (minted.go). Another tenant's echo, a forged id, and an echo whose catalog no
//     process still knows (it changed before the first echo, and MCP-7 never re-pins
//     silently) are refused as another tenant's session is. On stdio the
//     connection's session (Options.SessionID, toolrun serve --session) stays the
//     default at every revision: one process, one client.
//   - The run, step and call ids (io.toolgen/run_id, step, call_id), as above.
//
// tools/list results carry the cache hints of SEP-2549, always cacheScope "private"
// (the list is the tenant's) and ttlMs 0 (stale at once). A list is a session's — its
// pinned catalog in its active mode — and the session is named by the handle in _meta,
// which no cache key holds: the go-sdk v1.8.0 client keys its list cache by the cursor
// alone. Any positive ttlMs would let one session's list stand for another's: another
// mode's tools, or another pin's definitions (a changed description: the rug pull
// MCP-7 guards against). The list is computed per request, keyed by the handle, never
// by a connection.
//
// Multi Round-Trip Requests: toolgen asks a client for no input, so every 2026-07-28
// result is resultType "complete" (added by this package to tools/call results, which
// the go-sdk marks only when its own tool handler made them); an upstream's input
// requests are declined (MCP-6, mcp/upstream). Removed methods (initialize, ping,
// logging/setLevel at 2026-07-28) are -32601, as the go-sdk answers them.
//
// # Tasks (MCP-11)
//
// The Tasks extension (io.modelcontextprotocol/tasks, SEP-2663) is advertised in
// server/discover. A client opts in per request, declaring the extension in the
// request's client capabilities. Its tools/call then runs in the background, detached
// from the request, and is answered with its result if it ends first, with a task
// (CreateTaskResult, resultType "task") as soon as its row is recorded held for
// approval, or with a task once it has run for Options.TaskAfter (2 s). A call with no
// row yet — an idempotent read, recorded only once it ran — is always answered with
// its result. Without the opt-in nothing changes: a held call waits, reporting
// progress, up to its bound.
//
// The task is the invocation row. Its id is "tgt-" + the row's id + "-" + the first 32
// hex digits of HMAC-SHA256 keyed with the deployment's secret (Options.CallIDSecret,
// read from the store) over the tenant, the id and the idempotency key ([TaskID]):
// unguessable, and recognised by every replica on the store without a table of its
// own. tasks/get reads the row, so it answers on any replica, after the client
// restarted and after the replica that created the task died; a task id that is
// unknown, forged, or another tenant's is -32602 (the same answer for the three). The
// row's status maps to the task's:
//
//	PENDING, needs_approval   working   statusMessage "waiting for approval"
//	PENDING (a retry)         working   "waiting to run again"
//	RUNNING                   working   "running" ("suspended: ..." for a suspended control call)
//	DENIED task_cancelled     cancelled
//	any other terminal row    completed result: the call's MCP result, isError for every
//	                                    non-success outcome (denied, failed,
//	                                    unavailable, uncertain), as tools/call answers it
//	(an outcome that cannot be read)  failed   error: -32603
//
// createdAt and lastUpdatedAt are the row's; ttlMs is null (rows are kept: a task never
// expires) and pollIntervalMs is Options.TaskPoll (1 s). A held call whose replica died
// runs once approved on whichever replica's maintenance claims it first (LIFE-1:
// approved holds are re-run by the recovery pass), and its task reports it.
//
// tasks/cancel answers the empty ack whatever the row's state (idempotent). A call that
// has not run — held for approval, or released for a retry — is settled in the store
// DENIED with reason task_cancelled ("the caller cancelled this call before it ran"),
// with a task_cancel audit entry in the same transaction, whichever replica holds it:
// nothing runs it afterwards (an approval is refused: the call is no longer held; the
// recovery pass claims only PENDING rows), and its hold, wherever it waits, ends at
// the replica's next look at the row (Options.TaskPoll). A retry of the same call with
// the same ids replays that outcome; a new call id makes a new call. A call already
// running is cancelled as a call whose client left when it runs on the replica that
// receives tasks/cancel, and is left to finish otherwise (cancellation is cooperative,
// SEP-2663); a terminal one is left as it is. tasks/update is an empty ack (no task asks
// for input). Without the extension declared in the request, tasks/get, tasks/update
// and tasks/cancel are -32021 with the extension as the required capability; over HTTP
// their Mcp-Name header must be the task id (-32020, HTTP 400 otherwise). There is no
// tasks/result, tasks/list or notifications/tasks: clients poll.
//
// # Trust (RT-6)
//
// An MCP client is not a verified source of provenance, so arguments carry
// argument_trust external_untrusted and the request's context counts as
// external_untrusted (origin_trust): unknown provenance is external_untrusted, and no
// _meta claim raises it. POL-1 then holds writes of risk medium or more and every
// high-risk call for approval unless an operator allow_when rule waives it.
//
// Results carry their labels: the result's _meta io.toolgen/trust, and each content
// item's _meta io.toolgen/trust. The pipeline has already wrapped external_untrusted
// text in a trust envelope a model can see (step 12); this package never wraps again.
//
// # Results (RT-7, RT-9, RT-11)
//
// A non-success outcome is a result with isError true, text content
// "reason_code (status, retryable|not retryable): message" (plus the enveloped
// external_detail as a second item), and structuredContent the six-field object
// {status, reason_code, message, retryable, call_id, external_detail}. A store failure
// (Execute returned an error) is logged and reported as failed/internal_error, with no
// internal text. A success carries the tool's content items as text and, as
// structuredContent, the tool's structured result when the pipeline kept it whole and it
// is a JSON object. An over-budget result (RT-9) has its structured value moved to an
// artifact by the pipeline — never a cut JSON pretending to be whole — and the artifact
// references are in _meta io.toolgen/artifacts. A tool whose output schema is an object
// advertises outputSchema as {"type":"object","anyOf":[its schema, the elided stand-in,
// the six-field outcome]}, and every result of it conforms: its value, or
// structuredContent {"io.toolgen/elided":{"artifacts":[...]}} when the value is not
// inline, or the outcome of an isError result (output.go); other output schemas stay in
// the tool's _meta io.toolgen/output_schema. A suspended control call (RT-11) is a
// success whose text says the run waits for input, with the resume token in _meta
// io.toolgen/suspended.
// Every result's _meta echoes the ids the call ran under (io.toolgen/session_id, run_id,
// step, call_id) and its io.toolgen/status; io.toolgen/replayed marks a recorded
// outcome returned by step 8.
//
// # Approval hold (POL-3)
//
// A call held for approval blocks in the pipeline for at most its bound. When the
// request carries a progressToken, the hold is reported as notifications/progress
// (progress = seconds waited, total = the bound in seconds, message "waiting for
// approval"), so a client sees the call is alive; past the bound it ends
// unavailable/approval_pending (retryable). The retry of the same call finds the
// approver's decision.
//
// # Relayed notifications (issue 15)
//
// While an upstream server's tool runs, its progress reaches the calling client under
// the client's own progressToken (only when it sent one; after a hold's progress, the
// values continue past it), and its log lines reach the calling client through
// ServerSession.Log, so the client's logging/setLevel applies (relay.go; which line
// belongs to which client is the adapter's rule, mcp/upstream/relay.go). Relayed
// notifications carry _meta io.toolgen/trust external_untrusted: their text is the
// upstream's, and none of it enters a result.
//
// # Transports
//
// [Server.HTTPHandler] serves Streamable HTTP at [Endpoint] ("/mcp") and nothing else,
// with two handlers chosen by the request's MCP-Protocol-Version: 2026-07-28 and later
// go to the go-sdk's stateless handler (the only one of go-sdk v1.8.0 that serves that
// revision: no Mcp-Session-Id, GET and DELETE 405, a disconnect cancels the request);
// every other request — initialize, which carries no version header, and the requests
// of the session-based revisions — to the session handler. A version this server does
// not speak is UnsupportedProtocolVersion (-32022, HTTP 400) with the versions it does.
// The SDK's DNS-rebinding protection is on for both: a request that reached a
// loopback address with a Host header that is not loopback is refused 403. A request
// body is bounded by Options.MaxMessageBytes.
//
// The session handler (sessions.go) keeps one MCP session per Mcp-Session-Id, with the
// go-sdk's StreamableServerTransport, and records each in the store (SES-1; Options.
// MCPSessions, the pipeline's store by default): its owner tenant, its verified user,
// its negotiated revision and the SDK's session state (initialize parameters: client
// capabilities and info; the log level logging/setLevel sets). Any process on the store
// serves any session: one that never saw a session id restores the session from its
// record (its pinned catalog and mode are in the store already), so a load balancer
// needs no stickiness. A session id unknown to the store (never opened, deleted, or
// unused for Options.HTTPSessionTimeout) is answered 404 and a JSON-RPC -32600 error
// (the transport's sign to initialize again); a session of another tenant or user 403
// and a JSON-RPC -32600 error that names nothing of it. A process closes a session
// idle for HTTPSessionTimeout (the record stays), marks it seen in the store at most
// every HTTPSessionTimeout/8 (30 s at most), and closes a session a DELETE ended
// through another process at that mark. Progress during a hold goes on the call's own
// response stream, so it reaches the client whichever replica serves the call. A
// notifications/cancelled that reaches a process that does not run the request is
// recorded in the store once the session handler accepted it (mcp_cancellations, kept
// an hour); a process with calls open reads the last minute's every Options.CancelPoll
// (1 s) and cancels its own as the SDK cancels a local one: the call's context ends (a
// held call stays PENDING) and its response is withheld. What stays per process: the
// SSE event store (a stream is resumed, Last-Event-ID, only on the process that wrote
// it).
//
// In front of both handlers a guard answers in JSON-RPC what the SDK answers in plain
// text or with code 0: an unknown method -32601 (HTTP 200, as on stdio), another
// refused request -32600 (HTTP 400), a request other than initialize without a session
// -32600 (HTTP 400). Response streams of the session-based revisions are resumable:
// every SSE event has an id, a response stream opens with a priming event that carries
// a retry field ([SSERetry]), and a client whose stream broke resumes it with
// Last-Event-ID. The events are kept in memory, bounded per session
// (Options.EventStoreSessionBytes, default 4 MiB) and in total (Options.EventStoreBytes,
// default 64 MiB), each event charged its size plus 64 bytes; past a bound the oldest
// streams go first, and a resumption that would need an evicted event fails (HTTP 400)
// rather than skip it; a session's events go with
// the session. Revision 2026-07-28 has no resumption (no event ids). JSON-RPC batches are answered 400 from 2025-06-18 on (the SDK's
// answer).
//
// A call answered within 50 ms is one write on the connection: the headers, the priming
// event, the response and the end of the body go together (the SDK flushes after
// each). A slower call's priming event is sent at 50 ms, or with the first
// notification, whichever comes first; a notification is sent at once.
//
// [Server.ServeStdio] serves one newline-delimited connection (a process's stdin and
// stdout). No line ends it (the SDK's own stdio transport ends the connection at the
// first line it cannot decode): a line that is not JSON is answered -32700, one that
// is not a JSON-RPC message or is longer than Options.MaxMessageBytes -32600, with
// the id when one can be read, else null. JSON-RPC batches are served when the
// connection negotiated a revision that has them (2025-03-26 or earlier), answered
// with one array; otherwise (2025-06-18 and later, 2026-07-28 which negotiates none on
// the connection, or before initialize) nothing in
// the batch runs and each request in it is answered -32600 with its id (a batch
// holding none, once, with a null id). A request reusing the id of a request in
// flight is answered -32600. When the input ends (the client closes it to end the
// session), ServeStdio ends as at a shutdown (below). [Server.Serve] serves any other
// mcp.Transport (in-memory, a custom pipe) as it is.
//
// On both transports: after notifications/cancelled for a request in flight, the
// request's context is cancelled and no response to it is sent (what the pipeline
// records stays: a call held for approval stays PENDING); a request before initialize
// and a second initialize are answered -32600 (the SDK answers them with code 0).
//
// # Shutdown
//
// A connection served by Serve or ServeStdio ends promptly when its ctx is done, and
// [Server.Shutdown] does the same for every connection and HTTP session: the calls in
// flight are cancelled — a call held for approval stays PENDING and answers
// unavailable/approval_pending, and the approval an approver gives later applies to
// the client's retry — and answered before the connection closes (within
// [ShutdownGrace]); later calls are not run (-32004); the HTTP standalone streams end
// once the calls are answered. A call cancelled while the pipeline was reading or
// writing the store answers failed/canceled (retryable): what was recorded stands.
// Nothing waits out an approval hold.
//
// # Imports
//
// server imports runtime, runtime/store (the roles' interfaces), internal/names, internal/relay and the
// go-sdk. It must never import a store driver (runtime/store/sqlite, runtime/store/postgres), codegen, cmd, or mcp/upstream:
// the host (cmd/toolrun) assembles the pipeline and hands it over.
package server
