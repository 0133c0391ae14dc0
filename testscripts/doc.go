// Package testscripts holds the end-to-end behaviour of the toolgen and toolrun
// commands as readable .txtar scripts, one scenario per file, run by
// github.com/rogpeppe/go-internal/testscript with the commands in-process (the way
// cmd/go and cue test their CLIs).
//
//	go test ./testscripts/                      # run every script
//	go test ./testscripts/ -run TestScripts/gen_golden
//	go test ./testscripts/ -update              # rewrite golden sections after a deliberate change
//
// Scripts that build Go code (the external-module scripts) use the machine's go
// command and module cache offline; they are skipped with -short.
package testscripts
