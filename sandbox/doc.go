// Package sandbox is the script runner (SCR-1): sandbox.run_script runs a Starlark
// script whose tool calls go through the bridge (runtime.Bridge, RT-12) into the one
// pipeline, as the caller of the script.
//
// # The tool
//
// sandbox.run_script is specified in tools/sandbox.run_script.yaml and generated into
// gen/ like every builtin; it is the one builtin in a reserved domain
// (internal/names.AdapterBuiltins), so a host registers it with
// runtime.Registry.RegisterAdapter("sandbox", NewTool()). Only an adapter's tool of the
// sandbox domain finds the bridge in its context (runtime.BridgeFrom); every other tool
// still cannot reach the pipeline (RT-2). The script's own call is a write, idempotent:
// it has a row from step 7, so the sweep re-runs a script whose worker died, and
// running it again is safe because every call it makes is named by the script.
//
// # What a script sees
//
// Starlark (go.starlark.net) is deterministic and hermetic: no clock, no randomness,
// no load(), no I/O. A script sees `tools`, whose attributes name tools
// (tools.workspace.read_text(path="a.txt"); keyword arguments only), and `json`. The
// names resolve at call time against the caller's session catalog and mode, in the
// pipeline: an unknown tool, a tool outside the mode, a missing scope or a policy
// refusal is an outcome like any other. A call returns an outcome value with the six
// fields of RT-7 (status, reason_code, message, retryable, call_id, external_detail),
// plus ok, replayed and result (the structured result, as dicts and lists, when ok). A
// refusal or a failure is a value the script inspects, never an exception. The script
// returns the global `result` (as JSON) and what it print()ed. A script cannot run
// scripts (sandbox.* is not callable from a script).
//
// # Call ids and re-execution
//
// The n-th call of a script has call_id = hash(script) + ":" + n (RT-12), in the run
// and step of the script's call. Submitted again in the same run and step (under any
// call id of its own), the script makes the same calls in the same order, and each one
// that has a terminal record answers from it at step 8, replayed, without running:
// no effect twice. A changed script is a new script: a new hash, new calls.
//
// The script stops, rather than going on with an unknown, at a call that is:
//
//   - held for approval past the hold bound: the script is torn down, its call ends
//     unavailable/script_suspended (retryable) and its row is suspended under RT-11's
//     marker, with the resume token store.AwaitApprovalToken(held call's key, own key):
//     it waits for that approval. Nothing re-runs it while the call is undecided (an
//     approval that never comes leaves it suspended), and a retry of the script's call
//     answers script_suspended from the row. Once the call is approved or denied, by
//     whoever and in whichever process, the next recovery pass of any pipeline on the
//     store (Pipeline.Recover: Start's maintenance, toolrun recover) gives the row back
//     (store InvocationUnsuspendDecided) and re-executes the script from the start, as
//     it re-runs a swept call: claimed, so at most once at a time. The earlier calls
//     replay, the approved one runs (or, denied, is a value the script sees), the rest
//     run, and the script's outcome is recorded on its row, where a retry of its call
//     (or a Tasks poll) finds it. The same script submitted again under another call id
//     re-executes the same way;
//   - UNCERTAIN (a non_idempotent call whose watermark was set when its worker died):
//     failed/script_stopped, with that call and outcome in external_detail; a person
//     resolves it in the UNCERTAIN queue, and the script stops there on every
//     re-execution until then;
//   - still in progress under another worker's lease (call_in_progress), or whose
//     lease this worker lost (lease_lost):
//     unavailable/script_call_in_progress, retryable: the script's row is released,
//     and the next recovery pass (or the caller's retry) runs the script again, by
//     when the sweep has decided that call.
//
// A worker killed mid-script leaves the script's row RUNNING; the sweep reclaims it
// (it is idempotent) and re-runs the script from the start the same way. Replay safety
// assumes the script is deterministic, which Starlark is by construction; the
// watermark of each call bounds the rest (ADR-0021 decision 17).
//
// # Budgets
//
// Each budget ends the script with its reason code (runtime/reasons.yaml), and the
// calls already made stay recorded:
//
//   - max_calls (default 100, at most 1000): script_max_calls, at the first call
//     beyond it (which is not made);
//   - max_steps Starlark execution steps (default 10,000,000): script_max_steps;
//   - wall time, the tool's timeout (600 s, which covers the default approval hold of
//     300 s): script_timeout;
//   - max_output_bytes of result JSON plus printed text (default 65,536):
//     script_output_too_large;
//   - an error of the script itself (a syntax error, fail(), 1 // 0): script_error.
//
// Memory is not a budget: Starlark bounds a single allocation (1 GiB), steps and wall
// time bound the rest.
//
// # Trust
//
// A script's calls are at most as trusted as the call that carried the script (RT-6;
// runtime.Bridge.CallTrust never raises): origin_trust is the script call's, and so is
// argument_trust, lowered to external_untrusted by carried provenance (ADR-0021
// decision 11) when the call may depend on untrusted output. Starlark values carry no
// labels, so the dependencies are found statically (provenance.go), per call site:
//
//   - Before the script runs, a conservative, flow-insensitive dataflow analysis of its
//     syntax tree gives every tool-call site (tools.<domain>.<name>(...), numbered by
//     the position of its opening parenthesis) the set of tool-call sites whose results
//     its arguments, or the fact that it is reached at all, may depend on. The
//     granularity is the call site, not the argument: the pipeline takes one
//     argument_trust per call, which would be the minimum over its arguments anyway.
//   - At run time, each site remembers whether a result it produced so far was
//     external_untrusted (or an outcome had external_detail, which is always
//     untrusted). A call is made with external_untrusted arguments iff one of the sites
//     it may depend on has; otherwise with the script's own trust. So a write of
//     constants after an untrusted read is not held, and a write fed by that read is
//     held exactly as the same write made directly with untrusted arguments.
//
// The analysis follows data through assignments (also augmented, and tuple
// unpacking), for-loop and comprehension variables, subscripts, slices, attributes,
// operators, string methods and formatting, builtins, dict and list literals, json,
// and calls of the script's own functions (def, and a lambda assigned once to a name:
// every argument may bind every parameter; closures read globals by name; a
// function's result depends on its returns). A tool call's result depends on the call
// itself and on everything its arguments depend on (a tool may echo them). Aliasing is
// handled with classes of names that may share an object (union-find): assigning,
// iterating, passing or returning a value puts the names it mentions in one class
// with the target, and a method call other than the known non-mutating ones
// (x.append(v), x.update(d), x.setdefault(k, []).append(v), ...) and x[i] = v taint
// the receiver's whole class with the arguments (b = a; b.append(t) taints a). Names
// are not scoped: every binding of a name is one variable, which can only merge more.
// Implicit flows: everything under an if, a while or a for (its condition or
// iterable), a conditional expression, the right operand of and/or, and a
// comprehension's clauses depends on them, and so does every call of a function made
// there (its body runs under its callers' contexts); a break or continue makes the
// whole loop body depend on the conditions around it, a return the whole function
// body and its result, and fail() every call of the script. The analysis iterates to
// a fixpoint, so loops and cycles of assignments are covered.
//
// What it costs in precision: the analysis is context-insensitive, so a tool call
// inside a function is one site for all its callers (one tainted argument in one
// call taints the site); names that ever share a value share their dependencies; and
// a check such as `if not o.ok: fail(...)` after an untrusted read makes every later
// call depend on that read (whether they are made at all depends on its outcome),
// which is the rule of the whole script again for that script.
//
// Sources are exactly the tool-call sites, and a tool can only be called at one, so the
// analysis gives up whenever a tool or a function could be called from somewhere it
// does not see: tools, or a tool, used other than as the callee of a call; tools
// rebound; a def or lambda used as a value, bound twice, or a lambda not assigned to a
// name; a call of anything but a tool, a followed function, an unshadowed builtin or
// a method (a variable, an index, a call's result); a builtin used as a value;
// getattr; a builtin given a key function or **kwargs; load; a script that does not
// parse; and, as a bound on its own cost, more than 1024 tool-call sites, 256 rounds
// without a fixpoint or 20,000,000 steps. A tool call from a site it did not number
// (which cannot happen) gives up at run time. Given up, the script falls back to the
// rule of the whole script: once any untrusted output has reached it, every later
// call's arguments are external_untrusted (Result.ProvenanceFallback says why).
//
// Soundness: every way a value can reach a call's arguments in Starlark (no
// reflection, no implicit calls, no I/O, values made only by the constructs above) is
// an edge of the analysis, and an edge only ever adds dependencies, so a call whose
// arguments, or whose being reached, may depend on a site's result has that site in
// its set; the run-time check adds the order (a site's untrusted result reaches
// nothing made before it). The one channel it leaves is termination, as
// termination-insensitive information-flow analyses do: untrusted data can make the
// script stop early (a runtime error such as a missing key, a budget), so a later call
// is not made, but it cannot choose a call's arguments or make a call that would
// otherwise not be made. fail() under a condition is handled as an explicit exit.
//
// The script's own result is external_untrusted, always, as every sandbox output is
// forced to be at registration; the result's untrusted field says whether untrusted
// data actually reached the script.
package sandbox
