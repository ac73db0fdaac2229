package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// quickstartYAML is examples/quickstart.json in YAML.
const quickstartYAML = `schemaVersion: 1
schemas:
  Item:
    type: object
    required: [id]
    properties:
      id: {type: string}
nodes:
  - {id: in, kind: input, outputs: {out: Item}}
  - id: check
    kind: gate
    inputs: {in: Item}
    outputs: {pass: Item, fail: Item}
    language: cel/v1
    expression: "input.id != ''"
  - id: save
    kind: action
    inputs: {in: Item}
    outputs: {out: any}
    action: {id: workspace.notes.write, version: 1}
    mapping:
      title: {template: "Item {{ item.id }}", bindings: {item.id: /in/id}}
      body: {pointer: /in}
    retry: {maxAttempts: 3, initialIntervalMs: 1000, backoff: 2.0}
    timeoutMs: 30000
  - {id: out, kind: output, inputs: {in: any}}
edges:
  - {from: in.out, to: check.in}
  - {from: check.pass, to: save.in}
  - {from: save.out, to: out.in}
`

// sendYAML sends a YAML body.
func (h *wfHarness) sendYAML(method, path, body string) wfResponse {
	h.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/yaml")
	req.Header.Set("Authorization", "Bearer "+h.token)
	return h.serve(req)
}

