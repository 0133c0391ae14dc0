package sqlite

import (
	"database/sql/driver"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	msqlite "modernc.org/sqlite"

	"github.com/toolgen/toolgen/runtime/store"
)

// Option configures [Open].
type Option func(*options)

type options struct {
	clock *store.Clock
}

// WithClock runs the store's statements on clock (store.Clock): nowMicros plus the
// clock's offset, read in SQL by the function toolgen_clock_offset_us. For tests: a
// store without one runs the SQL of sql/*.sql unchanged, on SQLite's own clock.
func WithClock(clock *store.Clock) Option {
	return func(o *options) { o.clock = clock }
}

// The clocks of open stores, by the id their statements name: SQLite functions are
// registered for every connection of the process, so the function finds the store's
// clock by the id the store's SQL passes it.
var (
	clocks      sync.Map // int64 -> *store.Clock
	lastClockID atomic.Int64
)

const clockFunc = "toolgen_clock_offset_us"

func init() {
	msqlite.MustRegisterScalarFunction(clockFunc, 1, func(_ *msqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		id, ok := args[0].(int64)
		if !ok {
			return nil, fmt.Errorf("%s: clock id %v", clockFunc, args[0])
		}
		c, ok := clocks.Load(id)
		if !ok {
			return nil, fmt.Errorf("%s: no clock %d", clockFunc, id)
		}
		return c.(*store.Clock).Offset().Microseconds(), nil
	})
}

// clocked is how a store runs its SQL: the SQL itself without a clock, or with every
// nowMicros shifted by the clock's offset (the same offset in every statement, as the
// function reads the clock the statement names).
type clocked struct {
	id int64 // 0: no clock
}

func newClocked(c *store.Clock) clocked {
	if c == nil {
		return clocked{}
	}
	id := lastClockID.Add(1)
	clocks.Store(id, c)
	return clocked{id: id}
}

// sql returns query as this store runs it.
func (c clocked) sql(query string) string {
	if c.id == 0 {
		return query
	}
	return strings.ReplaceAll(query, nowMicros, fmt.Sprintf("(%s + %s(%d))", nowMicros, clockFunc, c.id))
}

// close forgets the clock.
func (c clocked) close() {
	if c.id != 0 {
		clocks.Delete(c.id)
	}
}
