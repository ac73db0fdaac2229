package agents_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/variables"
)

func TestDefinitionNormalizeAndHash(t *testing.T) {
	t.Parallel()
	d, err := agents.DecodeDefinition(json.RawMessage(`{"instructions":"hi","allowedTools":["b.x@1","a.x@2","b.x@1"],"outputSchema":{"type":"object","properties":{"a":{"type":"string"}}}}`))
	require.NoError(t, err)
	n := d.Normalize()
	require.Equal(t, "sim", n.Provider)
	require.Equal(t, "sim", n.Model)
	require.Equal(t, []string{"a.x@2", "b.x@1"}, n.AllowedTools)
	require.Equal(t, agents.DefaultMaxTurns, n.MaxTurns)
	require.Equal(t, agents.DefaultTimeoutMs, n.TimeoutMs)

	// Key order, whitespace and tool order do not change the hash; content does.
	same, err := agents.DecodeDefinition(json.RawMessage(`{"outputSchema":{"properties":{"a":{"type":"string"}},"type":"object"},
		"allowedTools":["a.x@2","b.x@1"],"instructions":"hi","provider":"sim","maxTurns":10}`))
	require.NoError(t, err)
	h1, err := d.Hash()
	require.NoError(t, err)
	h2, err := same.Hash()
	require.NoError(t, err)
	require.Equal(t, h1, h2)
	same.Instructions = "hi!"
	h3, err := same.Hash()
	require.NoError(t, err)
	require.NotEqual(t, h1, h3)

	// maxOutputTokens and sim.usage are content; absent, they leave the
	// hash of definitions written before them unchanged.
	withUsage, err := agents.DecodeDefinition(json.RawMessage(`{"instructions":"hi","maxOutputTokens":500,
		"sim":{"usage":{"inputTokens":100,"outputTokens":50}}}`))
	require.NoError(t, err)
	require.NotNil(t, withUsage.Normalize().Sim, "a sim script with only usage is kept")
	require.Equal(t, int64(50), withUsage.Sim.Usage.OutputTokens)
	h4, err := withUsage.Hash()
	require.NoError(t, err)
	require.NotEqual(t, h1, h4)
	raw, err := json.Marshal(d.Normalize())
	require.NoError(t, err)
	require.NotContains(t, string(raw), "maxOutputTokens")

	for _, bad := range []string{`{"instructions":"x","tools":[]}`, `{"instructions":1}`, `{"instructions":"x"} {}`, `[]`,
		`{"sim":{"output":1,"extra":true}}`} {
		_, err := agents.DecodeDefinition(json.RawMessage(bad))
		require.Error(t, err, bad)
	}
}

