// Package events is the classification-only event stream (EV-1, ADR-0021): the
// Server-Sent Events handler behind `GET /events` of `toolrun serve --http`, and
// [Follow], the client `toolrun events` uses.
//
// An event carries the classification of a milestone, the invocation row carries its
// payload. The stream holds ids (event, invocation, tenant, session, run, call, step),
// the tool, the kind, status, reason_code, mode, decision, idempotency, the trust labels,
// the attempt and timings; never arguments, results, remote text, error text or artifact
// contents. It cannot leak them: the store's events have no field to hold them
// (store.Event), and this package only copies fields.
//
// The stream is backed by the store, not by memory: the store writes each milestone's
// event in the transaction of the milestone, and the handler pages store.EventList by
// cursor, so a reader that reconnects with the last id it received (the Last-Event-ID
// header, or the last_event_id query parameter for clients that cannot set headers)
// receives exactly the events it missed, whichever process wrote them. An event's id is
// its store cursor: "ID" on SQLite, "TX-ID" on PostgreSQL (store.EventCursor); "0" or no
// id is the start of the stream; anything else is a 400.
//
// A stream that has caught up waits: for its tenant's events to be written, when the
// store wakes it (store.Waker: on PostgreSQL a notification from the writing
// transaction, whichever process wrote; on SQLite this process's own writes), and
// otherwise reads the store every Options.Poll (200 ms) on a store that carries no
// other processes' wake-ups, or at the store's fallback interval (5 s on PostgreSQL
// while its listener listens). Idle streams therefore cost no query between events
// beyond that interval, whatever their number (BENCHMARKS.md).
//
// Filters are query parameters: session, run and tenant. Tenant is a filter the caller
// chooses, not an isolation boundary: until requests are authenticated (issue 8, ID-1
// and ID-2), anyone who can reach the endpoint can read every tenant's classifications.
//
// events imports runtime/store and the standard library only; it must never import
// runtime, mcp, spec or host — it relays rows, it does not run calls.
package events
