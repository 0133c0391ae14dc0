// Package faulttest is the store fault injection of the runtime (issue 7, point 2;
// RT-3, RT-4, ST-3): its tests run tool calls of every idempotency class through
// runtime.Pipeline over runtime/internal/faultstore, which makes the watermark, claim,
// record, settle, release, sweep and lease-renewal writes fail before their commit
// (Timeout), commit and then fail (ExecuteAndTimeout), or hang past their deadline with
// or without committing (Hang, HangAfterExecute). Each effect appends a receipt to a log
// kept outside the store, after checking in the store that the call's watermark is
// committed. After each call, a recovery pass once its lease has expired, and the
// caller's retries with the same key, the tests check that a non-idempotent effect ran
// at most once, that no effect ran before its watermark was committed, that every call
// ends SUCCEEDED or, only where a committed watermark may have been followed by the
// effect, UNCERTAIN, and that the pipeline recognises its own committed write when it
// retries it.
//
// Three tests, all in `go test ./runtime/faulttest/` (under 20 s):
//   - TestFaultMatrix: every fault type at every write point, one fault per case, on
//     every class and path (direct, retried after a retryable failure, abandoned before
//     or after the effect, stalled while renewals fail) that reaches the point.
//   - TestFaultBursts: three faults in a row at the watermark, settle and release,
//     exhausting the pipeline's own retries of that write.
//   - TestFaultRate: 200 calls per store (50 under -short) with a fault at 5 % of the
//     writes, the type drawn at random (seeded). The matrix and the bursts are one case
//     per combination and keep their size under -short.
//
// The soak runs the rate test longer:
//
//	FAULTTEST_CALLS=20000 go test -count=1 -run TestFaultRate -timeout 120m ./runtime/faulttest/
//
// TOOLGEN_PG_DSN adds the PostgreSQL store (a fresh schema per test); FAULTTEST_OUT=file
// also writes the tables as Markdown; FAULTTEST_RATE and FAULTTEST_SEED change the rate
// run. The package has no exported code and nothing may import it.
package faulttest
