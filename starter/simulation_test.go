package starter

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/fixtures"
)

func TestSimulatedDraftIsCompiledStoredAndStarted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.st.CreateWorkflow(ctx, b.t1, "items", json.RawMessage(itemGraph), "tester")
	require.NoError(t, err)
	one := 1
	fx := json.RawMessage(`{"echo": [{"error": {"message": "boom"}}, {"output": {"id": "x"}, "durationMs": 5}]}`)
	// runs.execute alone: a simulation calls nothing, so node permissions are not required.
	tc := trusted(b.t1, "runs.execute")
	req := Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "sim-1",
		Mode: execution.ModeSimulation, DraftRevision: &one, Fixtures: fx}
	acc, err := b.starter.Enqueue(ctx, req, tc)
	require.NoError(t, err)
	require.True(t, acc.Created, "accepted = %+v", acc)
	require.Equal(t, 0, acc.Revision, "accepted = %+v", acc)
	require.NotEmpty(t, acc.Checksum, "accepted = %+v", acc)
	run, err := b.st.GetRun(ctx, b.t1, acc.RunID)
	require.NoError(t, err)
	require.Equal(t, "simulation", run.Mode, "run = %+v", run)
	require.Equal(t, 0, run.Revision, "run = %+v", run)
	require.NotNil(t, run.DraftRevision, "run = %+v", run)
	require.Equal(t, 1, *run.DraftRevision, "run = %+v", run)
	set, problems := fixtures.Parse(run.Fixtures)
	require.Empty(t, problems, "stored fixtures %s: %v", run.Fixtures, problems)
	require.Len(t, set["echo"], 2, "stored fixtures %s: %v", run.Fixtures, problems)
	// Compiled and stored unpublished by (tenant, checksum).
	_, err = b.st.GetPlan(ctx, b.t1, acc.Checksum)
	require.NoError(t, err, "plan of the simulated draft")
	w, _ := b.st.GetWorkflow(ctx, b.t1, "items")
	require.Equal(t, 0, w.LatestPublishedRevision, "simulating a draft published it: %+v", w)
	desc, err := b.tc.DescribeWorkflow(ctx, run.WorkflowID, "")
	require.NoError(t, err)
	sa := desc.RawResponse.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	got := string(sa[execution.SearchAttrMode].GetData())
	require.Equal(t, `"simulation"`, got, "WeftMode = %s", got)
	got = string(sa[execution.SearchAttrRevision].GetData())
	require.Equal(t, `0`, got, "WeftRevision = %s", got)
	summary := desc.RawResponse.GetExecutionConfig().GetUserMetadata().GetSummary()
	require.NotNil(t, summary, "static summary = %v", summary)
	require.Contains(t, string(summary.GetData()), "items draft 1 · simulation", "static summary = %v", summary)

	// The same request (fixtures reformatted) is the same run.
	again := req
	again.Fixtures = json.RawMessage(`{ "echo" : [ {"error":{"message":"boom"}}, {"durationMs":5,"output":{"id":"x"}} ] }`)
	acc2, err := b.starter.Enqueue(ctx, again, tc)
	require.NoError(t, err, "repeat: %+v", acc2)
	require.False(t, acc2.Created, "repeat: %+v %v", acc2, err)
	require.Equal(t, acc.RunID, acc2.RunID, "repeat: %+v %v", acc2, err)
	// Other fixtures, another draft or live mode under the same key conflict.
	two := 2
	_, err = b.st.SaveDraft(ctx, b.t1, "items", 1, json.RawMessage(itemGraph), "tester")
	require.NoError(t, err)
	for name, r := range map[string]Request{
		"other fixtures": {WorkflowKey: "items", Input: req.Input, IdempotencyKey: "sim-1", Mode: execution.ModeSimulation, DraftRevision: &one, Fixtures: json.RawMessage(`{}`)},
		"other draft":    {WorkflowKey: "items", Input: req.Input, IdempotencyKey: "sim-1", Mode: execution.ModeSimulation, DraftRevision: &two, Fixtures: fx},
	} {
		_, err := b.starter.Enqueue(ctx, r, tc)
		require.Error(t, err, "%s: accepted", name)
		wantCode(t, err, failure.CodeIdempotencyConflict)
	}
}

func TestSimulationRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "items", itemGraph)
	broken := strings.Replace(itemGraph, `"to": "out.in"`, `"to": "nowhere.in"`, 1)
	_, err := b.st.SaveDraft(ctx, b.t1, "items", 1, json.RawMessage(broken), "tester")
	require.NoError(t, err)
	one, two, nine, zero := 1, 2, 9, 0
	sim := func(f func(*Request)) Request {
		r := Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "k", Mode: execution.ModeSimulation}
		f(&r)
		return r
	}
	cases := []struct {
		name string
		req  Request
		code string
		path string // first details.errors path for INVALID_FIXTURES
	}{
		{"revision and draft", sim(func(r *Request) { r.Revision, r.DraftRevision = &one, &one }), failure.CodeInvalidRequest, ""},
		{"draft zero", sim(func(r *Request) { r.DraftRevision = &zero }), failure.CodeInvalidRequest, ""},
		{"unknown draft", sim(func(r *Request) { r.DraftRevision = &nine }), failure.CodeNotFound, ""},
		{"draft with issues", sim(func(r *Request) { r.DraftRevision = &two }), failure.CodeInvalidGraph, ""},
		{"fixtures not an object", sim(func(r *Request) { r.Fixtures = json.RawMessage(`[1]`) }), CodeInvalidFixtures, ""},
		{"fixture for an unknown node", sim(func(r *Request) { r.Fixtures = json.RawMessage(`{"nope": {}}`) }), CodeInvalidFixtures, "/nope"},
		{"fixture for the input node", sim(func(r *Request) { r.Fixtures = json.RawMessage(`{"in": {}}`) }), CodeInvalidFixtures, "/in"},
		{"bad fixture", sim(func(r *Request) { r.Fixtures = json.RawMessage(`{"echo": {"outcome": "pass"}}`) }), CodeInvalidFixtures, "/echo/outcome"},
		{"fixtures too large", sim(func(r *Request) {
			r.Fixtures = json.RawMessage(`{"echo": {"output": "` + strings.Repeat("x", fixtures.MaxBytes) + `"}}`)
		}), CodeInvalidFixtures, ""},
	}
	for _, c := range cases {
		_, err := b.starter.Enqueue(ctx, c.req, trusted(b.t1))
		fe := wantCode(t, err, c.code)
		if c.code == CodeInvalidFixtures {
			problems, _ := fe.Details["errors"].([]fixtures.Problem)
			require.NotEmpty(t, problems, "%s: problems %+v", c.name, problems)
			require.Equal(t, c.path, problems[0].Path, "%s: problems %+v", c.name, problems)
		}
		require.False(t, c.code == failure.CodeInvalidGraph && fe.Details["issues"] == nil, "%s: no issues listed", c.name)
	}
	n := countRuns(t, b.st)
	require.Equal(t, 0, n, "refusals created %d runs", n)
	// Simulating the published revision works, without node permissions.
	acc, err := b.starter.Enqueue(ctx, sim(func(r *Request) { r.Revision = &one }), trusted(b.t1))
	require.NoError(t, err, "simulate revision 1: %+v", acc)
	require.Equal(t, 1, acc.Revision, "simulate revision 1: %+v %v", acc, err)
}

// A simulated draft is refused like its publication by the same caller
// would be: a template reading a variable outside the caller's scopes
// (agent.name needs agents.read) is a forbidden variable.
func TestSimulatedDraftRefusesForbiddenVariables(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	doc := strings.Replace(itemGraph, `"action": {"id": "core.echo", "version": 1}}`,
		`"action": {"id": "core.echo", "version": 1}, "mapping": {"in": {"pointer": "/in"},
		  "by": {"template": "for {{ agent.name }}", "bindings": {"agentId": "/in/id"}}}}`, 1)
	require.NotEqual(t, itemGraph, doc, "the mapping was not added")
	_, err := b.st.CreateWorkflow(ctx, b.t1, "items", json.RawMessage(doc), "tester")
	require.NoError(t, err)
	one := 1
	req := Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "k",
		Mode: execution.ModeSimulation, DraftRevision: &one}
	_, err = b.starter.Enqueue(ctx, req, trusted(b.t1, "runs.execute"))
	fe := wantCode(t, err, failure.CodeInvalidGraph)
	require.Contains(t, fmt.Sprint(fe.Details["issues"]), `needs scope "agents.read"`, "issues = %v", fe.Details["issues"])
	n := countRuns(t, b.st)
	require.Equal(t, 0, n, "the refusal created %d runs", n)
	_, err = b.starter.Enqueue(ctx, req, trusted(b.t1, "runs.execute", "agents.read"))
	require.NoError(t, err, "with agents.read")
}
