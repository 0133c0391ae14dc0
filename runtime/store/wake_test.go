package store

import "testing"

// A subscription is woken before it becomes ready, whether it becomes ready on
// registration or as the hub comes up: whoever sees Ready closed finds the wake-up
// waiting and can drop it, so no wake-up of readiness arrives later to pass for a
// commit's (storetest's subscribe drops it; the PostgreSQL wake conformance tests saw
// another call's waiter woken under load when it came after). A race, so it is run
// many times; with the old order it fails within a few hundred.
func TestHub_WokenBeforeReady(t *testing.T) {
	gated := func(string) bool { return true }
	for i := range 2000 {
		h := NewHub(gated, nil)
		var sub *Subscription
		if i%2 == 0 {
			h.SetUp(nil)
			sub = h.Subscribe(CallTopic("t", "k"))
			go h.Registered([]string{sub.wire})
		} else {
			sub = h.Subscribe(CallTopic("t", "k"))
			go h.SetUp([]string{sub.wire})
		}
		<-sub.Ready()
		select {
		case <-sub.C():
		default:
			t.Fatalf("run %d: ready, but its wake-up has not arrived yet", i)
		}
		sub.Close()
	}
}
