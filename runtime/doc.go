// Package runtime holds the port every tool implements and, in later work, the one
// persisted pipeline every call goes through (DESIGN.md section 5).
//
// This file set defines only the port types generated code compiles against:
// [Tool], [ToolSpec], [ToolResult], [Item], [ToolFailure] and [ExecContext] (RT-1, RT-2).
//
// runtime must never import spec, codegen, mcp or a store driver: the tool side of the
// port knows nothing about how it is checked, generated, served or persisted.
package runtime
