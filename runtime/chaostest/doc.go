// Package chaostest is the PostgreSQL chaos test of the runtime (issue 7, point 3;
// RT-3, RT-4, ST-3): four worker processes run calls through runtime.Pipeline on a
// throwaway PostgreSQL cluster of the test's own while the test stops the server
// (immediate or fast shutdown) for 0-2 s every 5-20 s and starts it again, as DBOS's
// chaos monkey does. Workers keep their leases alive (the pipeline renews them while calls run), run Recover now
// and then, and retry a call with the same key when the store failed or the outcome
// is retryable, as a real caller would. At the end a drain recovers what is left and
// the checker compares every row with an append-only receipt file kept outside the
// store: no call lost, no effect of a non-idempotent call run twice, UNCERTAIN only
// where the watermark was committed, every effect after its committed watermark. The
// time each restart took to recover (from the start command to the first call the
// workers complete) is recorded.
//
// The cluster is made by initdb in a temporary directory, listens on its own free
// port on 127.0.0.1 and a socket in that directory, and is removed at the end; the
// machine's shared server is never used. When the test runs as root, initdb and
// postgres run as the postgres user. Without PostgreSQL's server binaries the test
// skips and says so.
//
// Everything is in the tests:
//
//	go test -run TestPostgresChaos -v ./runtime/chaostest/                          # short: one restart, 300 calls
//	CHAOSTEST_CALLS=5000 go test -run TestPostgresChaos -timeout 60m -v ./runtime/chaostest/  # make chaos
//
// CHAOSTEST_OUT=file writes the result tables there as Markdown. The other settings
// are listed on TestPostgresChaos.
//
// TestAbandonedCallIsReclaimed is the deterministic reproduction of what the chaos
// found: a call whose settle failed while the server was down stayed RUNNING, its
// lease renewed by its worker, for as long as the worker lived. The pipeline now
// renews only the calls it executes, and the test holds it there.
//
// This package has no non-test code and is imported by nothing.
package chaostest
