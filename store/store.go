// Package store is weft's PostgreSQL adapter: a pgx pool, the embedded
// numbered migrations, and one file of queries per concern. SQL lives only here.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/weftworks/weft/failure"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Store wraps the pgx pool. Methods live in per-concern files.
type Store struct {
	Pool *pgxpool.Pool

	// listener is the process's one listening connection (Listener),
	// built on first use so a Store made of a bare pool has one too.
	listenerOnce sync.Once
	listener     *Listener
}

// Options shape the pool Open makes.
type Options struct {
	// MaxConns is the pool's size when the database URL does not set
	// pool_max_conns (which wins); 0 leaves pgxpool's default, max(4, CPUs).
	MaxConns int
}

// Open connects to PostgreSQL with pgxpool's defaults (or what the URL's
// pool_* parameters say).
func Open(ctx context.Context, databaseURL string) (*Store, error) {
	return OpenWith(ctx, databaseURL, Options{})
}

// OpenWith connects to PostgreSQL with o's defaults under what the URL
// sets.
func OpenWith(ctx context.Context, databaseURL string, o Options) (*Store, error) {
	if o.MaxConns < 0 || o.MaxConns > math.MaxInt32 {
		return nil, fmt.Errorf("store: pool size %d out of range", o.MaxConns)
	}
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("store: parse database url: %w", err)
	}
	if o.MaxConns > 0 && !setsPoolMaxConns(databaseURL) {
		cfg.MaxConns = max(int32(o.MaxConns), cfg.MinConns) // pool_min_conns above it would be refused
	}
	withConnectTimeout(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: connect: %w", err)
	}
	return &Store{Pool: pool}, nil
}

// setsPoolMaxConns reports whether databaseURL (a URL or a keyword/value
// string) names pool_max_conns: pgxpool.ParseConfig consumes the
// parameter, so it is looked for where pgconn leaves it, among the
// runtime parameters of the connection's own parse.
func setsPoolMaxConns(databaseURL string) bool {
	c, err := pgconn.ParseConfig(databaseURL)
	if err != nil {
		return false // pgxpool.ParseConfig accepted it; keep the default
	}
	_, ok := c.RuntimeParams["pool_max_conns"]
	return ok
}

// Close releases the pool.
func (s *Store) Close() { s.Pool.Close() }

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.Pool.Ping(ctx) }

// Migrate applies every pending embedded migration. goose serialises
// concurrent migrators with a PostgreSQL advisory lock.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	return migrateDB(ctx, db)
}

func migrateDB(ctx context.Context, db *sql.DB) error {
	p, err := migrator(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	return nil
}

// MigrateTo applies, or rolls back, the embedded migrations to exactly
// version: for tests of a migration over data shaped by the ones before
// it, and for an operator rolling a release back (goose down migrations).
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, version int64) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := migrator(db)
	if err != nil {
		return err
	}
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("store: migration version: %w", err)
	}
	if current > version {
		_, err = p.DownTo(ctx, version)
	} else {
		_, err = p.UpTo(ctx, version)
	}
	if err != nil {
		return fmt.Errorf("store: migrate to %d: %w", version, err)
	}
	return nil
}

// migrator is the goose provider of the embedded migrations.
func migrator(db *sql.DB) (*goose.Provider, error) {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("store: migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub, goose.WithSessionLocker(locker))
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	return p, nil
}

// EnsureDatabase creates the database named in databaseURL if it does not
// exist, connecting to the server's "postgres" database to do so.
func EnsureDatabase(ctx context.Context, databaseURL string) error {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("store: parse database url: %w", err)
	}
	name := cfg.Database
	if name == "" {
		return errors.New("store: database url names no database")
	}
	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return fmt.Errorf("store: connect to create database: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("store: check database: %w", err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // created concurrently
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: create database: %w", err)
	}
	return nil
}

// notFound maps pgx.ErrNoRows to failure.ErrNotFound; the one place that does.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return failure.ErrNotFound
	}
	return err
}

// isUniqueViolation reports a unique-constraint violation.
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}
