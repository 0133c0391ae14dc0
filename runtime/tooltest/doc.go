// Package tooltest is the contract suite a tool author runs in their own tests (RT-14,
// ADR-0021 decision 4). The watermark rule — a non_idempotent or
// conditionally_idempotent tool calls MarkEffectSent immediately before the operation
// that can leave a mark, and never sends the effect when that call fails — is an
// obligation a type checker cannot enforce for hand-written runtime.Tool
// implementations (MCP, device and sandbox adapters) nor inside a generated wrapper's
// Prepare, which must leave no mark. This suite, and the production flag of RT-13,
// carry it instead.
//
// [Run] (or [Check] for one case) drives the tool through the real
// runtime.Pipeline over a temporary SQLite store, once per property, each time on a
// fresh workspace prepared by the case's Setup, and proves:
//
//   - nothing before the watermark: for a tool whose class needs one, the observed
//     state (the workspace, hashed recursively, plus every effect recorded through
//     [Effects]) is unchanged at the instant the watermark is written; a call that
//     changed the state without ever marking, or returned success without marking
//     (RT-13), fails the suite. A tool whose side_effect is none or read must not
//     change the state at all;
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
//		tooltest.Run(t, gen.NewBillingCharge[chargePlan](charger{client: client}),
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
// tooltest is imported only by tests (files ending in _test.go); a test of this
// package fails if any other file of the module imports it. Production code must never
// import it: it imports testing and a store driver (runtime/store/sqlite), and it builds
// pipelines that approve held calls on their own.
package tooltest
