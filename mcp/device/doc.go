// Package device is the device channel (DESIGN.md 7b, DEV-1..3; ADR-0021 decision 3): a
// machine of a user's — a laptop, a phone, a lab instrument behind NAT — serves MCP tools
// to the platform by dialling the gateway, never the other way round.
//
// It is MCP in reverse. The device opens one HTTP/1.1 request to the gateway's
// [ConnectPath], authenticates, and the connection is upgraded to a raw byte stream;
// over that stream the gateway is the MCP client and the device the server, speaking
// newline-delimited JSON-RPC exactly as over stdio. The gateway runs the one MCP client
// adapter, mcp/upstream, over it (an mcp.IOTransport on the upgraded connection), so
// naming, classification from the operator's file only, forced external_untrusted
// output, pinning and drift records, the watermark before tools/call and the refusal of
// sampling, roots and elicitation are the same code as for upstream servers (MCP-1..8).
//
// The handshake (the device side is [Dial]; `toolrun device` bridges it to a local MCP
// server on stdio):
//
//	GET /devices/connect HTTP/1.1
//	Authorization: Bearer TOKEN
//	Toolgen-Device-Id: ID
//	Connection: Upgrade
//	Upgrade: toolgen-mcp/1
//
//	HTTP/1.1 101 Switching Protocols        then MCP, the gateway speaking first (initialize)
//
// Refusals answer before any upgrade: 401 for an unknown id, a wrong token or a token of
// another device (one answer for all three, so the endpoint cannot be used to learn
// which ids exist; the audit entry names the real reason), 409 while the same id is
// connected, 400/426 for a malformed request. Every refusal writes a device_refused
// audit entry and registers nothing. Tokens are compared as SHA-256 digests in constant
// time and are never logged, audited or kept.
//
// Decisions:
//   - A second connection for an id that is online is refused (409), not swapped in: the
//     connection that owns the tools keeps them, and an attacker holding a stolen token
//     cannot cut off the real device's calls in flight. A device whose old connection is
//     half-dead retries; the gateway sees the old one end (TCP keepalive, or the device's
//     process dying closes it) and then accepts.
//   - A device that lists a tool named into another namespace — a remote name that is
//     already a qualified registry or wire name outside device.{id} (it starts with a
//     reserved domain — mcp, device, sandbox — or a builtin's domain, followed by "." or
//     "__") — is refused whole: it is misbehaving or compromised, and serving its other
//     tools would trust it with them. Normalization alone would keep the name inside
//     device.{id}.; the refusal makes the attempt visible (audit reason
//     tool_outside_namespace).
//   - A device belongs to the tenant its file names (required): its tools are registered
//     for that tenant only (runtime.ToolSpec.Tenant), so another tenant's tools/list
//     leaves them out and its calls are unknown_tool, as for a tool that does not exist;
//     its connections' audit entries and events carry that tenant. Refusals of an id no
//     file names are the operator's (Options.Tenant).
//   - allow_tools filters what the device lists; tools not on it are ignored (logged).
//   - A device that disconnects keeps its tools registered and advertised: calls fail
//     unavailable/device_offline before anything is sent, and a call in flight when the
//     connection broke ends device_disconnected — or UNCERTAIN when its watermark is set
//     and its class is not safe to repeat (DEV-3; the pipeline decides). When the device
//     dials again, the same adapter reconnects: unchanged tools keep working for
//     sessions that pinned them, changes are recorded as drift.
//
// Audit kinds: device_connected, device_disconnected, device_refused (detail: reason,
// remote address, the claimed id bounded to 64 bytes). The event stream gets
// device_connected and device_disconnected events (the device id, nothing it said).
//
// device imports mcp/upstream, runtime, runtime/store (the interface) and model (the
// device files, which spec produces). It must never import spec, a store driver, the MCP
// server package, cmd or codegen.
package device
