package server

import (
	"testing"
	"time"
)

// SetPrimeDelay sets how long the priming event of a response stream waits for the
// response, in the handlers made until the test ends.
func SetPrimeDelay(t testing.TB, d time.Duration) {
	old := primeDelay
	primeDelay = d
	t.Cleanup(func() { primeDelay = old })
}
