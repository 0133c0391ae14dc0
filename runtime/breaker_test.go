package runtime

import (
	"testing"

	"github.com/toolgen/toolgen/runtime/store"
)

func TestBreakerCheck(t *testing.T) {
	for _, c := range []struct {
		name   string
		counts store.BreakerCounts
		want   string
	}{
		{"first call", store.BreakerCounts{}, ""},
		{"second call", store.BreakerCounts{Total: 1}, ""},
		{"fourth call", store.BreakerCounts{Total: 3}, ""},
		{"fifth call", store.BreakerCounts{Total: 4}, "loop_detected"},
		{"sixth call", store.BreakerCounts{Total: 5}, "loop_detected"},
		{"second after a denial", store.BreakerCounts{Total: 1, Denied: 1}, ""},
		{"third after one denial", store.BreakerCounts{Total: 2, Denied: 1}, ""},
		{"third after two denials", store.BreakerCounts{Total: 2, Denied: 2}, "repeated_denial"},
		{"fourth after three denials", store.BreakerCounts{Total: 3, Denied: 3}, "repeated_denial"},
		{"fifth after two denials", store.BreakerCounts{Total: 4, Denied: 2}, "repeated_denial"},
		{"fifth after one denial", store.BreakerCounts{Total: 4, Denied: 1}, "loop_detected"},
		{"after an uncertain", store.BreakerCounts{Total: 1, Uncertain: true}, "uncertain_repeat"},
		{"uncertain beats the others", store.BreakerCounts{Total: 9, Denied: 5, Uncertain: true}, "uncertain_repeat"},
	} {
		code, refused := BreakerCheck(c.counts)
		if code != c.want || refused != (c.want != "") {
			t.Errorf("%s: BreakerCheck(%+v) = %q, %v; want %q", c.name, c.counts, code, refused, c.want)
		}
	}
}

// A run of identical calls: the fifth is refused; after two denials the third is.
func TestBreakerSequence(t *testing.T) {
	var c store.BreakerCounts
	n := 0
	for {
		if _, refused := BreakerCheck(c); refused {
			break
		}
		n++
		c.Total++
	}
	if n != BreakerCallLimit-1 {
		t.Errorf("%d identical calls ran before the breaker refused, want %d", n, BreakerCallLimit-1)
	}
	c, n = store.BreakerCounts{}, 0
	for {
		if _, refused := BreakerCheck(c); refused {
			break
		}
		n++
		c.Total++
		c.Denied++
	}
	if n != BreakerDeniedLimit-1 {
		t.Errorf("%d identical denied calls before the breaker refused, want %d", n, BreakerDeniedLimit-1)
	}
}
