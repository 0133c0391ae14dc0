// Package upstream is the MCP client adapter (DESIGN.md section 7, MCP-1..8): it connects
// to one operator- or tenant-classified MCP server with the official go-sdk and turns its
// tools into registry tools named mcp.{server_id}.{normalized_name} that run through the
// one pipeline (runtime.Pipeline.Execute) like any builtin.
//
//   - [Connect] connects (stdio for operator servers, Streamable HTTP for all; tenant
//     servers only through the [Egress] guard, MCP-4), lists tools, resources and prompts
//     (every page), and registers the tools with runtime.Registry.RegisterAdapter:
//     classification from the server file only, never from the server's annotations
//     (MCP-2); output external_untrusted (MCP-3); names by [NormalizeName], remote names
//     normalizing alike all dropped and recorded (MCP-1); input schemas sanitized, and a
//     tool whose schema cannot be used is dropped and recorded, never the whole server.
//   - Resources become one synthetic read tool per server (mcp.{id}.read_resource), and
//     prompts become external_untrusted [Skill]s, never placed in a cacheable prefix
//     (MCP-5).
//   - The client advertises no capability and refuses every server-to-client request but
//     ping (roots, sampling, elicitation) on both protocol revisions it speaks; under
//     2026-07-28 an inputRequests result ends the call failed with the
//     input_request_declined code (MCP-6). Refusals are logged and audited.
//   - Each tool's definition hash is its SchemaSHA256, the value sessions pin.
//     tools/list_changed is applied by [Upstream.Refresh] off the notification
//     goroutine: added tools are registered, changed ones replaced, removed ones
//     withdrawn, and every difference is appended to mcp_catalog_history (MCP-7). A forced
//     epoch is the operator's command, never this package's.
//   - A tool's Execute marks the watermark immediately before tools/call for the classes
//     that need one and maps the result; remote error text only ever reaches a failure's
//     message, which the pipeline puts in external_detail (MCP-8, MCP-3).
//
// # Decisions
//
// Protocol revision. The default is 2025-11-25 with initialize only (no server/discover
// probe): what third-party servers speak, and immune to go-sdk #1177 (a stdio server
// that exits on the probe). Options.ProtocolVersion = [ProtocolStateless] opts into
// 2026-07-28. Both revisions get the same hardening: empty ClientCapabilities (the SDK
// default advertises roots), no sampling or elicitation handler, automatic multi
// round-trip disabled (it would answer roots/list itself, bypassing middleware), a
// receiving middleware that refuses every request but ping with -32021 (missing client
// capabilities; -32601 is rewritten by a Go server's legacy bridge into a misleading
// "method not found: tools/call"), and any result that needs input (NeedsInput or
// inputRequests present, whatever the revision) declined.
//
// Transports. Stdio uses this package's own process transport over mcp.IOTransport
// rather than mcp.CommandTransport, which caps an inbound message at 16 MiB with no
// option; the bound is Options.MaxMessageBytes (64 MiB by default) on stdio lines, SSE
// events and JSON bodies (the go-sdk reads those whole, unbounded). Shutdown is the
// CommandTransport sequence (close stdin, SIGTERM, SIGKILL). A stdio server does not
// inherit the worker's environment: only PATH, HOME, TMPDIR, LANG, LC_ALL, USER (and the
// Windows temp variables) plus the file's transport.stdio.env, so it cannot read the
// worker's secrets. A tenant server must be https, named on the allowlist, and may not
// bring its own HTTP client or transport.
//
// Definition hash (MCP-7). SHA-256 over runtime.CanonicalJSON of {name, description,
// input_schema, output_schema, annotations} exactly as the server sent them (before
// sanitizing; title and icons are not part of it). It is the ToolSpec.SchemaSHA256.
//
// Catalog history. Changes are differences from the last recorded catalog, which
// Connect replays from mcp_catalog_history: a restart records nothing for unchanged
// tools and records drift that happened while the adapter was away. Kinds: added,
// changed (detail: previous_sha256, changed_fields), removed, dropped_collision,
// dropped_invalid (a refused definition, with the reason), and list_changed (one row per
// notification-driven refresh, Tool "", with the differences and the catalog hash; a
// refresh that changed nothing is recorded at most once a minute). Notifications are
// throttled: the first of a burst opens a window (Options.RefreshDebounce), the rest fold
// into one refresh, so a stream of them cannot starve or flood anything.
//
// Schemas. A missing input schema or top-level type becomes "object"; any other
// top-level type, a $schema other than draft-07 or 2020-12, a schema that does not
// resolve with jsonschema-go (remote $ref, non-RE2 pattern), or one above
// [MaxSchemaBytes] drops the tool (dropped_invalid). An unusable output schema is
// ignored instead (recorded in the added row): the tool works, its structured content is
// returned as text.
//
// Results. Text is kept as it is; images, audio and blob resources are stored whole with
// the artifact writer and replaced by a one-line placeholder naming the artifact;
// resource links become placeholders. structuredContent becomes Structured only when the
// tool declares an output schema (the pipeline validates it: a server breaking its own
// schema gets invalid_result), passed through unchanged, so the gateway can advertise
// the server's schema (mcp/server output.go); otherwise it is returned as JSON text.
// isError becomes a
// failure (mcp_tool_error); a JSON-RPC error from the server becomes a failure
// (mcp_protocol_error); the go-sdk's own "closing"/"rejected" codes and any other error
// (connection lost, undecodable or oversized answer, deadline) are errors, so a call
// whose watermark is set and whose class is not safe to repeat ends UNCERTAIN; where
// repeating is safe, a connection that failed under the call gives
// unavailable/upstream_disconnected (retryable).
//
// Lost connections. Calls made after the connection is known lost fail before the
// watermark, unavailable/upstream_offline (retryable), while the tools stay
// advertised ([Upstream.Err]). The adapter reconnects by itself — the stdio command
// started again, a new HTTP session — in one loop per server with a doubling, capped,
// jittered wait, and then applies the catalog as for a list_changed; the reconnection
// is logged, recorded in mcp_catalog_history (list_changed, trigger "reconnect") and
// in the event stream (upstream_disconnected, upstream_reconnected). Close stops it.
// A connection handed in (Options.Transport: a device) is reconnected by its owner
// with [Upstream.Reconnect]. See reconnect.go.
//
// Notifications. A call's upstream progress is relayed to the client that made it,
// under that client's own token, and the server's log lines to the one client whose
// calls are in flight when a line arrives (never to another client): relay.go. The
// relayed text is the upstream's, untrusted, and never enters a result or an outcome.
//
// Classification. conditionally_idempotent has no idempotent_when in a server file, so
// recovery treats it as non_idempotent. The synthetic read tool is read and idempotent
// with the file's risk and scopes. Close withdraws every tool of the server (pinned
// sessions get tool_withdrawn) without recording history: the catalog did not change.
//
// upstream imports runtime, runtime/store (the interface only), model (the server
// classification it is given), internal/names and internal/relay. It must never import
// spec, a store driver, codegen, cmd or the MCP server package: the host loads the specs
// and wires the store and the serving side.
package upstream
