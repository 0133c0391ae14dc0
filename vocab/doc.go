// Package vocab is toolgen's typed vocabulary: the words a tool's classification, a
// policy decision and a reviewer's resolution are made of (side effect, idempotency,
// risk, trust, decision, resolution), with their stable strings — the ones the YAML,
// the catalog, the stores and the SQL use, which never change — a Parse for each, the
// order between values (Rank) and what a value allows (RetrySafe, NeedsWatermark).
//
// Every ordering puts an unknown value on the safe side: an unknown side effect,
// idempotency class or risk ranks as the most restrictive, an unknown trust label as
// the least trusted. A value read from anywhere is therefore never promoted by a typo.
//
// vocab imports only the standard library, and nothing of this module: it is the leaf
// every package of toolgen — build time and run time, the stores too — may share.
package vocab
