// Package storetest is the conformance suite every [store.Store] driver passes
// (ST-2), after River's riverdrivertest: [Run] runs one subtest per behaviour —
// inserts and dedupe, claims, the fenced writes and their lost-ack retries, every
// branch of the sweep's decision, zombie fencing across reclaims, leases expiring by
// the store's clock (a [store.Clock] the suite advances: no test sleeps for a lease),
// suspension, MCP sessions going idle and tasks cancelled while held, waiting for a
// retry or racing a claim, the review queue, approvals, audit and catalog
// history, the event of every milestone (and none of its payload) with cursor paging
// that misses nothing, concurrent claimers and sweepers on separate handles, recovery
// confined to a worker's tools (LIFE-1: the rows of others neither touched, locked nor
// counted against a limit, only counted as left), and a decision's audit entry
// committed with it or not at all (HOST-2).
//
// It also exports [CountingStore], a wrapper that counts commits (calls of the
// writing methods) for the pipeline's commit-count tests.
//
// storetest imports only runtime/store and the standard library; drivers import it
// from their tests only.
package storetest
