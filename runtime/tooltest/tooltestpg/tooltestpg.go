// Package tooltestpg puts a [tooltest.Worker] on PostgreSQL: each [Schema] is a fresh
// schema in the database a DSN names, created by the store's own migrations and
// dropped, with everything in it, when the test ends.
//
//	dsn := tooltestpg.DSN(t) // $TOOLGEN_PG_DSN, or the test is skipped
//	w := tooltest.NewWorker(t, tool, tooltest.WorkerOptions{Database: tooltestpg.NewSchema(t, dsn)})
//
// It is a package of its own so that tooltest does not link the PostgreSQL driver
// (github.com/jackc/pgx/v5) into every author's test binary: only tests that import
// tooltestpg get it. Like tooltest, it is imported only by tests.
package tooltestpg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/postgres"
	"github.com/toolgen/toolgen/runtime/tooltest"
)

// EnvDSN is the environment variable [DSN] reads.
const EnvDSN = "TOOLGEN_PG_DSN"

// DSN returns the test database's connection string from $TOOLGEN_PG_DSN, or skips t
// when it is not set.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		t.Skip(EnvDSN + " is not set: skipping a test that needs PostgreSQL " +
			"(e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	return dsn
}

// Schema is a fresh schema in one PostgreSQL database, a [tooltest.Database]: every
// Open is a new handle (its own pool) whose search_path is the schema.
type Schema struct {
	// Name is the schema's name, toolgen_tooltest_ and twelve hex digits.
	Name string
	dsn  string
}

var _ tooltest.Database = (*Schema)(nil)

// NewSchema names a new schema in the database at dsn (a pgx connection string; it
// must allow CREATE SCHEMA) and drops it, CASCADE, when t ends — after the Workers
// that use it have closed their handles, since t's cleanups run last-registered first.
// The schema is created by the first Open.
func NewSchema(t tooltest.TB, dsn string) *Schema {
	t.Helper()
	if dsn == "" {
		t.Fatalf("tooltestpg: NewSchema needs a DSN (see tooltestpg.DSN)")
	}
	b := make([]byte, 6)
	rand.Read(b)
	s := &Schema{Name: "toolgen_tooltest_" + hex.EncodeToString(b), dsn: dsn}
	t.Cleanup(func() {
		if err := s.drop(); err != nil {
			t.Errorf("tooltestpg: drop schema %s: %v", s.Name, err)
		}
	})
	return s
}

// Open opens a new store handle on the schema (creating it and applying the
// migrations if needed).
func (s *Schema) Open(ctx context.Context) (store.Store, error) {
	// A small pool: a test makes one call at a time, and the server is shared.
	return postgres.Open(ctx, s.dsn, postgres.WithSchema(s.Name), postgres.WithMaxConns(4))
}

func (s *Schema) drop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{s.Name}.Sanitize()+` CASCADE`)
	return err
}