func TestYAMLCreateSaveAndPublishMatchJSON(t *testing.T) {
	t.Parallel()
	h := newWFHarness(t)

	res := h.sendYAML(http.MethodPost, "/v1/workflows?key=from-yaml", quickstartYAML)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.EqualValues(t, 1, res.JSON(t)["draftRevision"])
	h.create("from-json", quickstart(t))

	// The draft is stored as JSON, the same document as the JSON one.
	res = h.do(http.MethodGet, "/v1/workflows/from-yaml", h.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var got struct {
		Draft struct {
			Graph json.RawMessage `json:"graph"`
		} `json:"draft"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &got))
	require.JSONEq(t, string(quickstart(t)), string(got.Draft.Graph))

	// Same graph, same checksum.
	sums := map[string]string{}
	for _, key := range []string{"from-yaml", "from-json"} {
		res = h.do(http.MethodPost, "/v1/workflows/"+key+"/publish", h.token, map[string]any{"expectedRevision": 1})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		sums[key] = res.JSON(t)["checksum"].(string)
	}
	require.Equal(t, sums["from-json"], sums["from-yaml"])

	// A YAML draft save names the revision it replaces in the query.
	edited := strings.Replace(quickstartYAML, "timeoutMs: 30000", "timeoutMs: 20000", 1)
	res = h.sendYAML(http.MethodPut, "/v1/workflows/from-yaml/draft?expectedRevision=1", edited)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.EqualValues(t, 2, res.JSON(t)["draftRevision"])
	res = h.sendYAML(http.MethodPut, "/v1/workflows/from-yaml/draft?expectedRevision=1", edited)
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	require.Equal(t, "REVISION_CONFLICT", res.Code(t))
}

func TestYAMLRefusals(t *testing.T) {
	t.Parallel()
	h := newWFHarness(t)
	h.create("exists", quickstart(t))
	ts := func(tools string) string {
		return "toolsets:\n  ops: {tools: [" + tools + "], skill: Be brief., summary: Echo things.}\n"
	}
	agentYAML := strings.Replace(quickstartYAML, "  - {id: out, kind: output",
		"  - {id: think, kind: agent, tools: ops, agent: {key: triage, revision: 1}, inputs: {in: Item}, outputs: {out: any}}\n  - {id: out, kind: output", 1)
	agentYAML = strings.Replace(agentYAML, "edges:\n", "edges:\n  - {from: check.fail, to: think.in}\n", 1)

	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
		line                     int
		path2                    string // details.path or the first issue's path
	}{
		{"unknown field with position", "POST", "/v1/workflows?key=a", strings.Replace(quickstartYAML, "    timeoutMs: 30000\n", "    timeoutMs: 30000\n    shell: rm\n", 1), 400, "INVALID_DOCUMENT", 26, "/graph/nodes/2/shell"},
		{"wrong type with position", "POST", "/v1/workflows?key=a", strings.Replace(quickstartYAML, "timeoutMs: 30000", "timeoutMs: soon", 1), 400, "INVALID_DOCUMENT", 25, "/graph/nodes/2/timeoutMs"},
		{"syntax error with position", "POST", "/v1/workflows?key=a", "schemaVersion: 1\nnodes: [\n", 400, "INVALID_YAML", 2, ""},
		{"duplicate key", "POST", "/v1/workflows?key=a", "schemaVersion: 1\nnodes: []\nnodes: []\n", 400, "INVALID_YAML", 3, ""},
		{"two documents", "POST", "/v1/workflows?key=a", "schemaVersion: 1\n---\nschemaVersion: 1\n", 400, "INVALID_YAML", 2, ""},
		{"no key", "POST", "/v1/workflows", quickstartYAML, 400, "INVALID_REQUEST", 0, ""},
		{"key twice", "POST", "/v1/workflows?key=a&key=b", quickstartYAML, 400, "INVALID_REQUEST", 0, ""},
		{"other query", "POST", "/v1/workflows?key=a&force=1", quickstartYAML, 400, "INVALID_REQUEST", 0, ""},
		{"bad key", "POST", "/v1/workflows?key=Nope", quickstartYAML, 400, "INVALID_KEY", 0, ""},
		{"existing key", "POST", "/v1/workflows?key=exists", quickstartYAML, 409, "ALREADY_EXISTS", 0, ""},
		{"draft without revision", "PUT", "/v1/workflows/exists/draft", quickstartYAML, 400, "INVALID_REQUEST", 0, ""},
		{"draft revision not a number", "PUT", "/v1/workflows/exists/draft?expectedRevision=1.0", quickstartYAML, 400, "INVALID_REQUEST", 0, ""},
		{"draft revision zero", "PUT", "/v1/workflows/exists/draft?expectedRevision=0", quickstartYAML, 400, "INVALID_REQUEST", 0, ""},
		{"draft missing workflow", "PUT", "/v1/workflows/nope/draft?expectedRevision=1", quickstartYAML, 404, "NOT_FOUND", 0, ""},
		{"too large", "POST", "/v1/workflows?key=a", "schemaVersion: 1\ntools: " + strings.Repeat("a", 1<<20) + "\n", 413, "DOCUMENT_TOO_LARGE", 0, ""},
		// Toolsets: the server never reads a path; a tools value must name
		// a toolset in the document.
		{"uncaptured default path", "POST", "/v1/workflows?key=a", quickstartYAML + "tools: ./tools/shared\n", 422, "INVALID_TOOLS_PATH", 0, "/tools"},
		{"file URL default", "POST", "/v1/workflows?key=a", quickstartYAML + "tools: file:///etc/tools\n", 422, "INVALID_TOOLS_PATH", 0, "/tools"},
		{"empty default", "POST", "/v1/workflows?key=a", quickstartYAML + "tools: ''\n", 422, "INVALID_TOOLS_PATH", 0, "/tools"},
		{"uncaptured node path", "POST", "/v1/workflows?key=a", strings.Replace(agentYAML, "tools: ops", "tools: ./tools/report", 1) + ts("core.echo@1"), 422, "INVALID_TOOLS_PATH", 0, "/nodes/3/tools"},
		{"unknown action in toolset", "POST", "/v1/workflows?key=a", agentYAML + ts("core.echo@1, core.nope@1"), 422, "INVALID_TOOLS_PATH", 0, "/toolsets/ops/tools/1"},
		{"external action in toolset", "POST", "/v1/workflows?key=a", agentYAML + ts("core.http.fetch@1"), 422, "INVALID_TOOLS_PATH", 0, "/toolsets/ops/tools/0"},
		{"blank skill", "POST", "/v1/workflows?key=a", agentYAML + "toolsets:\n  ops: {tools: [core.echo@1], skill: ' ', summary: x}\n", 422, "INVALID_TOOLS_PATH", 0, "/toolsets/ops/skill"},
		{"no summary", "POST", "/v1/workflows?key=a", agentYAML + "toolsets:\n  ops: {tools: [core.echo@1], skill: Be brief.}\n", 422, "MISSING_TOOLSET_SUMMARY", 0, "/toolsets/ops/summary"},
		{"multi-line summary", "POST", "/v1/workflows?key=a", agentYAML + "toolsets:\n  ops: {tools: [core.echo@1], skill: Be brief., summary: \"a\\nb\"}\n", 422, "INVALID_TOOLSET_SUMMARY", 0, "/toolsets/ops/summary"},
		{"over-long summary", "POST", "/v1/workflows?key=a", agentYAML + "toolsets:\n  ops: {tools: [core.echo@1], skill: Be brief., summary: " + strings.Repeat("s", 601) + "}\n", 422, "INVALID_TOOLSET_SUMMARY", 0, "/toolsets/ops/summary"},
		{"draft with uncaptured path", "PUT", "/v1/workflows/exists/draft?expectedRevision=1", quickstartYAML + "tools: ../x\n", 422, "INVALID_TOOLS_PATH", 0, "/tools"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := h.sendYAML(c.method, c.path, c.body)
			require.Equal(t, c.status, res.Status, "%.400s", res.Body)
			require.Equal(t, c.code, res.Code(t), "%.400s", res.Body)
			e := res.JSON(t)["error"].(map[string]any)
			details, _ := e["details"].(map[string]any)
			if c.line > 0 {
				require.EqualValues(t, c.line, details["line"], "%s", res.Body)
				require.NotZero(t, details["column"], "%s", res.Body)
				require.Contains(t, e["message"], "line ")
			}
			if c.path2 != "" {
				if issues, ok := details["issues"].([]any); ok {
					require.Equal(t, c.path2, issues[0].(map[string]any)["path"], "%s", res.Body)
				} else {
					require.Equal(t, c.path2, details["path"], "%s", res.Body)
				}
			}
		})
	}

	// The same toolset rules hold for JSON documents.
	bad := strings.Replace(string(quickstart(t)), `"schemaVersion": 1,`, `"schemaVersion": 1, "tools": "./tools/shared",`, 1)
	require.NotEqual(t, string(quickstart(t)), bad)
	res := h.do(http.MethodPost, "/v1/workflows", h.token, map[string]any{"key": "json-tools", "graph": json.RawMessage(bad)})
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	require.Equal(t, "INVALID_TOOLS_PATH", res.Code(t))

	// A JSON body never takes its key from the query.
	res = h.do(http.MethodPost, "/v1/workflows?key=x", h.token, map[string]any{"key": "y", "graph": quickstart(t)})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)

	// A captured toolset saves fine; other graph issues may stay in a draft.
	ok := agentYAML + ts("core.echo@1")
	res = h.sendYAML(http.MethodPost, "/v1/workflows?key=with-tools", ok)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
}

func TestYAMLExportReadsBackToTheSameChecksum(t *testing.T) {
	t.Parallel()
	h := newWFHarness(t)
	h.create("src", quickstart(t))
	res := h.do(http.MethodPost, "/v1/workflows/src/publish", h.token, map[string]any{"expectedRevision": 1})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	want := res.JSON(t)["checksum"].(string)

	get := func(path, accept string) wfResponse {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer "+h.token)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		return h.serve(req)
	}
	// The draft by ?format=yaml, the revision by Accept; JSON stays the default.
	draft := get("/v1/workflows/src/draft?format=yaml", "")
	require.Equal(t, http.StatusOK, draft.Status, "%s", draft.Body)
	require.Equal(t, "application/yaml; charset=utf-8", draft.Header.Get("Content-Type"))
	require.Equal(t, "1", draft.Header.Get("Weft-Draft-Revision"))
	require.True(t, strings.HasPrefix(string(draft.Body), "schemaVersion: 1\n"), "%s", draft.Body)
	rev := get("/v1/workflows/src/revisions/1", "application/json;q=0.5, application/yaml")
	require.Equal(t, http.StatusOK, rev.Status, "%s", rev.Body)
	require.Equal(t, want, rev.Header.Get("Weft-Checksum"))
	require.Equal(t, "1", rev.Header.Get("Weft-Revision"))
	require.Equal(t, "application/json", get("/v1/workflows/src/revisions/1", "application/yaml;q=0.1, */*").Header.Get("Content-Type"))
	asJSON := get("/v1/workflows/src/draft?revision=1", "")
	require.Equal(t, http.StatusOK, asJSON.Status, "%s", asJSON.Body)
	require.EqualValues(t, 1, asJSON.JSON(t)["revision"])

	// Each export, pushed back as YAML and published, has the same checksum.
	for i, body := range [][]byte{draft.Body, rev.Body} {
		key := []string{"from-draft", "from-revision"}[i]
		res := h.sendYAML(http.MethodPost, "/v1/workflows?key="+key, string(body))
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		res = h.do(http.MethodPost, "/v1/workflows/"+key+"/publish", h.token, map[string]any{"expectedRevision": 1})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		require.Equal(t, want, res.JSON(t)["checksum"], "%s", body)
	}

	for path, code := range map[string]string{
		"/v1/workflows/src/draft?revision=2":       "NOT_FOUND",
		"/v1/workflows/src/draft?revision=0":       "INVALID_REQUEST",
		"/v1/workflows/src/draft?format=xml":       "INVALID_REQUEST",
		"/v1/workflows/src/draft?rev=1":            "INVALID_REQUEST",
		"/v1/workflows/src/revisions/1?format=xml": "INVALID_REQUEST",
		"/v1/workflows/nope/draft?format=yaml":     "NOT_FOUND",
	} {
		require.Equal(t, code, get(path, "").Code(t), path)
	}
}
