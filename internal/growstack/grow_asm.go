//go:build amd64 || arm64

package growstack

// Grow grows the calling goroutine's stack to at least 64 KiB (see the package doc).
func Grow()
