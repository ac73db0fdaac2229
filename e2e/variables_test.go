package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/execution"
)

// titleTemplate reads the request context (tenant and user display names),
// the run (workflow key, run id) and one explicitly bound value (item.id).
const titleTemplate = "{{ context.tenantName }} / {{ context.user.displayName }} / {{ workflow.key }} / item {{ item.id }} / run {{ run.id }}"

// variablesGraph writes one note whose title is titleTemplate.
var variablesGraph = `{
  "schemaVersion": 1,
  "schemas": {"Item": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}},
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "Item"}},
    {"id": "save", "kind": "action", "inputs": {"in": "Item"}, "outputs": {"out": "any"},
     "action": {"id": "workspace.notes.write", "version": 1},
     "mapping": {
       "title": {"template": ` + jsonString(titleTemplate) + `, "bindings": {"item.id": "/in/id"}},
       "body": {"pointer": "/in"}
     }},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "save.in"}, {"from": "save.out", "to": "out.in"}]
}`

func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestVariablesResolveInRunAndStayRawInRevision(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const tenantName, displayName = "Acme Corp", "Ada Lovelace"
	tok, err := e.keys.Mint(auth.Principal{Tenant: e.tenant, Sub: "ada", Name: displayName, TenantName: tenantName,
		Scopes: []string{auth.ScopeWorkflowsRead, auth.ScopeWorkflowsWrite, auth.ScopeWorkflowsPublish,
			auth.ScopeRunsExecute, auth.ScopeRunsRead, auth.ScopeNotesWrite}}, time.Hour)
	require.NoError(t, err)
	e.token = tok // every helper (publish, run, wait, events) acts as this principal
	e.startWorker()

	const key = "titled"
	require.Equal(t, 1, e.publish(key, variablesGraph))
	id := e.run(key, map[string]any{"id": "42"})
	v := e.wait(id, 30*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(id))

	// The note's title is the fully resolved text.
	want := tenantName + " / " + displayName + " / " + key + " / item 42 / run " + id
	res := e.do(http.MethodGet, "/v1/notes", e.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	notes := res.JSON(t)["notes"].([]any)
	require.Len(t, notes, 1)
	note := notes[0].(map[string]any)
	require.Equal(t, want, note["title"])
	require.Equal(t, id, note["runId"])
	require.Equal(t, "save", note["nodeId"])
	require.Equal(t, map[string]any{"id": "42"}, note["body"])

	// The published revision keeps the raw template (nodes are in compiled
	// order there, so find the node by id).
	res = e.do(http.MethodGet, "/v1/workflows/"+key+"/revisions/1", e.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var rev struct {
		Graph struct {
			Nodes []struct {
				ID      string `json:"id"`
				Mapping map[string]struct {
					Template *string           `json:"template"`
					Bindings map[string]string `json:"bindings"`
				} `json:"mapping"`
			} `json:"nodes"`
		} `json:"graph"`
		NodePermissions map[string][]string `json:"nodePermissions"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &rev))
	found := false
	for _, n := range rev.Graph.Nodes {
		if n.ID != "save" {
			continue
		}
		found = true
		title := n.Mapping["title"]
		require.NotNil(t, title.Template)
		require.Equal(t, titleTemplate, *title.Template)
		require.Equal(t, map[string]string{"item.id": "/in/id"}, title.Bindings)
	}
	require.True(t, found, "revision 1 has no node save: %s", res.Body)
	require.Equal(t, []string{auth.ScopeNotesWrite}, rev.NodePermissions["save"], "context and run variables need no scope")
	require.NotContains(t, string(res.Body), tenantName)
	require.NotContains(t, string(res.Body), displayName)

	// So does the stored draft.
	res = e.do(http.MethodGet, "/v1/workflows/"+key, e.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var wf struct {
		Draft struct {
			Graph struct {
				Nodes []struct {
					ID      string                     `json:"id"`
					Mapping map[string]json.RawMessage `json:"mapping"`
				} `json:"nodes"`
			} `json:"graph"`
		} `json:"draft"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &wf))
	require.Len(t, wf.Draft.Graph.Nodes, 3)
	require.Equal(t, "save", wf.Draft.Graph.Nodes[1].ID)
	require.JSONEq(t, `{"template": `+jsonString(titleTemplate)+`, "bindings": {"item.id": "/in/id"}}`,
		string(wf.Draft.Graph.Nodes[1].Mapping["title"]))

	// The events hold the action's completion, whose output is the note id
	// only: neither the raw template nor anything resolved leaks into them.
	evs := e.events(id)
	completed := false
	for _, ev := range evs {
		require.NotContains(t, string(ev.Data), "{{", "event %d %s", ev.Seq, ev.Type)
		if ev.Type == execution.EventNodeCompleted && ev.NodeID == "save" {
			completed = true
			var d execution.EventData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			require.JSONEq(t, `{"noteId": `+jsonString(note["noteId"].(string))+`}`, string(d.Output))
		}
	}
	require.True(t, completed, "no node.completed save: %v", e.eventTypes(id))
	e.checkChain(id)

	// An unknown variable is refused at publication, at the template's path.
	bad := strings.Replace(variablesGraph, "{{ workflow.key }}", "{{ no.such }}", 1)
	require.NotEqual(t, variablesGraph, bad)
	res = e.do(http.MethodPost, "/v1/workflows", e.token, map[string]any{"key": "unknown-var", "graph": json.RawMessage(bad)})
	require.Equal(t, http.StatusCreated, res.Status, "a draft may hold issues: %s", res.Body)
	res = e.do(http.MethodPost, "/v1/workflows/unknown-var/publish", e.token, map[string]any{"expectedRevision": 1})
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	require.Equal(t, "INVALID_GRAPH", res.Code(t))
	issues := res.JSON(t)["error"].(map[string]any)["details"].(map[string]any)["issues"].([]any)
	require.Len(t, issues, 1, "%s", res.Body)
	issue := issues[0].(map[string]any)
	require.Equal(t, "UNKNOWN_VARIABLE", issue["code"])
	require.Equal(t, "/nodes/1/mapping/title/template", issue["path"])
	require.Contains(t, issue["message"], "no.such")
	res = e.do(http.MethodGet, "/v1/workflows/unknown-var", e.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Nil(t, res.JSON(t)["published"], "nothing was published")
}
