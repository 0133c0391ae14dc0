//go:build !race

package canonjson

const raceDetector = false
