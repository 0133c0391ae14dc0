package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pool is pgxpool. The store's statements use its Query, QueryRow and Exec, each on
// a connection acquired for the statement (released when its rows are closed);
// migrations use do, to run several statements on one connection. pgxpool resets a
// connection left inside a transaction or broken before it is reused.
type pool struct{ *pgxpool.Pool }

func newPool(ctx context.Context, cfg *pgx.ConnConfig, maxConns int) (*pool, error) {
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
	return &pool{p}, nil
}

// do runs fn on a connection of its own.
func (p *pool) do(ctx context.Context, fn func(conn *pgx.Conn) error) error {
	return p.AcquireFunc(ctx, func(c *pgxpool.Conn) error { return fn(c.Conn()) })
}
