// Package growstack grows the calling goroutine's stack to 64 KiB in one step, before
// the goroutine goes deep.
//
// Why: a call's goroutine is usually new (the MCP SDK starts one per request) and so
// starts with a small stack, and the store's statements run deep (the embedded
// SQLite is C translated to Go, with large frames). Each time the stack is too small
// the runtime copies it to one twice the size and rewrites every frame's pointers,
// and deep in a statement that is many frames: in a CPU profile of toolrun serving
// read calls it was 7-9 % of the process (BENCHMARKS.md, issue 20). Growing once at
// the top, where the stack holds a few frames, replaces those copies with one cheap
// one; a goroutine whose stack is already large pays a compare and a call. Memory: a
// call in flight holds a 64 KiB stack, which a SQLite call reaches anyway; while it
// waits (an upstream, an approval) the garbage collector shrinks the stack as it
// shrinks any that uses less than a quarter of itself.
//
// Grow is an assembly function with a 32 KiB frame and no body: its prologue makes
// the runtime grow the stack (to 64 KiB, the next size that holds the frame and what
// is below it), and the frame is never written, so nothing is zeroed. CockroachDB's
// storage layer does the same. On architectures without the assembly (anything but
// amd64 and arm64), Grow does nothing and the stack grows as it would have.
//
// growstack imports nothing; the pipeline and the MCP server call it where a call
// enters them.
package growstack
