package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

func TestMigrateIsIdempotent(t *testing.T) {
	st := testinfra.NewStore(t)
	require.NoError(t, store.Migrate(context.Background(), st.Pool), "second migrate")
	var n int
	require.NoError(t, st.Pool.QueryRow(context.Background(), "SELECT count(*) FROM goose_db_version").Scan(&n))
	require.GreaterOrEqual(t, n, 2, "expected applied migrations recorded, got %d rows", n)
}
