package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/toolgen/toolgen/runtime/store/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

const (
	schemaMigrationsSQL = `
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`
	// migrationLockSQL serializes workers migrating the same schema at once.
	migrationLockSQL = `SELECT pg_advisory_xact_lock(hashtext('toolgen.migrate.' || current_schema()))`
)

// migrateUp applies every migration not yet recorded in schema_migrations, each in
// its own transaction under an advisory lock.
func (s *Store) migrateUp(ctx context.Context) error {
	all, err := migrate.Load(migrationFS, "migrations")
	if err != nil {
		return err
	}
	return s.pool.do(ctx, func(conn *pgx.Conn) error {
		if s.schema != "" {
			if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{s.schema}.Sanitize()); err != nil {
				return fmt.Errorf("postgres: create schema %s: %w", s.schema, err)
			}
		}
		for _, m := range all {
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, migrationLockSQL); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, schemaMigrationsSQL); err != nil {
					return err
				}
				var applied bool
				if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.Version).Scan(&applied); err != nil {
					return err
				}
				if applied {
					return nil
				}
				if _, err := tx.Exec(ctx, m.Up); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
				return err
			})
			if err != nil {
				return fmt.Errorf("postgres: migration %s: %w", &m, err)
			}
		}
		return nil
	})
}

// migrateDown reverts applied migrations newer than version, newest first.
func (s *Store) migrateDown(ctx context.Context, version int) error {
	all, err := migrate.Load(migrationFS, "migrations")
	if err != nil {
		return err
	}
	return s.pool.do(ctx, func(conn *pgx.Conn) error {
		for i := len(all) - 1; i >= 0 && all[i].Version > version; i-- {
			m := all[i]
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, migrationLockSQL); err != nil {
					return err
				}
				tag, err := tx.Exec(ctx, `DELETE FROM schema_migrations WHERE version = $1`, m.Version)
				if err != nil || tag.RowsAffected() == 0 {
					return err
				}
				_, err = tx.Exec(ctx, m.Down)
				return err
			})
			if err != nil {
				return fmt.Errorf("postgres: migration %s down: %w", &m, err)
			}
		}
		return nil
	})
}
