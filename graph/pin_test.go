package graph_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/graphyaml"
	"github.com/weftworks/weft/toolsets"
)

// The checksums below were computed by the code that published revisions
// before the canonical form was last reimplemented. A published revision's
// checksum, a contract's hash and an agent revision's hash are stored and
// compared later, so they must never change for the same content: if one of
// these tests fails, the canonical form changed, not the example.

// examplesCatalog pins the built-in action contracts and, for the toolsets
// example, two agent revisions with fixed hashes.
func examplesCatalog() *graph.StaticCatalog {
	obj := json.RawMessage(`{"type":"object"}`)
	return graph.NewStaticCatalog(catalog.BuiltinContracts(), []graph.AgentContract{
		{Key: "triage", Revision: 1, OutputSchema: obj, AllowedTools: []string{"core.echo@1", "core.fail@1", "workspace.notes.write@1"}, Hash: "7a1c"},
		{Key: "reporter", Revision: 1, OutputSchema: obj, AllowedTools: []string{"core.echo@1"}, RequiredPermissions: []string{"agents.run"}, Hash: "9b2d"},
	})
}

func compileFile(t *testing.T, path string) *graph.Compiled {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc *graph.Document
	if filepath.Ext(path) == ".yaml" {
		y, err := graphyaml.ParseYAML(data)
		require.NoError(t, err)
		_, issues := toolsets.Capture(y.Document, y.JSON, filepath.Dir(path))
		require.Empty(t, issues)
		doc = y.Document
	} else {
		doc, err = graph.Decode(data)
		require.NoError(t, err)
	}
	c, issues := graph.Compile(doc, examplesCatalog())
	require.Empty(t, issues)
	return c
}

func TestExampleChecksumsArePinned(t *testing.T) {
	for path, want := range map[string]string{
		"../examples/quickstart.json":        "83f87bc0094084c26f8f91a00261e5e86d3cc708a5e32ba956375fdf1980c91d",
		"testdata/example.json":              "83f87bc0094084c26f8f91a00261e5e86d3cc708a5e32ba956375fdf1980c91d",
		"../examples/toolsets/workflow.yaml": "ffc718236ad2753e25a4e7efdd863bb31b1555f459f0e870f571cd290cf9c39e", // since its toolset gained a summary (issue 20); 29aab39c… before
	} {
		c := compileFile(t, path)
		require.Equal(t, want, c.Checksum, path)
		require.NoError(t, c.VerifyChecksum())
	}
}

func TestQuickstartCreateChecksumIsPinned(t *testing.T) {
	data, err := os.ReadFile("../examples/quickstart-create.json")
	require.NoError(t, err)
	var req struct {
		Graph json.RawMessage `json:"graph"`
	}
	require.NoError(t, json.Unmarshal(data, &req))
	doc, issues := graph.DecodeStored(req.Graph)
	require.Empty(t, issues)
	c, issues := graph.Compile(doc, examplesCatalog())
	require.Empty(t, issues)
	require.Equal(t, "83f87bc0094084c26f8f91a00261e5e86d3cc708a5e32ba956375fdf1980c91d", c.Checksum)
}

func TestBuiltinContractHashesArePinned(t *testing.T) {
	want := map[string]string{
		"core.echo":             "0ce66f38c72fce4bb9ba81c36761fdeb9d1fbc3a777e997ca6cefdab91e07a9a",
		"core.sleep":            "8045d4abb4b5c5911e9b9f14ecff5c3730f0ef23a443ec3bcca4674d6c0ee9eb",
		"core.fail":             "b914baa880ba3faec545d16ccbcab4ca58ae22ce5c00d6f48f51df94171c81e5",
		"workspace.notes.write": "274a30b13d9842d4bd49b2d46dc9b7a9093e3a231a942af8fbf26d59ced18cec",
		"core.http.fetch":       "47dac25f0cb59dadc647fff0f7b0fcef5648344f72a160ea1bc81ab0178b61e3",
	}
	for _, c := range catalog.BuiltinContracts() {
		h, err := c.ContentHash()
		require.NoError(t, err)
		require.Equal(t, want[c.ID], h, c.ID)
	}
}

func TestCanonicalFormIsPinned(t *testing.T) {
	// Values like those hashed into event chains, idempotency input hashes
	// and agent revision hashes.
	agent, err := os.ReadFile("../examples/toolsets/agents/triage.json")
	require.NoError(t, err)
	var generic any
	require.NoError(t, json.Unmarshal(agent, &generic))
	for i, tc := range []struct {
		v    any
		want string
	}{
		{generic, "d583e4642bffb0f64ffd44103791e268b85d2152953d406a8fe8f704979bc741"},
		{map[string]any{"b": 2.0, "a": json.RawMessage(`{"y": 1.0, "x": "\u00e9<"}`), "é": 1e21, "😀": []any{nil, true, 1e-7, "\u2028"}, "\ue000": math.Copysign(0, -1)}, "81d6cdcdecd2e73c152509391d80f7786e7c760756c3382faa1dec8df8d35821"},
		{struct {
			Seq  int64           `json:"seq"`
			Type string          `json:"type"`
			Data json.RawMessage `json:"data,omitempty"`
			At   string          `json:"at"`
		}{7, "node.completed", json.RawMessage(`{"z":[1.50,2E3],"a":"<&>"}`), "2026-11-30T09:00:00Z"}, "ecee859184627637a11f39a023df3cd13fd6b80a5be446ee875b37c6f3389e02"},
	} {
		b, err := graph.Canonical(tc.v)
		require.NoError(t, err)
		require.Equal(t, tc.want, graph.SHA256Hex(b), "value %d: %s", i, b)
	}
}
