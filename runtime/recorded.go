package runtime

import (
	"context"

	"github.com/toolgen/toolgen/runtime/store"
)

// RecordObserver is told the row of a call once the pipeline has it, committed: after
// step 7 recorded it, or step 8 found it held or released for this caller to run,
// before the approval hold (step 9) and the execution. It is not called for a call
// that ends at step 8 with a recorded outcome, nor for a record-once read (RT-3: its
// row is written only once it ran). inv is the pipeline's copy: read it, never keep
// or change it. It runs on the caller's goroutine and must return quickly.
//
// The MCP server uses it for the Tasks extension (issue 16): a task is the invocation
// row, so a task can be handed to the client as soon as the row is durable.
type RecordObserver func(inv *store.Invocation)

type recordObserverKey struct{}

// WithRecordObserver returns a context whose calls report their row to fn.
func WithRecordObserver(ctx context.Context, fn RecordObserver) context.Context {
	return context.WithValue(ctx, recordObserverKey{}, fn)
}

// observeRecorded tells the context's RecordObserver, if any, about the call's row.
func observeRecorded(ctx context.Context, inv *store.Invocation) {
	if fn, _ := ctx.Value(recordObserverKey{}).(RecordObserver); fn != nil && inv != nil {
		fn(inv)
	}
}
