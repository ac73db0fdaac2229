package graphyaml

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/graph"
)

// exampleJSON is the SPEC §2 example, the graph.graph package's test document.
func exampleJSON(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("../graph/testdata/example.json")
	require.NoError(t, err)
	return b
}

func exampleDoc(t testing.TB) *graph.Document {
	t.Helper()
	doc, err := graph.Decode(exampleJSON(t))
	require.NoError(t, err)
	return doc
}

// notesCatalog holds the one action the example documents use.
func notesCatalog() *graph.StaticCatalog {
	return graph.NewStaticCatalog([]graph.ActionContract{{
		ID: "workspace.notes.write", Version: 1, Risk: graph.RiskWorkspaceWrite,
		InputSchema:         json.RawMessage(`{"type":"object","required":["title","body"]}`),
		OutputSchema:        json.RawMessage(`{"type":"object"}`),
		RequiredPermissions: []string{"notes.write"}, TimeoutMs: 30000, Idempotency: "ledger",
	}}, nil)
}
