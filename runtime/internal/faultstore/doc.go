// Package faultstore is a [store.Store] wrapper for tests that makes chosen writes fail
// the way real databases fail (issue 7, point 2): before their commit, after it, or by
// hanging past the caller's deadline. It is the persistence fault injection of Temporal's
// persistence tests (Timeout, ExecuteAndTimeout), applied to the runtime's write points
// so the tests of runtime/faulttest can check that the pipeline never sends an effect
// whose watermark it has not seen committed and recognises its own committed write when
// it retries (durable-execution.md §5 and §8, lesson 3).
//
// A [Rule] names a write point ([Point]: one write method of the Store interface, the
// insert split by the status it records) and a fault type ([Kind]):
//
//   - [Timeout]: the write fails before its commit. Nothing is written; the caller gets
//     an error that looks like a deadline (errors.Is(err, context.DeadlineExceeded)).
//   - [ExecuteAndTimeout]: the write is committed, then the caller gets the same error:
//     the acknowledgement was lost. Only a retry that the store recognises as the same
//     write (a watermark with the same token, a settle by the same fence) tells the
//     caller what happened.
//   - [Hang]: the call blocks until its context is done and returns an error wrapping
//     ctx.Err(); nothing is written (the statement waited on a lock or a dead connection
//     and was rolled back when the client gave up).
//   - [HangAfterExecute]: the write is committed, then the call blocks until its context
//     is done and returns an error wrapping ctx.Err() (the acknowledgement never came).
//
// A context without a deadline never ends a hang by itself; such a hang lasts
// [Options.MaxHang] instead (the driver's own statement or network timeout) and then
// returns an error wrapping context.DeadlineExceeded. Without that bound a caller that
// set no deadline would block forever, which is what a truly hung connection does.
//
// A rule fires on exactly the Nth call at its point, or on each call with a probability
// (a seeded, deterministic generator). Every injected fault is counted by point and
// type; the error is an [*Error], so a test can tell an injected failure from a real one.
// Reads are never faulted.
//
// faultstore is for tests only: production code must never import it (a test of this
// package walks the module to check).
package faultstore
