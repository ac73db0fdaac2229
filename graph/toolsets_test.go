package graph

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestToolsetIssuesKeepOnlyToolsetProblems(t *testing.T) {
	doc := exampleDoc(t)
	require.Empty(t, ToolsetIssues(doc, testCatalog()), "no toolsets, nothing to say")

	// Other graph issues (a missing action) are not toolset issues.
	doc.Nodes[2].Action.Version = 9
	n := agentNode("agent")
	n.Tools = "./tools/report" // an uncaptured path
	doc.Nodes = append(doc.Nodes, n)
	doc.Edges = append(doc.Edges, Edge{From: "check.fail", To: "agent.in"})
	doc.Toolsets = map[string]Toolset{
		"shared": {Tools: []string{"core.echo@1", "core.nope@1", "core.http.fetch@1", "bad"}, Skill: "Use them."},
		"blank":  {Tools: []string{}, Skill: "  \n"},
	}
	doc.Tools = "shared"
	got := map[string]string{}
	for _, is := range ToolsetIssues(doc, testCatalog()) {
		got[is.Path] = is.Code
	}
	require.Equal(t, map[string]string{
		"/nodes/4/tools":           CodeInvalidToolsPath,
		"/toolsets/blank/skill":    CodeInvalidToolsPath,
		"/toolsets/shared/tools/1": CodeMissingDependency,
		"/toolsets/shared/tools/2": CodeUnsupportedActionRisk,
		"/toolsets/shared/tools/3": CodeInvalidToolsPath,
	}, got)
}

func TestIsToolsPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/tools": true, "/toolsets": true, "/toolsets/a/tools/0": true, "/nodes/3/tools": true,
		"/nodes/x/tools": false, "/nodes/3/toolsx": false, "/nodes/3": false, "/toolsetsx": false, "": false,
	} {
		require.Equal(t, want, isToolsPath(p), p)
	}
}

func TestEmptyToolsIssues(t *testing.T) {
	raw := json.RawMessage(`{"schemaVersion":1,"tools":"","nodes":[{"id":"a","kind":"agent"},{"id":"b","kind":"agent","tools":""},{"id":"c","kind":"agent","tools":" "}],"edges":[]}`)
	got := EmptyToolsIssues(raw)
	require.Len(t, got, 2)
	require.Equal(t, Issue{Code: CodeInvalidToolsPath, Path: "/tools", Message: "tools must name a toolset; it is empty"}, got[0])
	require.Equal(t, "/nodes/1/tools", got[1].Path)
	require.Empty(t, EmptyToolsIssues(exampleJSON(t)))
	require.Empty(t, EmptyToolsIssues(json.RawMessage(`[`)))
}

func TestEffectiveToolsetNodeOverridesDefault(t *testing.T) {
	doc := exampleDoc(t)
	doc.Toolsets = map[string]Toolset{
		"shared": {Tools: []string{"core.echo@1"}, Skill: "Shared."},
		"report": {Tools: []string{"core.sleep@1"}, Skill: "Report."},
	}
	plain, override := agentNode("a"), agentNode("b")
	override.Tools = "report"

	name, ts, ok := EffectiveToolset(doc, plain)
	require.False(t, ok, "no default, no override: %s", name)

	doc.Tools = "shared"
	name, ts, ok = EffectiveToolset(doc, plain)
	require.True(t, ok)
	require.Equal(t, "shared", name)
	require.Equal(t, "Shared.", ts.Skill)

	name, ts, ok = EffectiveToolset(doc, override)
	require.True(t, ok)
	require.Equal(t, "report", name)
	require.Equal(t, []string{"core.sleep@1"}, ts.Tools)

	_, _, ok = EffectiveToolset(doc, doc.Nodes[2]) // an action node
	require.False(t, ok)
}
