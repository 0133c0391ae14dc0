package tooltest

import (
	"context"
	"path/filepath"

	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
)

// tempSQLite is tooltestsqlite.TempFile, which this package's own tests cannot import
// (it imports tooltest): a new SQLite file in a temporary directory of t.
func tempSQLite(t TB) Database { return sqliteFile(filepath.Join(t.TempDir(), "toolgen.db")) }

type sqliteFile string

func (f sqliteFile) Open(ctx context.Context) (store.Store, error) {
	return sqlite.Open(ctx, string(f))
}
