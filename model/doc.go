// Package model is the run-time model of a spec root: the operator's server
// classifications, devices, protocols, principals, egress allowlist and notification
// receivers, as the packages that serve and execute calls read them (DESIGN §2).
//
// The build-time package spec parses and checks the YAML and produces this model
// ([spec.Tree.Model] and the Model method of each file's type); the run-time packages
// (mcp/*, protocol, internal/identity, host/console) take it and never import spec. A
// value of this package carries what the run time acts on, without source positions:
// those, and every check, stay at build time. A model value is assumed checked: it is
// made from a spec root toolgen check accepts, or written by a test.
//
// model imports only the standard library and vocab (the words of a classification). It
// must never import spec, runtime, a store or anything that serves: it is the leaf both
// sides agree on.
package model
