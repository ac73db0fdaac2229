package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/internal/testinfra/inproc"
	"github.com/weftworks/weft/store"
)

// newAgentHarness is the API with its defaults: the store resolves agents,
// published actions and agent.name. The token holds every scope of t1.
func newAgentHarness(t *testing.T) *wfHarness {
	t.Helper()
	st := testinfra.NewStore(t)
	keys := testinfra.Keys(t, "agents-test-secret-0123456789")
	h := &wfHarness{t: t, st: st, keys: keys,
		e: inproc.API(t, api.Deps{Store: st, Keys: keys, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})}
	h.token = h.mint("t1", "alice", auth.AllScopes...)
	return h
}

func definition(extra string) json.RawMessage {
	return json.RawMessage(`{"instructions":"Triage for {{ context.user.displayName }} ({{ agent.name }}).",
		"outputSchema":{"type":"object","required":["summary"],"properties":{"summary":{"type":"string"}}}` + extra + `}`)
}

func (h *wfHarness) createAgent(key, extra string) {
	h.t.Helper()
	res := h.do(http.MethodPost, "/v1/agents", h.token, map[string]any{"key": key, "name": "Agent " + key, "definition": definition(extra)})
	require.Equal(h.t, http.StatusCreated, res.Status, "%s", res.Body)
}

