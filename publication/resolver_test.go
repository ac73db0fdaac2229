package publication_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/publication"
)

// agentGraph names one action and one agent revision.
const agentGraph = `{
  "schemaVersion": 1,
  "nodes": [
    { "id": "in", "kind": "input", "outputs": { "out": "any" } },
    { "id": "think", "kind": "agent", "inputs": { "in": "any" }, "outputs": { "out": "any" },
      "agent": { "key": "triage", "revision": 2 } },
    { "id": "echo", "kind": "action", "inputs": { "in": "any" }, "outputs": { "out": "any" },
      "action": { "id": "core.echo", "version": 1 } },
    { "id": "out", "kind": "output", "inputs": { "in": "any" } }
  ],
  "edges": [
    { "from": "in.out", "to": "think.in" },
    { "from": "think.out", "to": "echo.in" },
    { "from": "echo.out", "to": "out.in" }
  ]
}`

type fakeAgents struct {
	tenant string
	refs   []graph.AgentRef
	out    []graph.AgentContract
	err    error
}

func (f *fakeAgents) AgentContracts(_ context.Context, tenantID string, refs []graph.AgentRef) ([]graph.AgentContract, error) {
	f.tenant, f.refs = tenantID, refs
	return f.out, f.err
}

func issueCodes(issues []graph.Issue) map[string]string {
	out := map[string]string{}
	for _, is := range issues {
		out[is.Path] = is.Code
	}
	return out
}

func TestResolverWithoutAgentsResolvesBuiltinsOnly(t *testing.T) {
	t.Parallel()
	doc, err := graph.Decode([]byte(agentGraph))
	require.NoError(t, err)
	for _, r := range []*publication.Resolver{nil, {}} {
		cat, err := r.Catalog(context.Background(), "t1", doc)
		require.NoError(t, err)
		for _, c := range catalog.BuiltinContracts() {
			got, ok := cat.Action(c.ID, c.Version)
			require.True(t, ok, c.ID)
			require.Equal(t, c, got)
		}
		_, ok := cat.Agent("triage", 2)
		require.False(t, ok)
		res := graph.DryRunWith(doc, cat, r.Options())
		require.False(t, res.Valid)
		require.Equal(t, graph.CodeMissingDependency, issueCodes(res.Issues)["/nodes/1/agent"], "%v", res.Issues)
	}
}

func TestResolverAsksAgentSourceForTheDocumentsAgents(t *testing.T) {
	t.Parallel()
	doc, err := graph.Decode([]byte(agentGraph))
	require.NoError(t, err)
	src := &fakeAgents{out: []graph.AgentContract{{Key: "triage", Revision: 2,
		OutputSchema: json.RawMessage(`{}`), Hash: "h"}}}
	r := &publication.Resolver{Agents: src}
	cat, err := r.Catalog(context.Background(), "t1", doc)
	require.NoError(t, err)
	require.Equal(t, "t1", src.tenant)
	require.Equal(t, []graph.AgentRef{{Key: "triage", Revision: 2}}, src.refs)
	_, ok := cat.Agent("triage", 2)
	require.True(t, ok)
	res := graph.DryRunWith(doc, cat, r.Options())
	require.NotContains(t, issueCodes(res.Issues), "/nodes/1/agent", "%v", res.Issues)

	src.err = errors.New("database down")
	_, err = r.Catalog(context.Background(), "t1", doc)
	require.ErrorContains(t, err, "database down", "a failed lookup is an error, never a silently missing agent")
}
