package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pool is pgxpool with the one call shape the store uses: run fn on a connection of
// its own. pgxpool resets a connection left inside a transaction or broken before it
// is reused.
type pool struct{ p *pgxpool.Pool }

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
	return &pool{p: p}, nil
}

func (p *pool) do(ctx context.Context, fn func(conn *pgx.Conn) error) error {
	return p.p.AcquireFunc(ctx, func(c *pgxpool.Conn) error { return fn(c.Conn()) })
}

func (p *pool) close() { p.p.Close() }
