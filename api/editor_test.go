package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/variables"
)

// A layout is kept beside the drafts: saving it creates no draft revision,
// changes no checksum, needs no expectedRevision, and is per tenant.
func TestLayoutIsBesideTheDraft(t *testing.T) {
	t.Parallel()
	h := newWFHarness(t)
	h.create("laid", quickstart(t))
	before := h.do(http.MethodPost, "/v1/workflows/laid/dry-run", h.token, nil).JSON(t)["checksum"]

	res := h.do(http.MethodGet, "/v1/workflows/laid/layout", h.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.JSONEq(t, `{"key":"laid","positions":{},"updatedBy":null,"updatedAt":null}`, string(res.Body))

	res = h.do(http.MethodPut, "/v1/workflows/laid/layout", h.token, `{"positions":{"in":{"x":10,"y":-20.5},"check":{"x":300,"y":0}}}`)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	got := res.JSON(t)
	require.Equal(t, "alice", got["updatedBy"])
	require.NotNil(t, got["updatedAt"])
	res = h.do(http.MethodGet, "/v1/workflows/laid/layout", h.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, map[string]any{"in": map[string]any{"x": 10.0, "y": -20.5}, "check": map[string]any{"x": 300.0, "y": 0.0}},
		res.JSON(t)["positions"])

	// Replaced whole.
	res = h.do(http.MethodPut, "/v1/workflows/laid/layout", h.token, `{"positions":{"out":{"x":1,"y":2}}}`)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, map[string]any{"out": map[string]any{"x": 1.0, "y": 2.0}}, h.do(http.MethodGet, "/v1/workflows/laid/layout", h.token, nil).JSON(t)["positions"])

	// No draft revision, the same checksum.
	w := h.do(http.MethodGet, "/v1/workflows/laid", h.token, nil).JSON(t)
	require.EqualValues(t, 1, w["draftRevision"])
	require.Equal(t, before, h.do(http.MethodPost, "/v1/workflows/laid/dry-run", h.token, nil).JSON(t)["checksum"])

	// Another tenant sees nothing and changes nothing.
	other := h.mint("t2", "mallory", auth.ScopeWorkflowsRead, auth.ScopeWorkflowsWrite)
	res = h.do(http.MethodGet, "/v1/workflows/laid/layout", other, nil)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	res = h.do(http.MethodPut, "/v1/workflows/laid/layout", other, `{"positions":{}}`)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	require.Equal(t, map[string]any{"out": map[string]any{"x": 1.0, "y": 2.0}}, h.do(http.MethodGet, "/v1/workflows/laid/layout", h.token, nil).JSON(t)["positions"])

	// Scopes: reading needs workflows.read, saving workflows.write.
	readOnly := h.mint("t1", "bob", auth.ScopeWorkflowsRead)
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/v1/workflows/laid/layout", readOnly, nil).Status)
	res = h.do(http.MethodPut, "/v1/workflows/laid/layout", readOnly, `{"positions":{}}`)
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	require.Equal(t, http.StatusUnauthorized, h.do(http.MethodGet, "/v1/workflows/laid/layout", "", nil).Status)
}

// A layout body is read strictly; bad ones are stable 4xx and change nothing.
func TestLayoutBadBodies(t *testing.T) {
	t.Parallel()
	h := newWFHarness(t)
	h.create("strict", quickstart(t))
	many := map[string]any{}
	for i := range 201 {
		many[fmt.Sprintf("n%d", i)] = map[string]any{"x": 0, "y": 0}
	}
	cases := []struct {
		name  string
		body  any
		code  string
		field string
	}{
		{"not JSON", `{"positions":`, "INVALID_JSON", ""},
		{"missing positions", `{}`, "INVALID_REQUEST", "positions"},
		{"unknown field", `{"positions":{},"graph":{}}`, "INVALID_REQUEST", "graph"},
		{"case-folded field", `{"Positions":{}}`, "INVALID_REQUEST", "Positions"},
		{"repeated field", `{"positions":{},"positions":{}}`, "INVALID_REQUEST", "positions"},
		{"missing y", `{"positions":{"a":{"x":1}}}`, "INVALID_REQUEST", "positions.a.y"},
		{"string x", `{"positions":{"a":{"x":"1","y":2}}}`, "INVALID_REQUEST", "positions.a.x"},
		{"extra member", `{"positions":{"a":{"x":1,"y":2,"z":3}}}`, "INVALID_REQUEST", "positions.a.z"},
		{"out of bounds", `{"positions":{"a":{"x":1e9,"y":2}}}`, "INVALID_REQUEST", "positions.a"},
		{"empty node id", `{"positions":{"":{"x":1,"y":2}}}`, "INVALID_REQUEST", "positions"},
		{"too many", map[string]any{"positions": many}, "INVALID_REQUEST", "positions"},
	}
	for _, c := range cases {
		res := h.do(http.MethodPut, "/v1/workflows/strict/layout", h.token, c.body)
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", c.name, res.Body)
		e := res.JSON(t)["error"].(map[string]any)
		require.Equal(t, c.code, e["code"], "%s: %s", c.name, res.Body)
		if c.field != "" {
			require.Equal(t, c.field, e["details"].(map[string]any)["field"], "%s: %s", c.name, res.Body)
		}
	}
	res := h.do(http.MethodPut, "/v1/workflows/missing/layout", h.token, `{"positions":{}}`)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	res = h.do(http.MethodPut, "/v1/workflows/Bad_Key/layout", h.token, `{"positions":{}}`)
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Equal(t, map[string]any{}, h.do(http.MethodGet, "/v1/workflows/strict/layout", h.token, nil).JSON(t)["positions"])
}

