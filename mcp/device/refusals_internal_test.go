package device

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// The refusal audit: per key, the first burst refusals of a window are written one by
// one, the rest counted into one summary written when the window ends (the timer) or
// when the gateway closes; keys are independent; a summary names a bounded sample of
// where the refusals came from.
func TestRefusals_BurstThenOneSummaryPerWindow(t *testing.T) {
	var mu sync.Mutex
	var written []map[string]any
	r := newRefusals(time.Hour, 3, func(_ context.Context, id string, d map[string]any) {
		mu.Lock()
		defer mu.Unlock()
		d["device"] = id
		written = append(written, d)
	})
	ctx := context.Background()
	own := 0
	for i := range 100 {
		if r.admit(ctx, refusalKey{reason: ReasonUnknownDevice}, fmt.Sprintf("10.0.0.%d", i), fmt.Sprintf("ghost%d", i)) {
			own++
		}
	}
	if r.admit(ctx, refusalKey{device: "lab", reason: ReasonBadToken}, "10.0.0.1", "lab") {
		own++
	}
	if own != 4 || len(written) != 0 {
		t.Fatalf("own entries = %d (want 3 of one key + 1 of the other), summaries before the window ended = %d", own, len(written))
	}
	r.close()
	if len(written) != 1 {
		t.Fatalf("summaries = %v, want one (the other key counted nothing unwritten)", written)
	}
	s := written[0]
	if s["count"] != 97 || s["reason"] != ReasonUnknownDevice || s["summary"] != true || s["device"] != "" {
		t.Fatalf("summary = %v", s)
	}
	if n := len(s["remote_addrs"].([]string)); n != maxSamples {
		t.Fatalf("remote_addrs has %d samples, want %d", n, maxSamples)
	}
	if n := len(s["claimed_ids"].([]string)); n != maxSamples {
		t.Fatalf("claimed_ids has %d samples, want %d", n, maxSamples)
	}
}

// A window's summary is written when its time is up, and the next refusal of the key
// starts a new window with a new burst.
func TestRefusals_WindowEnds(t *testing.T) {
	written := make(chan map[string]any, 10)
	r := newRefusals(time.Second, 1, func(_ context.Context, _ string, d map[string]any) { written <- d })
	defer r.close()
	ctx := context.Background()
	key := refusalKey{device: "lab", reason: ReasonBadToken}
	if !r.admit(ctx, key, "a", "lab") || r.admit(ctx, key, "a", "lab") || r.admit(ctx, key, "b", "lab") {
		t.Fatal("want the first refusal of the window written, the next two counted")
	}
	select {
	case s := <-written:
		if s["count"] != 2 {
			t.Fatalf("summary = %v, want count 2", s)
		}
	case <-time.After(10 * time.Second): // a failure guard: the timer fires after 1 s
		t.Fatal("no summary when the window ended")
	}
	if !r.admit(ctx, key, "a", "lab") {
		t.Fatal("the first refusal of a new window is not written")
	}
}