func TestValidateReportsEveryIssue(t *testing.T) {
	t.Parallel()
	reg, err := variables.Builtin(variables.NoAgents{})
	require.NoError(t, err)
	known := map[string]graph.ActionContract{"core.http.fetch@1": {ID: "core.http.fetch", Version: 1, Risk: graph.RiskExternal}}
	d := agents.Definition{
		Instructions: "Hello {{ nope.key }} and {{ agent.name }}", Provider: "gpt", Model: "bad model!",
		OutputSchema: json.RawMessage(`{"type":"object","required":["a"]}`), AllowedTools: []string{"core.http.fetch@1", "nope", "no.such@1"},
		MaxTurns: 51, TimeoutMs: 100, MaxOutputTokens: -1,
		Sim: &provider.SimScript{Outcome: "maybe", Output: json.RawMessage(`{"b":1}`),
			ToolCalls: []provider.SimToolCall{{Tool: "x"}, {Tool: "a.b@1", Input: json.RawMessage(`[1]`)}},
			Usage:     &provider.SimUsage{InputTokens: -1, OutputTokens: 0, CostUSD: -0.5}},
	}.Normalize()
	issues := agents.Validate(d, "/definition", agents.ValidateOptions{Variables: reg.Definitions(),
		Action: func(r graph.ActionRef) (graph.ActionContract, bool) { c, ok := known[r.String()]; return c, ok }})
	got := map[string]string{}
	for _, i := range issues {
		got[i.Path] = i.Code
	}
	require.Equal(t, map[string]string{
		"/definition/instructions":           agents.IssueUnknownVariable,
		"/definition/provider":               agents.IssueInvalidField,
		"/definition/model":                  agents.IssueInvalidField,
		"/definition/maxTurns":               agents.IssueLimitExceeded,
		"/definition/timeoutMs":              agents.IssueLimitExceeded,
		"/definition/allowedTools/0":         agents.IssueUnsupportedRisk,
		"/definition/allowedTools/1":         agents.IssueUnknownTool,
		"/definition/allowedTools/2":         agents.IssueInvalidTool,
		"/definition/sim/outcome":            agents.IssueInvalidSimScript,
		"/definition/sim/output":             agents.IssueInvalidSimScript,
		"/definition/sim/toolCalls/0/tool":   agents.IssueInvalidSimScript,
		"/definition/sim/toolCalls/1/input":  agents.IssueInvalidSimScript,
		"/definition/maxOutputTokens":        agents.IssueLimitExceeded,
		"/definition/sim/usage/inputTokens":  agents.IssueInvalidSimScript,
		"/definition/sim/usage/outputTokens": agents.IssueInvalidSimScript,
		"/definition/sim/usage/costUsd":      agents.IssueInvalidSimScript,
	}, got)
	require.Contains(t, issues[0].Message, "nope.key", "agent.name is known: its binding is the agent's own key")

	ok := agents.Definition{Instructions: "Summarise for {{ context.user.displayName }}.", AllowedTools: []string{"core.echo@1"}}.Normalize()
	require.Empty(t, agents.Validate(ok, "", agents.ValidateOptions{Variables: reg.Definitions()}))
	// Without a catalog only the syntax of tools is checked; with one, an
	// unknown tool is an issue however the risk of the others reads.
	unknown := agents.Definition{Instructions: "x", AllowedTools: []string{"no.such@1"}}.Normalize()
	require.Empty(t, agents.Validate(unknown, "", agents.ValidateOptions{}))
	issues = agents.Validate(unknown, "", agents.ValidateOptions{
		Action: func(graph.ActionRef) (graph.ActionContract, bool) { return graph.ActionContract{}, false }})
	require.Len(t, issues, 1)
	require.Equal(t, graph.CodeMissingDependency, issues[0].Code)
	require.Contains(t, issues[0].Message, "no.such@1")
	bad := agents.Definition{Instructions: " ", OutputSchema: json.RawMessage(`{"type":"nope"}`)}.Normalize()
	require.Len(t, agents.Validate(bad, "", agents.ValidateOptions{}), 2)
}

func TestEffectiveOutputSchemaAddsTheDecisionContract(t *testing.T) {
	t.Parallel()
	s := json.RawMessage(`{"type":"object","required":["reason"],"properties":{"reason":{"type":"string"}}}`)
	require.JSONEq(t, string(s), string(agents.EffectiveOutputSchema(s, false)))
	require.JSONEq(t, `{"type":"object","required":["reason","outcome"],"properties":{"reason":{"type":"string"},
		"outcome":{"type":"string","enum":["pass","fail"]}}}`, string(agents.EffectiveOutputSchema(s, true)))
	require.JSONEq(t, `{"type":"object","required":["outcome"],"properties":{"outcome":{"type":"string","enum":["pass","fail"]}}}`,
		string(agents.EffectiveOutputSchema(json.RawMessage(`{}`), true)))
	require.JSONEq(t, `{"type":"object","required":["outcome"],"properties":{"outcome":{"type":"string","enum":["pass","fail"]}}}`,
		string(agents.EffectiveOutputSchema(json.RawMessage(`{"type":"string"}`), true)))
}
