//go:build !amd64 && !arm64

package growstack

// Grow does nothing here: this architecture has no assembly for it (see the package
// doc).
func Grow() {}
