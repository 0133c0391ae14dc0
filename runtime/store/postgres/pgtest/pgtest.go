// Package pgtest opens PostgreSQL stores for tests: each in a fresh schema of the
// database named by TOOLGEN_PG_DSN, dropped when the test ends. Tests that need
// PostgreSQL skip, with a message saying why, when the variable is not set; CI sets it.
//
// Only tests import pgtest.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgen/toolgen/runtime/store/postgres"
)

// EnvDSN is the environment variable naming the test database.
const EnvDSN = "TOOLGEN_PG_DSN"

// DSN returns the test database's connection string, or skips t.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		t.Skip(EnvDSN + " is not set: skipping the PostgreSQL tests " +
			"(CI sets postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	return dsn
}

// Open returns a store in a new schema, and the schema's name (to open more handles
// on it with postgres.WithSchema, as other workers would).
func Open(t testing.TB) (*postgres.Store, string) {
	t.Helper()
	dsn := DSN(t)
	b := make([]byte, 6)
	rand.Read(b)
	schema := "toolgen_test_" + hex.EncodeToString(b)
	s, err := postgres.Open(context.Background(), dsn, postgres.WithSchema(schema), postgres.WithMaxConns(8))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return s, schema
}
