// Package tooltestsqlite puts a [tooltest.Worker], and the contract suite, on the
// embedded SQLite store (runtime/store/sqlite):
//
//	tooltest.Run(t, tooltestsqlite.TempFile, gen.NewBillingCharge[chargePlan](charger{}), cases...)
//	w := tooltest.NewWorker(t, tool, tooltest.WorkerOptions{Database: tooltestsqlite.TempFile(t)})
//
// It is a package of its own so that tooltest links no store driver into an author's
// test binary: the test that imports this package (or tooltestpg) asks for one. Like
// tooltest, it is imported only by tests.
package tooltestsqlite

import (
	"context"
	"path/filepath"

	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
	"github.com/toolgen/toolgen/runtime/tooltest"
)

// TempFile is a new SQLite file in a temporary directory of t, removed when t ends. It
// is a [tooltest.NewDatabase]: pass it to tooltest.Run and tooltest.Check, which make a
// new one for each property they check.
func TempFile(t tooltest.TB) tooltest.Database {
	return File(filepath.Join(t.TempDir(), "toolgen.db"))
}

// File is the database in the SQLite file at path (created if missing): name one
// yourself to look at it with other tools after the test.
func File(path string) tooltest.Database { return file(path) }

var _ tooltest.NewDatabase = TempFile

type file string

// Open opens a new handle on the file, as another process would.
func (f file) Open(ctx context.Context) (store.Store, error) {
	return sqlite.Open(ctx, string(f))
}
