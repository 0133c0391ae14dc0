package store

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Clock moves a store's time forward in a test, without sleeping: a driver opened
// with one (sqlite.WithClock, postgres.WithClock) runs every statement of its own
// with "now" = the database clock + [Clock.Offset]. Lease deadlines, the sweep's and
// the watermark's comparisons, renewals, idle MCP sessions, cancellation retention and
// the times the statements record all move together, on every connection of the
// store, so a test expires a lease by advancing the clock past it (the conformance
// suite does, storetest).
//
// It is an offset on the database clock rather than a Now func whose time the driver
// would bind as a parameter, because the contract is that lease times come from the
// database clock, never a caller's: on PostgreSQL the workers of several hosts share
// one database and their clocks differ, and only the database's orders their leases.
// With an offset the database stays the one source of time; the SQL of a store
// without a clock is the production SQL, unchanged, and a test clock shifts it by the
// same amount in every statement. What the database computes by itself keeps the
// unshifted clock: column defaults, triggers (an event's At and Duration), migration
// bookkeeping and the PostgreSQL wake-up registrations. Two handles on one database
// share a time only if they share the Clock.
//
// A Clock only moves forward: time that went back could revive an expired lease,
// which no store allows. The zero value is a clock at offset 0; a nil *Clock is the
// database clock itself. It is safe for concurrent use; a statement running while the
// clock is advanced may see either time.
type Clock struct {
	offsetUS atomic.Int64
}

// NewClock returns a clock at the database clock's time (offset 0).
func NewClock() *Clock { return &Clock{} }

// Advance moves the clock forward by d (rounded down to a microsecond, the stores'
// precision). It panics if d is negative.
func (c *Clock) Advance(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("store: Clock.Advance(%v): a store's clock never goes back", d))
	}
	c.offsetUS.Add(d.Microseconds())
}

// Offset is how far the clock is ahead of the database clock; 0 for a nil Clock.
func (c *Clock) Offset() time.Duration {
	if c == nil {
		return 0
	}
	return time.Duration(c.offsetUS.Load()) * time.Microsecond
}
