package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

func TestLedgerLookupAndRecord(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	_, found, err := st.LedgerLookup(ctx, "t1", "x.write@1", "r/n/1", "h1")
	require.NoError(t, err)
	require.False(t, found)
	bound, err := st.LedgerRecord(ctx, "t1", "x.write@1", "r/n/1", "h1", json.RawMessage(`{"id":1}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"id":1}`, string(bound))
	bound, err = st.LedgerRecord(ctx, "t1", "x.write@1", "r/n/1", "h1", json.RawMessage(`{"id":2}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"id":1}`, string(bound), "the first result wins")
	first, found, err := st.LedgerLookup(ctx, "t1", "x.write@1", "r/n/1", "h1")
	require.NoError(t, err)
	require.True(t, found)
	require.JSONEq(t, `{"id":1}`, string(first))
	_, _, err = st.LedgerLookup(ctx, "t1", "x.write@1", "r/n/1", "h2")
	require.True(t, errors.Is(err, store.ErrLedgerConflict) && failure.CodeOf(err) == failure.CodeIdempotencyConflict, "%v", err)
	_, err = st.LedgerRecord(ctx, "t1", "x.write@1", "r/n/1", "h2", json.RawMessage(`{}`))
	require.Equal(t, failure.CodeIdempotencyConflict, failure.CodeOf(err))
	_, found, err = st.LedgerLookup(ctx, "t2", "x.write@1", "r/n/1", "h2")
	require.NoError(t, err)
	require.False(t, found, "ledgers are per tenant")
}
