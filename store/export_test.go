package store

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// MigrateTo applies (or rolls back) the embedded migrations to exactly
// version, for tests of one migration over data shaped by the ones before.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, version int64) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := migrator(db)
	if err != nil {
		return err
	}
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return err
	}
	if current > version {
		_, err = p.DownTo(ctx, version)
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}
