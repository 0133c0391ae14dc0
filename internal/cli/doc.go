// Package cli is what the two command lines, toolgen (internal/toolgencli) and a host's
// (host/hostcli, toolrun's), share: the one exit-code vocabulary and the one parser of
// flags interleaved with positional arguments. Each command of either program declares
// its flags in a struct next to the command and parses them with [Parse].
//
// It must import nothing of the project, only the standard library: both command lines
// import it, and neither may pull the other's dependencies in through it.
package cli
