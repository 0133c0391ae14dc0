package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"strings"

	"github.com/toolgen/toolgen/runtime/store/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

const schemaMigrationsSQL = `
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL
) STRICT`

// migrateUp applies every migration not yet recorded in schema_migrations, each in
// its own IMMEDIATE transaction (so concurrent openers of one file serialize).
func migrateUp(ctx context.Context, db *sql.DB) error {
	all, err := migrate.Load(migrationFS, "migrations")
	if err != nil {
		return err
	}
	for _, m := range all {
		err := inTx(ctx, db, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, schemaMigrationsSQL); err != nil {
				return err
			}
			var applied bool
			if err := tx.QueryRowContext(ctx,
				`SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = ?)`, m.Version).Scan(&applied); err != nil {
				return err
			}
			if applied {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.Up); err != nil {
				return err
			}
			if err := reloadSchemaIfEdited(ctx, tx, m.Up); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx,
				`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, `+nowMicros+`)`, m.Version, m.Name)
			return err
		})
		if err != nil {
			return fmt.Errorf("sqlite: migration %s: %w", &m, err)
		}
	}
	return nil
}

// reloadSchemaIfEdited bumps the schema cookie after a script that edited sqlite_schema
// in place (a CHECK removed or put back), as SQLite's procedure for it says, so that
// every connection reparses the schema. PRAGMA takes no expression, so it is done here.
func reloadSchemaIfEdited(ctx context.Context, tx *sql.Tx, script string) error {
	if !strings.Contains(script, "writable_schema") {
		return nil
	}
	var v int64
	if err := tx.QueryRowContext(ctx, `PRAGMA schema_version`).Scan(&v); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA schema_version = %d`, v+1))
	return err
}

// migrateDown reverts applied migrations newer than version, newest first.
func migrateDown(ctx context.Context, db *sql.DB, version int) error {
	all, err := migrate.Load(migrationFS, "migrations")
	if err != nil {
		return err
	}
	for i := len(all) - 1; i >= 0; i-- {
		m := all[i]
		if m.Version <= version {
			break
		}
		err := inTx(ctx, db, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `DELETE FROM schema_migrations WHERE version = ?`, m.Version)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return nil
			}
			if _, err = tx.ExecContext(ctx, m.Down); err != nil {
				return err
			}
			return reloadSchemaIfEdited(ctx, tx, m.Down)
		})
		if err != nil {
			return fmt.Errorf("sqlite: migration %s down: %w", &m, err)
		}
	}
	return nil
}
