// Package runtime is the one persisted pipeline every tool call goes through — builtin,
// MCP, device and orchestration-script calls alike — and the port every tool
// implements (DESIGN.md section 5).
//
//   - The port: [Tool], [ToolSpec], [ToolResult], [Item], [ToolFailure] and
//     [ExecContext] (RT-1, RT-2). Generated wrappers in gen/ compile against these.
//   - The pipeline: [Pipeline.Execute] is the only call site of Tool.Execute, with the
//     fourteen steps of RT-3 as separate methods (stepResolve ... stepEmit), recovery
//     ([Pipeline.Recover]) that decides from recorded facts (RT-4), batches (RT-10),
//     suspension and resume of control tools (RT-11) and the orchestration [Bridge]
//     (RT-12).
//   - What the steps use: the [Registry] with per-session pinned catalogs, the
//     idempotency key and canonical JSON (RT-5), trust labels (RT-6), [Outcome] and the
//     reason table generated from reasons.yaml (RT-7), the breaker (RT-8), excerpts and
//     the content-addressed artifact writer (RT-9), the operator [Policy] (POL-1) and
//     OpenTelemetry [Metrics] (RT-13).
//
// The words of a classification (side effect, idempotency, risk, trust) and of a
// decision are package vocab's; SideEffect, Idempotency, Risk and Trust here are its
// types under the names tools and generated wrappers use.
//
// runtime must never import spec, codegen, mcp or a store driver: the pipeline talks to
// persistence only through runtime/store's interface, and a tool never reaches the
// pipeline (RT-2).
package runtime