func TestAgentsAPI(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)

	res := h.do(http.MethodPost, "/v1/agents", h.token, map[string]any{"key": "triage", "name": "Triage", "description": "Sorts tickets",
		"definition": definition(`,"allowedTools":["core.echo@1","workspace.notes.write@1"],"maxTurns":5,
			"sim":{"output":{"summary":"ok"},"toolCalls":[{"tool":"workspace.notes.write@1","input":{"title":"t","body":1}}]}`)})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Equal(t, "/v1/agents/triage", res.Header.Get("Location"))
	body := res.JSON(t)
	require.Equal(t, float64(1), body["latestRevision"])
	rev := body["revision"].(map[string]any)
	def := rev["definition"].(map[string]any)
	require.Equal(t, "sim", def["provider"], "defaults are filled in")
	require.Equal(t, float64(5), def["maxTurns"])
	require.Contains(t, def["instructions"], "{{ agent.name }}", "instructions are stored raw")
	hash1 := rev["hash"].(string)
	require.Len(t, hash1, 64)

	require.Equal(t, http.StatusConflict, h.do(http.MethodPost, "/v1/agents", h.token,
		map[string]any{"key": "triage", "name": "x", "definition": definition("")}).Status)

	// Revisions: immutable, numbered, optimistic.
	res = h.do(http.MethodPost, "/v1/agents/triage/revisions", h.token, map[string]any{"expectedRevision": 1, "name": "Triage v2",
		"definition": definition(`,"maxTurns":3`)})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Equal(t, "/v1/agents/triage/revisions/2", res.Header.Get("Location"))
	require.Equal(t, "Triage v2", res.JSON(t)["name"])
	res = h.do(http.MethodPost, "/v1/agents/triage/revisions", h.token, map[string]any{"expectedRevision": 1, "definition": definition("")})
	require.Equal(t, http.StatusConflict, res.Status)
	require.Equal(t, "REVISION_CONFLICT", res.Code(t))
	res = h.do(http.MethodGet, "/v1/agents/triage/revisions/1", h.token, nil)
	require.Equal(t, http.StatusOK, res.Status)
	require.Equal(t, hash1, res.JSON(t)["hash"])
	res = h.do(http.MethodGet, "/v1/agents/triage", h.token, nil)
	require.Equal(t, http.StatusOK, res.Status)
	require.Equal(t, float64(2), res.JSON(t)["revision"].(map[string]any)["revision"])
	require.Len(t, res.JSON(t)["revisions"], 2)

	// Refusals.
	res = h.do(http.MethodPost, "/v1/agents", h.token, map[string]any{"key": "bad", "name": "Bad",
		"definition": json.RawMessage(`{"instructions":"{{ nope }}","maxTurns":99,"allowedTools":["core.http.fetch@1","x"],"provider":"gpt"}`)})
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	require.Equal(t, "INVALID_AGENT", res.Code(t))
	issues := res.JSON(t)["error"].(map[string]any)["details"].(map[string]any)["issues"].([]any)
	codes := map[string]string{}
	for _, i := range issues {
		m := i.(map[string]any)
		codes[m["path"].(string)] = m["code"].(string)
	}
	require.Equal(t, map[string]string{"/definition/instructions": "UNKNOWN_VARIABLE", "/definition/maxTurns": "LIMIT_EXCEEDED",
		"/definition/allowedTools/0": "UNSUPPORTED_ACTION_RISK", "/definition/allowedTools/1": "INVALID_TOOL",
		"/definition/provider": "INVALID_FIELD"}, codes)
	res = h.do(http.MethodPost, "/v1/agents", h.token, map[string]any{"key": "bad", "name": "Bad", "definition": json.RawMessage(`{"instructions":"x","tools":[]}`)})
	require.Equal(t, http.StatusBadRequest, res.Status)
	require.Equal(t, "INVALID_REQUEST", res.Code(t))
	res = h.do(http.MethodPost, "/v1/agents", h.token, map[string]any{"key": "Bad Key", "name": "x", "definition": definition("")})
	require.Equal(t, "INVALID_KEY", res.Code(t))
	res = h.do(http.MethodPost, "/v1/agents", h.token, map[string]any{"key": "nameless", "definition": definition("")})
	require.Equal(t, http.StatusBadRequest, res.Status)

	// Scopes and tenancy.
	reader := h.mint("t1", "bob", auth.ScopeAgentsRead)
	res = h.do(http.MethodPost, "/v1/agents/triage/archive", reader, nil)
	require.Equal(t, http.StatusForbidden, res.Status)
	require.Equal(t, "MISSING_SCOPE", res.Code(t))
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/v1/agents", reader, nil).Status)
	require.Equal(t, http.StatusForbidden, h.do(http.MethodGet, "/v1/agents", h.mint("t1", "eve", auth.ScopeWorkflowsRead), nil).Status)
	other := h.mint("t2", "mallory", auth.AllScopes...)
	for _, r := range []struct{ method, path string }{{http.MethodGet, "/v1/agents/triage"}, {http.MethodGet, "/v1/agents/triage/revisions/1"},
		{http.MethodPost, "/v1/agents/triage/archive"}} {
		require.Equal(t, http.StatusNotFound, h.do(r.method, r.path, other, nil).Status, r.path)
	}
	res = h.do(http.MethodPost, "/v1/agents/triage/revisions", other, map[string]any{"definition": definition("")})
	require.Equal(t, http.StatusNotFound, res.Status)
	res = h.do(http.MethodGet, "/v1/agents", other, nil)
	require.Empty(t, res.JSON(t)["agents"])

	// Archive: idempotent, no more revisions, still readable.
	res = h.do(http.MethodPost, "/v1/agents/triage/archive", h.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, true, res.JSON(t)["archived"])
	require.Equal(t, http.StatusOK, h.do(http.MethodPost, "/v1/agents/triage/archive", h.token, nil).Status)
	res = h.do(http.MethodPost, "/v1/agents/triage/revisions", h.token, map[string]any{"definition": definition("")})
	require.Equal(t, http.StatusConflict, res.Status)
	require.Equal(t, "AGENT_ARCHIVED", res.Code(t))
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/v1/agents/triage/revisions/2", h.token, nil).Status)

	// Listing pages with a tenant-bound cursor.
	for _, k := range []string{"a1", "a2"} {
		h.createAgent(k, "")
	}
	res = h.do(http.MethodGet, "/v1/agents?limit=2", h.token, nil)
	page := res.JSON(t)
	require.Len(t, page["agents"], 2)
	cursor := page["nextCursor"].(string)
	res = h.do(http.MethodGet, "/v1/agents?limit=2&cursor="+cursor, h.token, nil)
	require.Equal(t, http.StatusOK, res.Status)
	last := res.JSON(t)["agents"].([]any)
	require.Len(t, last, 1)
	require.Equal(t, "triage", last[0].(map[string]any)["key"])
	require.Equal(t, true, last[0].(map[string]any)["archived"])
	require.Equal(t, "CURSOR_INVALID", h.do(http.MethodGet, "/v1/agents?cursor="+cursor, other, nil).Code(t))

	// agent.name now resolves from the store, tenant-checked.
	res = h.do(http.MethodPost, "/v1/variables/resolve", h.token, map[string]any{"template": "{{ agent.name }}", "bindings": map[string]string{"agentId": "a1"}})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), "Agent a1")
	res = h.do(http.MethodPost, "/v1/variables/resolve", other, map[string]any{"template": "{{ agent.name }}", "bindings": map[string]string{"agentId": "a1"}})
	require.Equal(t, "RECORD_NOT_FOUND", res.Code(t))
}

