package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one numbered pair of migrations/NNN_name.{up,down}.sql.
type migration struct {
	Version  int
	Name     string
	Up, Down string
}

// migrations returns the embedded migrations in version order.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	byVersion := map[int]*migration{}
	for _, e := range entries {
		name := e.Name()
		base, dir, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), ".")
		num, label, ok2 := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || !ok2 || err != nil || (dir != "up" && dir != "down") {
			return nil, fmt.Errorf("sqlite: migration %s: want NNN_name.up.sql or NNN_name.down.sql", name)
		}
		body, err := fs.ReadFile(migrationFS, path.Join("migrations", name))
		if err != nil {
			return nil, err
		}
		m := byVersion[version]
		if m == nil {
			m = &migration{Version: version, Name: label}
			byVersion[version] = m
		}
		if dir == "up" {
			m.Up = string(body)
		} else {
			m.Down = string(body)
		}
	}
	var all []migration
	for _, m := range byVersion {
		if m.Up == "" || m.Down == "" {
			return nil, fmt.Errorf("sqlite: migration %03d_%s needs both .up.sql and .down.sql", m.Version, m.Name)
		}
		all = append(all, *m)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Version < all[j].Version })
	return all, nil
}

const schemaMigrationsSQL = `
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL
) STRICT`

// migrateUp applies every migration not yet recorded in schema_migrations, each in
// its own IMMEDIATE transaction (so concurrent openers of one file serialize).
func migrateUp(ctx context.Context, db *sql.DB) error {
	all, err := migrations()
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
			_, err := tx.ExecContext(ctx,
				`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, `+nowMicros+`)`, m.Version, m.Name)
			return err
		})
		if err != nil {
			return fmt.Errorf("sqlite: migration %03d_%s: %w", m.Version, m.Name, err)
		}
	}
	return nil
}

// migrateDown reverts applied migrations newer than version, newest first.
func migrateDown(ctx context.Context, db *sql.DB, version int) error {
	all, err := migrations()
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
			_, err = tx.ExecContext(ctx, m.Down)
			return err
		})
		if err != nil {
			return fmt.Errorf("sqlite: migration %03d_%s down: %w", m.Version, m.Name, err)
		}
	}
	return nil
}
