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

func newAgent(key string) store.NewAgent {
	return store.NewAgent{Key: key, Name: "Agent " + key, Content: json.RawMessage(`{"instructions":"hi","allowedTools":["core.echo@1"],"outputSchema":{"type":"object"}}`),
		Hash: "h1-" + key, By: "alice"}
}

func TestAgentsRevisionsArchiveAndTenancy(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()

	a, r, err := st.CreateAgent(ctx, "t1", newAgent("triage"))
	require.NoError(t, err)
	require.Equal(t, 1, a.LatestRevision)
	require.Equal(t, 1, r.Revision)
	_, _, err = st.CreateAgent(ctx, "t1", newAgent("triage"))
	require.Equal(t, failure.CodeAlreadyExists, failure.CodeOf(err))
	// Another tenant may use the same key.
	_, _, err = st.CreateAgent(ctx, "t2", newAgent("triage"))
	require.NoError(t, err)

	name := "Renamed"
	a, r, err = st.AddAgentRevision(ctx, "t1", "triage", store.AgentUpdate{ExpectedRevision: 1, Name: &name,
		Content: json.RawMessage(`{"instructions":"v2"}`), Hash: "h2", By: "bob"})
	require.NoError(t, err)
	require.Equal(t, 2, r.Revision)
	require.Equal(t, "Renamed", a.Name)
	_, _, err = st.AddAgentRevision(ctx, "t1", "triage", store.AgentUpdate{ExpectedRevision: 1, Content: json.RawMessage(`{}`), Hash: "h3"})
	require.Equal(t, failure.CodeRevisionConflict, failure.CodeOf(err))
	_, _, err = st.AddAgentRevision(ctx, "t3", "triage", store.AgentUpdate{Content: json.RawMessage(`{}`), Hash: "h3"})
	require.ErrorIs(t, err, failure.ErrNotFound)

	// Revisions are immutable in the database itself.
	_, err = st.Pool.Exec(ctx, `UPDATE agent_revisions SET hash = 'x' WHERE tenant_id = 't1'`)
	require.Error(t, err)

	name, err = st.AgentName(ctx, "t1", "triage")
	require.NoError(t, err)
	require.Equal(t, "Renamed", name)
	_, err = st.AgentName(ctx, "t9", "triage")
	require.ErrorIs(t, err, failure.ErrNotFound)

	refs := []graph.AgentRef{{Key: "triage", Revision: 1}, {Key: "triage", Revision: 2}, {Key: "triage", Revision: 7}, {Key: "nope", Revision: 1}}
	cs, err := st.AgentContracts(ctx, "t1", refs)
	require.NoError(t, err)
	require.Len(t, cs, 2)
	require.Equal(t, "h1-triage", cs[0].Hash)
	require.Equal(t, []string{"core.echo@1"}, cs[0].AllowedTools)
	require.JSONEq(t, `{"type":"object"}`, string(cs[0].OutputSchema))
	require.False(t, cs[0].Archived)
	require.Equal(t, []string{}, cs[0].RequiredPermissions)

	archived, err := st.ArchiveAgent(ctx, "t1", "triage", "carol")
	require.NoError(t, err)
	require.True(t, archived.Archived())
	again, err := st.ArchiveAgent(ctx, "t1", "triage", "dave")
	require.NoError(t, err)
	require.Equal(t, archived.ArchivedAt, again.ArchivedAt)
	require.Equal(t, "carol", again.ArchivedBy)
	cs, err = st.AgentContracts(ctx, "t1", refs[:1])
	require.NoError(t, err)
	require.True(t, cs[0].Archived)
	// Archived agents take no new revision, but their revisions stay readable.
	_, _, err = st.AddAgentRevision(ctx, "t1", "triage", store.AgentUpdate{Content: json.RawMessage(`{}`), Hash: "h9"})
	require.Equal(t, store.CodeAgentArchived, failure.CodeOf(err))
	_, err = st.GetAgentRevision(ctx, "t1", "triage", 1)
	require.NoError(t, err)
	// The other tenant's agent is untouched.
	other, err := st.GetAgent(ctx, "t2", "triage")
	require.NoError(t, err)
	require.False(t, other.Archived())

	for _, k := range []string{"b", "c", "d"} {
		_, _, err := st.CreateAgent(ctx, "t1", newAgent(k))
		require.NoError(t, err)
	}
	page, next, err := st.ListAgents(ctx, "t1", "", 2)
	require.NoError(t, err)
	require.Equal(t, "c", next)
	require.Len(t, page, 2)
	page, next, err = st.ListAgents(ctx, "t1", next, 2)
	require.NoError(t, err)
	require.Equal(t, "", next)
	require.Equal(t, []string{"d", "triage"}, []string{page[0].Key, page[1].Key})
}
