package store_test

import (
	"context"
	"testing"

	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

func TestMigrateIsIdempotent(t *testing.T) {
	st := testinfra.NewStore(t)
	if err := store.Migrate(context.Background(), st.Pool); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	var n int
	if err := st.Pool.QueryRow(context.Background(), "SELECT count(*) FROM goose_db_version").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Fatalf("expected applied migrations recorded, got %d rows", n)
	}
}
