package server

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestAwaitEnd_SessionClosedFirst: a withheld call's stream waits for its session to
// end (awaitEnd); a session that ended while the call was open but before the wait
// began (a DELETE that overtook the cancelled call's handler) ends the wait at once.
// Before, that wake-up was lost and the stream stayed open until its client left.
// The time limit is a failure guard, not a measurement.
func TestAwaitEnd_SessionClosedFirst(t *testing.T) {
	o := newOpenCalls()
	c := o.add("s", "", id(7), "ref")
	o.sessionClosed("s")
	ended := make(chan struct{})
	go func() {
		o.awaitEnd(context.Background(), "s", c, context.Background())
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("a stream waits for a session that ended before its wait began")
	}
	o.remove(c)

	// A wait that began first ends when the session does, as before.
	c = o.add("s2", "", id(8), "ref2")
	waiting := make(chan struct{})
	go func() {
		o.awaitEnd(context.Background(), "s2", c, context.Background())
		close(waiting)
	}()
	for {
		o.mu.Lock()
		e := o.ends["s2"]
		o.mu.Unlock()
		if e != nil {
			break
		}
		time.Sleep(time.Millisecond) // until the wait has begun (a condition, polled)
	}
	o.sessionClosed("s2")
	select {
	case <-waiting:
	case <-time.After(30 * time.Second):
		t.Fatal("a waiting stream did not end with its session")
	}
}

func id(n float64) jsonrpc.ID {
	v, _ := jsonrpc.MakeID(n)
	return v
}
