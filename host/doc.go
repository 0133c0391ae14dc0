// Package host serves a tool author's own tools to agents with everything toolrun has
// (HOST-1): the one persisted pipeline on an embedded SQLite store or PostgreSQL, the
// registry served over MCP on stdio and Streamable HTTP, principals and OAuth resource
// metadata, the event stream, Prometheus metrics, devices, the upstream MCP servers of
// servers/*.yaml, protocols of modes, the operator policy, and the operator service
// (approvals, UNCERTAIN reviews, the audit log, forced catalog epochs) that holds the
// rules of those reviews once (HOST-2). toolrun is this package with the builtins.
//
// An author's serving main, in another module, is a few lines:
//
//	h, err := host.New(ctx, host.Config{
//		Dir:      ".",                                  // tools/, protocols/, policy.yaml, ...
//		Tools:    []runtime.Tool{gen.NewAcmeLookup(lookup{}), gen.NewAcmeCharge[chargePlan](charger{})},
//		Builtins: []string{"protocol.dispatch"},         // builtins the protocols name
//	})
//	if err != nil { ... }
//	defer h.Close()
//	err = h.ListenAndServe(ctx, "127.0.0.1:8080")          // or h.ServeStdio(ctx, os.Stdin, os.Stdout)
//
// # Specs and implementations agree (HOST-3)
//
// New refuses to start, naming the YAML file, when a spec under tools/ has no
// registered implementation, when an implementation has no spec, or when the generated
// definition hash of an implementation differs from its spec (gen/ is stale: run go
// generate). The builtin specs are embedded in toolgen, so protocols and policies may
// name builtins (protocol.dispatch, review.approve, ...) without copying their YAML;
// a builtin is served only when Config.Builtins names it.
//
// # A host maintains itself (LIFE-1)
//
// Every call's lease is renewed for as long as its tool runs. A long-lived host —
// ServeStdio, Serve and ListenAndServe start it; an embedder mounting Handler on its
// own server calls Start — runs a jittered periodic recovery pass: the expired leases
// of its own tools are decided from recorded facts (retry, or UNCERTAIN for a person),
// retryable calls re-run, and the agent's retry then gets the recovered outcome. A
// crashed worker's call is recovered by any live worker with the same tool within
// Lease + SweepInterval × 1.25 (45 s by default). A worker never claims a row of a tool
// it has not registered at the same definition: rows of other hosts' tools on a shared
// store are left to them, and counted in the recovery report.
//
// host is the composition root of the run-time packages: it imports spec (to load the
// spec root and hand the run-time model to the rest), runtime, the store drivers, mcp,
// protocol and the builtin tools. It must never be imported by them.
package host