// POST /v1/graphs/check is the dry-run of an unsaved graph: an edge between
// incompatible ports is INCOMPATIBLE_PORT at the edge, a variable the
// caller may not read is UNKNOWN_VARIABLE at the template, and nothing is
// stored.
func TestCheckGraphIsTheDryRunOfAnUnsavedGraph(t *testing.T) {
	t.Parallel()
	h := newVarHarness(t, variables.NoAgents{})
	tok := h.tokenWith(auth.ScopeWorkflowsRead)

	r := h.do(http.MethodPost, "/v1/graphs/check", tok, map[string]any{"graph": json.RawMessage(quickstart(t))})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	require.Equal(t, true, r.Body["valid"], r.Raw)
	require.Len(t, r.Body["checksum"], 64)
	require.Equal(t, []any{"in", "check", "save", "out"}, r.Body["order"])

	incompatible := strings.Replace(string(quickstart(t)), `{ "id": "out", "kind": "output", "inputs": { "in": "any" } }`,
		`{ "id": "out", "kind": "output", "inputs": { "in": "Count" } }`, 1)
	incompatible = strings.Replace(incompatible, `"schemas": {`, `"schemas": { "Count": { "type": "integer" },`, 1)
	incompatible = strings.Replace(incompatible, `{ "from": "save.out", "to": "out.in" }`, `{ "from": "check.fail", "to": "out.in" }`, 1)
	r = h.do(http.MethodPost, "/v1/graphs/check", tok, map[string]any{"graph": json.RawMessage(incompatible)})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	require.Equal(t, false, r.Body["valid"], r.Raw)
	found := false
	for _, is := range r.Body["issues"].([]any) {
		m := is.(map[string]any)
		if m["code"] == "INCOMPATIBLE_PORT" {
			require.Equal(t, "/edges/2", m["path"], r.Raw)
			found = true
		}
	}
	require.True(t, found, "no INCOMPATIBLE_PORT: %s", r.Raw)

	forbidden := strings.Replace(string(quickstart(t)), `"Item {{ item.id }}"`, `"{{ agent.name }} {{ item.id }}"`, 1)
	forbidden = strings.Replace(forbidden, `{ "item.id": "/in/id" }`, `{ "item.id": "/in/id", "agentId": "/in/id" }`, 1)
	r = h.do(http.MethodPost, "/v1/graphs/check", tok, map[string]any{"graph": json.RawMessage(forbidden)})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	issues := r.Body["issues"].([]any)
	require.Len(t, issues, 1, r.Raw)
	require.Equal(t, "UNKNOWN_VARIABLE", issues[0].(map[string]any)["code"])
	require.Equal(t, "/nodes/2/mapping/title/template", issues[0].(map[string]any)["path"])
	require.Contains(t, issues[0].(map[string]any)["message"], `needs scope "agents.read"`)
	// With the scope the same graph is valid.
	r = h.do(http.MethodPost, "/v1/graphs/check", h.tokenWith(auth.ScopeWorkflowsRead, auth.ScopeAgentsRead),
		map[string]any{"graph": json.RawMessage(forbidden)})
	require.Equal(t, true, r.Body["valid"], r.Raw)

	// A body that is not {graph} is refused like a draft's.
	r = h.do(http.MethodPost, "/v1/graphs/check", tok, json.RawMessage(quickstart(t)))
	require.Equal(t, http.StatusBadRequest, r.Status, r.Raw)
	r = h.do(http.MethodPost, "/v1/graphs/check", tok, map[string]any{"graph": map[string]any{"schemaVersion": 1, "nodes": []any{}, "edges": []any{}, "extra": 1}})
	require.Equal(t, http.StatusBadRequest, r.Status, r.Raw)
	require.Equal(t, http.StatusForbidden, h.do(http.MethodPost, "/v1/graphs/check", h.tokenWith(auth.ScopeRunsRead),
		map[string]any{"graph": json.RawMessage(quickstart(t))}).Status)
}
