// Package testinfra gives tests the real components they run against: a
// fresh, migrated PostgreSQL database per test and one Temporal dev server per
// test binary, started from bin/temporal. A missing component fails the test;
// it never skips.
package testinfra

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weftworks/weft/store"
)

// AdminURL is the PostgreSQL server tests create their databases on.
// WEFT_TEST_DATABASE_URL overrides it; it must name an existing database.
func AdminURL() string {
	if u := os.Getenv("WEFT_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// NewDatabase creates a fresh database, migrates it and drops it when the
// test ends. It returns the database URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	url := NewEmptyDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatalf("testinfra: connect: %v", err)
	}
	defer pool.Close()
	if err := store.Migrate(ctx, pool); err != nil {
		t.Fatalf("testinfra: migrate: %v", err)
	}
	return url
}

// NewEmptyDatabase creates a fresh database without migrating it (for
// migration tests) and drops it when the test ends. It returns the URL.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(AdminURL())
	if err != nil {
		t.Fatalf("testinfra: admin url: %v", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("testinfra: PostgreSQL is required (start it with pg_ctlcluster): %v", err)
	}
	defer conn.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "weft_test_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testinfra: create database: %v", err)
	}
	dbCfg := cfg.Copy()
	dbCfg.Database = name
	url := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", dbCfg.User, dbCfg.Host, dbCfg.Port, name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return url
}

// NewStore returns a Store on a fresh migrated database, closed at cleanup.
func NewStore(t testing.TB) *store.Store {
	t.Helper()
	url := NewDatabase(t)
	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("testinfra: open store: %v", err)
	}
	t.Cleanup(st.Close)
	return st
}
