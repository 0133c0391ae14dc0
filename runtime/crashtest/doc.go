// Package crashtest is the crash-injection harness of the runtime (RT-3, RT-4,
// ADR-0021 decision 4): its tests run tool calls through runtime.Pipeline in real
// subprocesses, kill them with a real SIGKILL at every step of the pipeline, run the
// recovery sweep in a fresh process and check, against an append-only receipt file
// kept outside the store, that no effect ran twice where its class forbids it, that
// UNCERTAIN is used exactly for watermarked calls that may not be retried, and that
// every call ends terminal or reviewable.
//
// Everything is in the tests:
//
//	go test -run TestCrashMatrix ./runtime/crashtest/                       # the matrix (skipped in -short)
//	CRASHTEST_CONCURRENCY=1 go test -run TestCrashConcurrency ./runtime/crashtest/
//	CRASHTEST_SOAK_KILLS=1000 go test -run TestCrashSoak -v ./runtime/crashtest/  # the kill soak (50 kills by default)
//
// The kill soak (soak_test.go) kills at random instants instead of named points,
// spread over every window of a call and the sweep, and checks each killed call.
//
// TOOLGEN_PG_DSN adds the PostgreSQL store; CRASHTEST_MATRIX_OUT=file also writes the
// matrix (a Markdown table) to file, CRASHTEST_SOAK_OUT=file the soak's table.
package crashtest
