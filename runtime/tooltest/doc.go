// Package tooltest is what a tool author runs in their own tests (RT-14, ADR-0021
// decision 4): the contract suite ([Run], [Check]), which proves a tool keeps the
// watermark rule and replays, and the [Worker] it runs on, which makes one call of a
// tool through the real pipeline on a real store and hands back what happened.
//
// # The contract suite
//
// The watermark rule — a non_idempotent or conditionally_idempotent tool calls
// MarkEffectSent immediately before the operation that can leave a mark, and never
// sends the effect when that call fails — is an obligation a type checker cannot
// enforce for hand-written runtime.Tool implementations (MCP, device and sandbox
// adapters) nor inside a generated wrapper's Prepare, which must leave no mark. This
// suite, and the production flag of RT-13, carry it instead.
//
// [Run] (or [Check] for one case) drives the tool through a [Worker] over a new
// database of the [NewDatabase] it is given (tooltestsqlite.TempFile: a temporary SQLite
// file), once per property, each time on a fresh workspace prepared by the
// case's Setup, and proves:
//
//   - nothing before the watermark: for a tool whose class needs one, the observed
//     state (the workspace, hashed recursively, plus every effect recorded through
//     [Effects]) is unchanged at the instant the watermark is written; a call that
//     changed the state without ever marking, or returned success without marking
//     (RT-13), fails the suite. A tool whose side_effect is none or read must not
//     change the state at all. Looking is not changing: a read request (GET, HEAD,
//     OPTIONS, or what the author classifies as a read) through
//     [Effects.RoundTripper] is not an effect, so a Prepare may look up what it needs;
//   - replay at step 8: the same call made again (same run, step and call id, with
//     its argument keys reordered and its whitespace changed), through the same
//     pipeline and through a second pipeline over the same database, returns the
//     recorded outcome (Replayed) without executing the tool again and without
//     changing the state;
//   - a failed watermark sends no effect: with a store whose watermark write fails,
//     the state is unchanged and the outcome is unavailable/watermark_failed (or
//     unavailable/lease_lost when the fence was lost).
//
// Usage, in a tool's own _test.go:
//
//	func TestContract(t *testing.T) {
//		tooltest.Run(t, tooltestsqlite.TempFile, gen.NewBillingCharge[chargePlan](charger{client: client}),
//			tooltest.Case{
//				Name:  "charge",
//				Args:  `{"account": "a-1", "cents": 500}`,
//				Setup: func(t tooltest.TB, env *tooltest.Env) { client.Transport = env.Effects.RoundTripper(nil) },
//			},
//			tooltest.Case{Name: "unknown account", Args: `{"account": "nope", "cents": 1}`, WantFailure: "not_found"},
//		)
//	}
//
// The caller holds exactly the tool's required scopes and carries user-labelled
// arguments and context, so only a spec's approval_when, critical risk or an operator
// rule holds a call; a held call is approved by another principal so it can be checked
// too. A call the pipeline refuses without running the tool fails the case: nothing
// can be proven about a tool that did not run. [Check] runs one case against any [TB],
// which is how the suite's own tests prove that it reports violations.
//
// The suite observes only what it can see: the workspace and what the author routes
// through the doubles of [Effects] (a generic Record and an http.RoundTripper). A tool
// that reaches the world by another path must be wired through them, or observed by
// the case's own Observe function, for the suite to prove anything about it.
//
// # The Worker
//
// A [Worker] is River's rivertest.Worker for toolgen: the real machinery, one call at
// a time, in a test. [NewWorker] registers the tool (and any [WorkerOptions].Tools)
// in a real registry and builds a real runtime.Pipeline over a real store, the
// [WorkerOptions].Database it is given — a SQLite file in a temporary directory with the
// sibling package tooltestsqlite, a fresh PostgreSQL schema with tooltestpg.
// [Worker.Call] makes one call with the options of the call ([CallID], [InRun], [As],
// [ArgumentTrust], [ContextTrust], [LeaveHeld], [SameCallAs], [ToolNamed]) and returns a [Result]: the outcome, the invocation row
// read back from the store, whether the tool ran and whether the call was held. A
// held call is approved by another principal at its first look for a decision, or
// left held ([LeaveHeld]) and ended at once, as a hold past its bound ends, with its
// row PENDING: no test waits out a hold. [Worker.Reopen] is a second process over the
// same database, for replays and retries across workers.
//
//	w := tooltest.NewWorker(t, gen.NewBillingCharge[chargePlan](charger{client: client}),
//		tooltest.WorkerOptions{Database: tooltestsqlite.TempFile(t)})
//	first := w.Call(ctx, `{"account": "a-1", "cents": 500}`)
//	// first.Outcome.Status == runtime.OutcomeSucceeded, first.Row.EffectSentAt != nil
//	again := w.Reopen().Call(ctx, `{"cents": 500, "account": "a-1"}`, tooltest.SameCallAs(first))
//	// again.Outcome.Replayed, !again.Executed
//
// What a Worker does not do:
//
//   - judge. It checks no property of the tool: the watermark, the state and the
//     replay are the suite's ([Run], [Check]); a Worker's test asserts on the Result.
//   - inject faults. Its store neither fails nor loses leases, no process crashes and
//     no lease expires; recovery (the sweep, Pipeline.Recover) never runs. Those are
//     runtime/crashtest, runtime/faulttest and runtime/chaostest.
//   - move time. Nothing waits on a clock: a hold is decided at once, a lease is never
//     renewed (KeepLeases does not run) and never runs out within a test.
//   - configure the pipeline. No operator policy (policy.yaml), no protocol modes, no
//     MCP server, no metrics or tracing: the call meets the spec's own rules only.
//   - isolate calls. All calls of a Worker (and of its reopened peers) share the store
//     and, unless [InRun] says otherwise, one run: the breaker counts across them
//     (RT-8: the fifth identical call of a run is loop_detected).
//
// # Imports
//
// tooltest is imported only by tests (files ending in _test.go); the module's
// architecture test fails if any other file of the module imports it, tooltestsqlite
// or tooltestpg. Production code must never import it: it imports testing, and it
// builds pipelines that approve held calls on their own. It links no store driver: a
// test that imports tooltestsqlite gets SQLite, one that imports tooltestpg PostgreSQL.
package tooltest
