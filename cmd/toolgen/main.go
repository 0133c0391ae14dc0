// Command toolgen checks tool, server, protocol and policy specs and generates typed Go
// wrappers for tools. Run it from go generate:
//
//	//go:generate go run github.com/toolgen/toolgen/cmd/toolgen generate -o ../gen ..
//
// or as a tool dependency (go get -tool github.com/toolgen/toolgen/cmd/toolgen, then
// go tool toolgen ...). See toolgen help for the commands.
package main

import (
	"os"

	"github.com/toolgen/toolgen/internal/toolgencli"
)

func main() { os.Exit(toolgencli.Run(os.Args[1:], os.Stdout, os.Stderr)) }
