// Package lru is a count-bounded least-recently-used cache, safe for concurrent use.
//
// It exists for the per-session state a host keeps in memory (SEC-2): pinned
// catalogs, session owners, wire forms of definitions, retired definitions. All but
// the last are caches of a truth that lives elsewhere (the store, the registry), so
// dropping an entry only costs a lookup; the bound is a number of entries, never bytes
// or time, so that a caller who creates sessions at will grows nothing past it.
//
// lru imports only the standard library.
package lru
