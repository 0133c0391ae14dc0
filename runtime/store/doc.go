// Package store is the persistence port of the runtime pipeline (DESIGN.md section 6):
// one interface, [Store], implemented by one package per database (store/sqlite, the
// embedded default, and store/postgres for many workers), and one conformance suite,
// storetest, that every driver passes — the shape of River's riverdriver.
//
// Operations are named subject first, with their guard in the name
// (InvocationSettleIfLeased), and each is exactly one commit, so the pipeline's commit
// count per call is the number of write operations it calls. Every write after a
// claim carries a [Fence] (id, lease owner, attempt): a zombie worker whose lease was
// reclaimed affects nothing. A write whose acknowledgement was lost is retried with
// the same token and recognised as already applied ("did my own write land?").
//
// Times that decide leases come from the database clock, never the caller's.
//
// store must never import runtime, spec, codegen or mcp: it knows rows, not tools.
package store
