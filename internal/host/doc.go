// Package host assembles what a toolrun process runs: the store (embedded SQLite by
// default, PostgreSQL for a DSN), the registry with the builtin tools, the operator
// policy and the pipeline, from one spec root (tools/, servers/, protocols/,
// policy.yaml). cmd/toolrun's subcommands and the testscripts share it, so every entry
// point runs calls through the same pipeline configured the same way.
//
// host is the composition root: it may import every package of the module except cmd
// and the CLI packages; nothing but those may import it.
package host
