package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

func TestPublishActionContractsRefusesAChangedContract(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	c := graph.ActionContract{ID: "crm.lookup", Version: 1, Risk: graph.RiskRead, InputSchema: json.RawMessage(`{}`),
		OutputSchema: json.RawMessage(`{}`), RequiredPermissions: []string{}, TimeoutMs: 1000, Idempotency: "none"}
	require.NoError(t, st.PublishActionContracts(ctx, []graph.ActionContract{c}))
	require.NoError(t, st.PublishActionContracts(ctx, []graph.ActionContract{c}), "same contract again is fine")
	changed := c
	changed.TimeoutMs = 2000
	err := st.PublishActionContracts(ctx, []graph.ActionContract{changed})
	require.Equal(t, store.CodeContractChanged, failure.CodeOf(err))
	require.Contains(t, err.Error(), "crm.lookup@1")
	v2 := changed
	v2.Version = 2
	require.NoError(t, st.PublishActionContracts(ctx, []graph.ActionContract{v2}))
	all, err := st.ListActionContracts(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)
	h, _ := c.ContentHash()
	require.Equal(t, h, all[0].Hash)
	require.Equal(t, 1000, all[0].Contract.TimeoutMs)
}
