package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolgen/toolgen/runtime/store"
)

// pool is pgxpool. The store's statements use its Query, QueryRow and Exec, each on
// a connection acquired for the statement (released when its rows are closed);
// migrations use do, to run several statements on one connection. pgxpool resets a
// connection left inside a transaction or broken before it is reused.
//
// With a clock (WithClock) the statements run through Query, QueryRow and Exec are
// the store's SQL with every now() shifted by the clock's offset, as a literal
// interval: the offset is the same for every now() of a statement, and the database
// stays the source of time (store.Clock). Without one, or at offset 0, they run as
// written.
type pool struct {
	*pgxpool.Pool
	clock *store.Clock
}

// clocked returns query as the store runs it now (see pool).
func (p *pool) clocked(query string) string {
	off := p.clock.Offset()
	if off == 0 {
		return query
	}
	return strings.ReplaceAll(query, "now()", fmt.Sprintf("(now() + interval '%d microseconds')", off.Microseconds()))
}

func (p *pool) Query(ctx context.Context, query string, args ...any) (pgx.Rows, error) {
	return p.Pool.Query(ctx, p.clocked(query), args...)
}

func (p *pool) QueryRow(ctx context.Context, query string, args ...any) pgx.Row {
	return p.Pool.QueryRow(ctx, p.clocked(query), args...)
}

func (p *pool) Exec(ctx context.Context, query string, args ...any) (pgconn.CommandTag, error) {
	return p.Pool.Exec(ctx, p.clocked(query), args...)
}

func newPool(ctx context.Context, cfg *pgx.ConnConfig, maxConns int, clock *store.Clock) (*pool, error) {
	pc, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, err
	}
	pc.ConnConfig = cfg
	pc.MaxConns = int32(maxConns)
	p, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	return &pool{Pool: p, clock: clock}, nil
}

// do runs fn on a connection of its own.
func (p *pool) do(ctx context.Context, fn func(conn *pgx.Conn) error) error {
	return p.AcquireFunc(ctx, func(c *pgxpool.Conn) error { return fn(c.Conn()) })
}
