// Package tools holds the builtin tools: each tool's spec (tools/<name>.yaml) beside its
// Go implementation, written against the typed wrappers toolgen generates into gen/.
//
// An idempotent tool implements Run. A non_idempotent or conditionally_idempotent tool
// implements Prepare, which may look at the world but must not change it, and Commit,
// which only sends the effect; the generated wrapper calls tc.MarkEffectSent between the
// two (GEN-2), so the watermark cannot be forgotten. Failures the caller should see are
// *runtime.ToolFailure values with a stable code; any other error is an internal one.
//
// Every workspace path is resolved inside tc.Workspace() and every file operation goes
// through an os.Root opened there, so neither "..", an absolute path nor a symlink can
// reach outside the workspace. Git runs as a child process without a shell.
//
// tools imports runtime and gen only. It must never import spec, codegen, mcp, protocol
// or a store: a tool cannot reach the pipeline that runs it (RT-2).
package tools
