//go:build race

package canonjson

// raceDetector: under -race, sync.Pool drops a quarter of what is put back, on
// purpose, so a pooled buffer is allocated again and allocation counts mean nothing.
const raceDetector = true
