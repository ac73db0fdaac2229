package starter

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/fixtures"
	"github.com/weftworks/weft/graph"
)

// A replay's fixtures, derived from a recording, may hold outputs of
// claim-check sizes: only Request.DerivedFixtures lifts the bound to
// fixtures.MaxRecordedBytes; a client's request stays at fixtures.MaxBytes.
func TestDerivedFixturesTakeTheRecordedBound(t *testing.T) {
	c := &graph.Compiled{Document: graph.Document{Nodes: []graph.Node{
		{ID: "a", Kind: graph.KindAction}, {ID: "b", Kind: graph.KindAgent},
	}}}
	nodes := map[string]fixtures.NodeResult{}
	for _, id := range []string{"a", "b"} {
		nodes[id] = fixtures.NodeResult{Status: "succeeded", Port: "out",
			Output: json.RawMessage(`"` + strings.Repeat("z", 200<<10) + `"`)}
	}
	set, unrecorded, err := fixtures.FromRecording(&c.Document, nodes, nil)
	require.NoError(t, err)
	require.Empty(t, unrecorded)
	raw, err := json.Marshal(set)
	require.NoError(t, err)

	_, err = checkFixtures(c, raw, fixtureLimit(Request{Fixtures: raw}))
	require.Equal(t, CodeInvalidFixtures, failure.CodeOf(err), "a client's fixtures over MaxBytes: %v", err)
	stored, err := checkFixtures(c, raw, fixtureLimit(Request{Fixtures: raw, DerivedFixtures: true}))
	require.NoError(t, err)
	require.JSONEq(t, string(raw), string(stored))

	// The 20 KiB case fits either bound.
	small, err := json.Marshal(fixtures.Set{"a": {{Output: json.RawMessage(`"` + strings.Repeat("z", 20<<10) + `"`)}}})
	require.NoError(t, err)
	_, err = checkFixtures(c, small, fixtureLimit(Request{Fixtures: small}))
	require.NoError(t, err)
}