const agentGraph = `{"schemaVersion":1,"nodes":[
 {"id":"in","kind":"input","outputs":{"out":"any"}},
 {"id":"triage","kind":"agent","inputs":{"in":"any"},"outputs":{"out":"any"},"agent":{"key":"%s","revision":%d}},
 {"id":"decide","kind":"agent-decision","inputs":{"in":"any"},"outputs":{"pass":"any","fail":"any"},"agent":{"key":"judge","revision":1}},
 {"id":"save","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"%s","version":1}},
 {"id":"ok","kind":"output","inputs":{"in":"any"}},
 {"id":"no","kind":"output","inputs":{"in":"any"}}],
 "edges":[{"from":"in.out","to":"triage.in"},{"from":"triage.out","to":"decide.in"},{"from":"decide.pass","to":"save.in"},
  {"from":"save.out","to":"ok.in"},{"from":"decide.fail","to":"no.in"}]}`

// publishIssues creates workflow key with doc and publishes it; it returns
// nil on 201, else the issues of the 422.
func (h *wfHarness) publishIssues(key, doc string) []graph.Issue {
	h.t.Helper()
	h.create(key, json.RawMessage(doc))
	res := h.do(http.MethodPost, "/v1/workflows/"+key+"/publish", h.token, map[string]any{"expectedRevision": 1})
	if res.Status == http.StatusCreated {
		return nil
	}
	require.Equal(h.t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	var body struct {
		Error struct {
			Code    string
			Details struct{ Issues []graph.Issue }
		}
	}
	require.NoError(h.t, json.Unmarshal(res.Body, &body))
	require.Equal(h.t, "INVALID_GRAPH", body.Error.Code)
	return body.Error.Details.Issues
}

func TestPublicationPinsAgentsAndTheirToolsAndRefusesBadOnes(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	ctx := context.Background()
	// A worker published a custom action and a destructive one.
	lookup := graph.ActionContract{ID: "crm.lookup", Version: 1, Risk: graph.RiskRead, Description: "Look a contact up.",
		InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{}`), RequiredPermissions: []string{"crm.read"},
		TimeoutMs: 5000, Idempotency: catalog.IdempotencyNone}
	drop := lookup
	drop.ID, drop.Risk = "crm.drop", graph.RiskDestructive
	reg, err := catalog.NewRegistry(append(catalog.Builtins(catalog.BuiltinDeps{}),
		catalog.Action{Contract: lookup, Handler: func(context.Context, catalog.Call) (json.RawMessage, error) { return nil, nil }},
		catalog.Action{Contract: drop, Handler: func(context.Context, catalog.Call) (json.RawMessage, error) { return nil, nil }})...)
	require.NoError(t, err)
	require.NoError(t, reg.Publish(ctx, h.st))

	res := h.do(http.MethodGet, "/v1/actions", h.mint("t1", "bob", auth.ScopeWorkflowsRead), nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var actions struct {
		Actions []struct {
			Ref, Hash string
			Risk      string
		}
	}
	require.NoError(t, json.Unmarshal(res.Body, &actions))
	refs := []string{}
	for _, a := range actions.Actions {
		refs = append(refs, a.Ref)
		require.Len(t, a.Hash, 64)
	}
	require.Equal(t, []string{"core.echo@1", "core.fail@1", "core.http.fetch@1", "core.sleep@1", "crm.drop@1", "crm.lookup@1", "workspace.notes.write@1"}, refs)
	require.Equal(t, http.StatusForbidden, h.do(http.MethodGet, "/v1/actions", h.mint("t1", "bob", auth.ScopeAgentsRead), nil).Status)

	h.createAgent("triage", `,"allowedTools":["crm.lookup@1","core.echo@1"]`)
	h.createAgent("judge", "")
	require.Nil(t, h.publishIssues("good", fmt.Sprintf(agentGraph, "triage", 1, "core.echo")))
	res = h.do(http.MethodGet, "/v1/workflows/good/revisions/1", h.token, nil)
	require.Equal(t, http.StatusOK, res.Status)
	var rev struct {
		Dependencies struct {
			Actions []graph.PinnedAction
			Agents  []graph.AgentContract
		}
		NodePermissions map[string][]string
	}
	require.NoError(t, json.Unmarshal(res.Body, &rev))
	var pinned []string
	for _, a := range rev.Dependencies.Actions {
		pinned = append(pinned, graph.ActionRef{ID: a.ID, Version: a.Version}.String())
		require.Equal(t, catalog.ContractHash(a.ActionContract), a.Hash)
	}
	require.Equal(t, []string{"core.echo@1", "crm.lookup@1"}, pinned, "the agent's tools are pinned with their hashes")
	require.Len(t, rev.Dependencies.Agents, 2)
	stored, err := h.st.GetAgentRevision(ctx, "t1", "triage", 1)
	require.NoError(t, err)
	require.Equal(t, stored.Hash, rev.Dependencies.Agents[1].Hash)
	// An agent's tools are filtered at run time; what it requires itself is
	// the scope of the variables its instructions read ({{ agent.name }}).
	require.Equal(t, []string{auth.ScopeAgentsRead}, rev.NodePermissions["triage"])
	require.Equal(t, []string{auth.ScopeAgentsRead}, rev.NodePermissions["decide"])
	require.Equal(t, []string{auth.ScopeAgentsRead}, rev.Dependencies.Agents[1].RequiredPermissions)

	// Agents allowing tools publication refuses (stored directly: the API
	// refuses such tools at creation, and a published action may also be
	// withdrawn after an agent was authored).
	for key, tools := range map[string]string{"fetcher": `["core.http.fetch@1"]`, "dropper": `["crm.drop@1"]`, "ghost": `["core.echo@9"]`} {
		content := json.RawMessage(`{"instructions":"x","provider":"sim","model":"sim","outputSchema":{},"allowedTools":` + tools + `,"maxTurns":1,"timeoutMs":1000}`)
		_, _, err := h.st.CreateAgent(ctx, "t1", store.NewAgent{Key: key, Name: key, Content: content, Hash: "h-" + key, By: "alice"})
		require.NoError(t, err)
	}
	require.NoError(t, func() error { _, err := h.st.ArchiveAgent(ctx, "t1", "judge", "alice"); return err }())

	for _, tc := range []struct {
		name, agent string
		revision    int
		action      string
		want        map[string]string // path -> code
	}{
		{"missing revision", "triage", 9, "core.echo", map[string]string{"/nodes/1/agent": "MISSING_DEPENDENCY"}},
		{"external tool", "fetcher", 1, "core.echo", map[string]string{"/nodes/1/agent": "UNSUPPORTED_ACTION_RISK"}},
		{"destructive tool", "dropper", 1, "core.echo", map[string]string{"/nodes/1/agent": "UNSUPPORTED_ACTION_RISK"}},
		{"missing tool version", "ghost", 1, "core.echo", map[string]string{"/nodes/1/agent": "MISSING_DEPENDENCY"}},
		{"external action", "triage", 1, "core.http.fetch", map[string]string{"/nodes/3/action": "UNSUPPORTED_ACTION_RISK"}},
		{"destructive action", "triage", 1, "crm.drop", map[string]string{"/nodes/3/action": "UNSUPPORTED_ACTION_RISK"}},
	} {
		issues := h.publishIssues(fmt.Sprintf("wf-%d", len(tc.name)+tc.revision*100+len(tc.agent)), fmt.Sprintf(agentGraph, tc.agent, tc.revision, tc.action))
		got := map[string]string{}
		for _, i := range issues {
			got[i.Path] = i.Code
		}
		// The archived judge is refused in every one of them.
		tc.want["/nodes/2/agent"] = "MISSING_DEPENDENCY"
		require.Equal(t, tc.want, got, "%s: %+v", tc.name, issues)
	}

	// The revision published before the archive is untouched.
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/v1/workflows/good/revisions/1", h.token, nil).Status)
}

// An allowed tool must be a built-in or published action that runs may
// call: authors learn it when they save the agent, not when a workflow
// using it is published.
func TestAgentToolsAreCheckedAgainstTheCatalogAtAuthoring(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t)
	ctx := context.Background()
	lookup := graph.ActionContract{ID: "crm.lookup", Version: 1, Risk: graph.RiskRead, Description: "Look a contact up.",
		InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{}`), RequiredPermissions: []string{"crm.read"},
		TimeoutMs: 5000, Idempotency: catalog.IdempotencyNone}
	drop := lookup
	drop.ID, drop.Risk = "crm.drop", graph.RiskDestructive
	noop := func(context.Context, catalog.Call) (json.RawMessage, error) { return nil, nil }
	reg, err := catalog.NewRegistry(append(catalog.Builtins(catalog.BuiltinDeps{}),
		catalog.Action{Contract: lookup, Handler: noop}, catalog.Action{Contract: drop, Handler: noop})...)
	require.NoError(t, err)
	require.NoError(t, reg.Publish(ctx, h.st))

	issuesOf := func(res wfResponse) map[string]string {
		t.Helper()
		require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
		require.Equal(t, "INVALID_AGENT", res.Code(t))
		var body struct {
			Error struct {
				Details struct{ Issues []graph.Issue }
			}
		}
		require.NoError(t, json.Unmarshal(res.Body, &body))
		got := map[string]string{}
		for _, i := range body.Error.Details.Issues {
			got[i.Path] = i.Code
			require.NotEmpty(t, i.Message)
		}
		return got
	}

	// The reported case: one unknown tool.
	res := h.do(http.MethodPost, "/v1/agents", h.token, map[string]any{"key": "ghost", "name": "Ghost",
		"definition": definition(`,"allowedTools":["no.such@1"]`)})
	require.Equal(t, map[string]string{"/definition/allowedTools/0": "MISSING_DEPENDENCY"}, issuesOf(res))
	require.Equal(t, http.StatusNotFound, h.do(http.MethodGet, "/v1/agents/ghost", h.token, nil).Status, "nothing was stored")

	// Every bad tool is listed (allowedTools is sorted first): malformed,
	// unknown id, unknown version, external built-in, destructive published.
	bad := `,"allowedTools":["core.http.fetch@1","crm.drop@1","core.echo@9","no.such@1","x","crm.lookup@1","core.echo@1"]`
	res = h.do(http.MethodPost, "/v1/agents", h.token, map[string]any{"key": "bad", "name": "Bad", "definition": definition(bad)})
	require.Equal(t, map[string]string{
		"/definition/allowedTools/1": "MISSING_DEPENDENCY",      // core.echo@9
		"/definition/allowedTools/2": "UNSUPPORTED_ACTION_RISK", // core.http.fetch@1
		"/definition/allowedTools/3": "UNSUPPORTED_ACTION_RISK", // crm.drop@1
		"/definition/allowedTools/5": "MISSING_DEPENDENCY",      // no.such@1
		"/definition/allowedTools/6": "INVALID_TOOL",            // x
	}, issuesOf(res))

	// Built-in and published read/workspace-write tools are accepted.
	h.createAgent("triage", `,"allowedTools":["crm.lookup@1","core.echo@1","workspace.notes.write@1"]`)

	// New revisions are held to the same rule.
	res = h.do(http.MethodPost, "/v1/agents/triage/revisions", h.token, map[string]any{"expectedRevision": 1,
		"definition": definition(`,"allowedTools":["core.echo@1","no.such@1"]`)})
	require.Equal(t, map[string]string{"/definition/allowedTools/1": "MISSING_DEPENDENCY"}, issuesOf(res))
	res = h.do(http.MethodPost, "/v1/agents/triage/revisions", h.token, map[string]any{"expectedRevision": 1,
		"definition": definition(`,"allowedTools":["crm.drop@1"]`)})
	require.Equal(t, map[string]string{"/definition/allowedTools/0": "UNSUPPORTED_ACTION_RISK"}, issuesOf(res))
	res = h.do(http.MethodGet, "/v1/agents/triage", h.token, nil)
	require.Equal(t, float64(1), res.JSON(t)["latestRevision"], "refused revisions are not stored")
	res = h.do(http.MethodPost, "/v1/agents/triage/revisions", h.token, map[string]any{"expectedRevision": 1,
		"definition": definition(`,"allowedTools":["crm.lookup@1"]`)})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
}
