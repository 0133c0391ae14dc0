// Package testscripts holds the end-to-end behaviour of the toolgen and toolrun
// commands as readable scripts, testdata/script/*.txtar, one scenario per file, run by
// github.com/rogpeppe/go-internal/testscript with the commands in-process (the way
// cmd/go and cue test their CLIs). README.md is the scripts' manual: how to run them,
// the environment they see, and every command and condition beyond testscript's own.
//
// TestConformance (conformance_test.go; make conformance) runs the official MCP
// conformance suite against real toolrun processes and the suite's reference server;
// conformance.md is its table of expected outcomes.
package testscripts
