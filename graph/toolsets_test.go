package graph

import (
	"encoding/json"
	"strings"
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

func TestToolsetSummaryRules(t *testing.T) {
	long := strings.Repeat("é", DefaultLimits.MaxToolsetSummaryChars)
	for s, ok := range map[string]bool{
		"":                    true, // absent: a warning, not an issue
		"Look orders up.":     true,
		long:                  true,
		long + "x":            false,
		"two\nlines":          false,
		"carriage\rreturn":    false,
		"line\u2028separator": false,
		"tab\there":           false,
		"   ":                 false,
		"bell\x07":            false,
	} {
		require.Equal(t, ok, ToolsetSummaryProblem(s) == "", "%q: %s", s, ToolsetSummaryProblem(s))
	}

	doc := exampleDoc(t)
	doc.Toolsets = map[string]Toolset{
		"ok":      {Tools: []string{"core.echo@1"}, Skill: "s", Summary: "Echo things."},
		"old":     {Tools: []string{"core.echo@1"}, Skill: "s"},
		"multi":   {Tools: []string{"core.echo@1"}, Skill: "s", Summary: "one\ntwo"},
		"toolong": {Tools: []string{"core.echo@1"}, Skill: "s", Summary: long + "!"},
	}
	got := map[string]string{}
	for _, is := range Validate(doc, testCatalog()) {
		got[is.Path] = is.Code
	}
	// A bad summary is an issue with its own code (and so a toolset issue a
	// draft save refuses); a missing one is not an issue at all.
	require.Equal(t, map[string]string{
		"/toolsets/multi/summary":   CodeInvalidToolsetSummary,
		"/toolsets/toolong/summary": CodeInvalidToolsetSummary,
	}, got)
	require.Len(t, ToolsetIssues(doc, testCatalog()), 2)

	warnings := ToolsetWarnings(doc)
	require.Len(t, warnings, 1)
	require.Equal(t, CodeMissingToolsetSummary, warnings[0].Code)
	require.Equal(t, "/toolsets/old/summary", warnings[0].Path)
	require.Empty(t, ToolsetWarnings(nil))

	// A dry-run shows the warning and stays valid.
	delete(doc.Toolsets, "multi")
	delete(doc.Toolsets, "toolong")
	res := DryRun(doc, testCatalog())
	require.True(t, res.Valid, "%v", res.Issues)
	require.Equal(t, warnings, res.Warnings)

	// A draft save requires summaries of new toolsets only: a toolset the
	// replaced draft already held without one keeps working.
	require.Len(t, RequireToolsetSummaries(doc, nil), 1)
	previous := &Document{Toolsets: map[string]Toolset{"old": {Skill: "s"}}}
	require.Empty(t, RequireToolsetSummaries(doc, previous))
	previous.Toolsets["old"] = Toolset{Skill: "s", Summary: "Had one."}
	require.Len(t, RequireToolsetSummaries(doc, previous), 1, "a summary once given is required from then on")
}

func TestToolsetSummaryIsInTheChecksum(t *testing.T) {
	base := genGraph(3, 1)
	c1, issues := Compile(base, testCatalog())
	require.Empty(t, issues)

	with := cloneDoc(t, base)
	ts := with.Toolsets["ops"]
	ts.Summary = "Echo and sleep."
	with.Toolsets["ops"] = ts
	c2, issues := Compile(with, testCatalog())
	require.Empty(t, issues)
	require.NotEqual(t, c1.Checksum, c2.Checksum, "the summary is pinned content")

	other := cloneDoc(t, with)
	ts.Summary = "Sleep and echo."
	other.Toolsets["ops"] = ts
	c3, issues := Compile(other, testCatalog())
	require.Empty(t, issues)
	require.NotEqual(t, c2.Checksum, c3.Checksum)

	// A toolset without a summary encodes as it did before summaries
	// existed, so revisions published earlier keep their checksums.
	b, err := Canonical(base.Toolsets)
	require.NoError(t, err)
	require.Equal(t, `{"ops":{"skill":"Use the tools sparingly.","tools":["core.echo@1","core.sleep@1"]}}`, string(b))
	b, err = Canonical(*with)
	require.NoError(t, err)
	require.Contains(t, string(b), `"toolsets":{"ops":{"skill":"Use the tools sparingly.","summary":"Echo and sleep.","tools":["core.echo@1","core.sleep@1"]}}`)

	// The decoder reads it back.
	raw, err := json.Marshal(with)
	require.NoError(t, err)
	doc, err := Decode(raw)
	require.NoError(t, err)
	require.Equal(t, "Echo and sleep.", doc.Toolsets["ops"].Summary)
}
