package tools

// Regenerate gen/ from every spec under the repository root (tools/, servers/,
// protocols/, policy.yaml): the checks run first, and nothing is written if one fails.
//go:generate go run github.com/toolgen/toolgen/cmd/toolgen generate -o ../gen ..
