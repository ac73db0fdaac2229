package graph

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// testCatalog holds the built-in action contracts (SPEC §7) and two agent
// revisions, one archived.
func testCatalog() *StaticCatalog {
	obj := json.RawMessage(`{"type":"object"}`)
	return NewStaticCatalog([]ActionContract{
		{ID: "core.echo", Version: 1, Risk: RiskRead, InputSchema: json.RawMessage(`true`), OutputSchema: json.RawMessage(`true`),
			RequiredPermissions: []string{}, TimeoutMs: 30000, Idempotency: "none"},
		{ID: "core.sleep", Version: 1, Risk: RiskRead,
			InputSchema:  json.RawMessage(`{"type":"object","required":["ms"],"properties":{"ms":{"type":"integer"}}}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"sleptMs":{"type":"integer"}}}`),
			TimeoutMs:    600000, Idempotency: "none"},
		{ID: "core.fail", Version: 1, Risk: RiskRead, InputSchema: obj, OutputSchema: json.RawMessage(`true`), TimeoutMs: 30000, Idempotency: "none"},
		{ID: "workspace.notes.write", Version: 1, Risk: RiskWorkspaceWrite,
			InputSchema:         json.RawMessage(`{"type":"object","required":["title","body"]}`),
			OutputSchema:        obj,
			RequiredPermissions: []string{"notes.write"}, TimeoutMs: 30000, Idempotency: "ledger"},
		{ID: "core.http.fetch", Version: 1, Risk: RiskExternal, InputSchema: obj, OutputSchema: obj, TimeoutMs: 30000, Idempotency: "none"},
	}, []AgentContract{
		{Key: "triage", Revision: 2, OutputSchema: obj, AllowedTools: []string{"core.echo@1"},
			RequiredPermissions: []string{"agents.run"}, Hash: "feedface"},
		{Key: "old", Revision: 1, Archived: true, Hash: "deadbeef"},
	})
}

func exampleJSON(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/example.json")
	require.NoError(t, err)
	return b
}

func exampleDoc(t testing.TB) *Document {
	t.Helper()
	doc, err := Decode(exampleJSON(t))
	require.NoError(t, err)
	return doc
}
