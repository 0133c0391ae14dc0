// Package toolruncli is the toolrun command: the host that serves the registry over MCP
// and the operator's tools around the pipeline — one call, the recovery sweep, the
// UNCERTAIN review queue, approvals, the audit log and the catalog. cmd/toolrun is a
// thin main around [Run]; the testscripts run the same [Run] in-process.
//
// toolruncli must never be imported by a library package: it is a leaf, like cmd.
package toolruncli
