// Package testscripts holds the end-to-end behaviour of the toolgen and toolrun
// commands as readable .txtar scripts, one scenario per file, run by
// github.com/rogpeppe/go-internal/testscript with the commands in-process (the way
// cmd/go and cue test their CLIs).
//
//	go test ./testscripts/                      # run every script
//	go test ./testscripts/ -run TestScripts/gen_golden
//	go test ./testscripts/ -update              # rewrite golden sections after a deliberate change
//
// Besides testscript's own commands, scripts may use "exitcode N program [args...]",
// which runs program like exec and requires exit status N (toolgen exits 1 on
// findings and 2 on usage or I/O errors; "! exec" cannot tell them apart), and
// host/hosttest's "mcp" (a go-sdk MCP client: list, call), "freeport NAME" and
// "pgschema NAME" (a fresh PostgreSQL schema, with [pg]), which the sec14_ attack
// scripts use to drive several toolrun processes with the tokens of two tenants.
//
// A script's directory ($WORK) is the spec root of its toolgen and toolrun commands.
// Their workspace is $WS (TOOLRUN_WORKSPACE), a directory beside it, since a workspace
// must stay out of the spec root (SEC-1): the archive's ws/ files are moved there
// before the script runs, so "-- ws/notes.txt --" is the workspace's notes.txt.
//
// Scripts that build Go code (the external-module scripts) use the machine's go
// command and module cache offline; they are skipped with -short.
//
// TestConformance (conformance_test.go; make conformance) runs the official MCP
// conformance suite against real toolrun processes and the suite's reference server;
// conformance.md is its table of expected outcomes.
package testscripts
