package runtime

import "github.com/toolgen/toolgen/runtime/store"

// The breaker (RT-8, ADR-0021 decision 14) is step 5 of the pipeline: one counter per
// (run, tool, canonical arguments) — the rows of the run whose ArgsHash equals the
// call's [ArgsHash] — serving three rules.
const (
	// BreakerDeniedLimit: the BreakerDeniedLimit-th identical call of a run is refused
	// (repeated_denial) once BreakerDeniedLimit-1 identical calls were denied.
	BreakerDeniedLimit = 3
	// BreakerCallLimit: the BreakerCallLimit-th identical call of a run is refused
	// (loop_detected).
	BreakerCallLimit = 5
)

// BreakerCheck decides step 5 from the counts of the identical calls already recorded
// in the run (store.PriorCalls.Breaker). It returns the reason code and
// true when the call must be refused (a denial, recorded like any other), "" and
// false when it may go on to policy.
//
// Which prior rows count: every invocation row of the same run with the same args
// hash, whatever its status, step or call id, including calls the breaker or policy
// denied — but the call's own row must not refuse the call. A call replayed with its
// own idempotency key (a client retry, an orchestration script re-executed, RT-12) is
// answered from its record. The store's counts include that row, so the pipeline must
// let an existing row win: [Pipeline] records a breaker refusal with an insert that
// yields to a row already holding the key, and then, when that row is terminal and
// the caller passes step 6 now, returns the row's recorded outcome; otherwise the
// caller gets its own refusal (a recorded outcome answers only a caller who passes the
// same checks now, issue 14).
//
//   - c.Total: the number of those rows.
//   - c.Denied: how many of them have status DENIED, for any reason (policy, a
//     rejected approval, the breaker itself).
//   - c.Uncertain: whether any of them is UNCERTAIN and waits for a person. A call a
//     person resolved moved on (SES-2: happened is a success, did not happen runs
//     again), and no longer holds its identical calls back.
//
// Checks, in this order (the first that holds decides):
//  1. c.Uncertain -> uncertain_repeat: a call identical to one that may already have
//     taken effect is never executed again in the run.
//  2. c.Denied >= BreakerDeniedLimit-1 (2) -> repeated_denial: this would be the third
//     identical call after two denials. It is checked before the loop rule because
//     it is the more specific cause: a call denied twice is refused as repeated
//     denial even when it is also the fifth identical call.
//  3. c.Total >= BreakerCallLimit-1 (4) -> loop_detected: this would be the fifth
//     identical call.
func BreakerCheck(c store.BreakerCounts) (reasonCode string, refused bool) {
	switch {
	case c.Uncertain:
		return "uncertain_repeat", true
	case c.Denied >= BreakerDeniedLimit-1:
		return "repeated_denial", true
	case c.Total >= BreakerCallLimit-1:
		return "loop_detected", true
	}
	return "", false
}
