package starter

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/fixtures"
)

func TestSimulatedDraftIsCompiledStoredAndStarted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.st.CreateWorkflow(ctx, b.t1, "items", json.RawMessage(itemGraph), "tester"); err != nil {
		t.Fatal(err)
	}
	one := 1
	fx := json.RawMessage(`{"echo": [{"error": {"message": "boom"}}, {"output": {"id": "x"}, "durationMs": 5}]}`)
	// runs.execute alone: a simulation calls nothing, so node permissions are not required.
	tc := trusted(b.t1, "runs.execute")
	req := Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "sim-1",
		Mode: execution.ModeSimulation, DraftRevision: &one, Fixtures: fx}
	acc, err := b.starter.Enqueue(ctx, req, tc)
	if err != nil {
		t.Fatal(err)
	}
	if !acc.Created || acc.Revision != 0 || acc.Checksum == "" {
		t.Fatalf("accepted = %+v", acc)
	}
	run, err := b.st.GetRun(ctx, b.t1, acc.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Mode != "simulation" || run.Revision != 0 || run.DraftRevision == nil || *run.DraftRevision != 1 {
		t.Fatalf("run = %+v", run)
	}
	if set, problems := fixtures.Parse(run.Fixtures); len(problems) > 0 || len(set["echo"]) != 2 {
		t.Fatalf("stored fixtures %s: %v", run.Fixtures, problems)
	}
	// Compiled and stored unpublished by (tenant, checksum).
	if _, err := b.st.GetPlan(ctx, b.t1, acc.Checksum); err != nil {
		t.Fatalf("plan of the simulated draft: %v", err)
	}
	if w, _ := b.st.GetWorkflow(ctx, b.t1, "items"); w.LatestPublishedRevision != 0 {
		t.Fatalf("simulating a draft published it: %+v", w)
	}
	desc, err := b.tc.DescribeWorkflow(ctx, run.WorkflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	sa := desc.RawResponse.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	if got := string(sa[execution.SearchAttrMode].GetData()); got != `"simulation"` {
		t.Fatalf("WeftMode = %s", got)
	}
	if got := string(sa[execution.SearchAttrRevision].GetData()); got != `0` {
		t.Fatalf("WeftRevision = %s", got)
	}
	if got := desc.RawResponse.GetExecutionConfig().GetUserMetadata().GetSummary(); got == nil || !strings.Contains(string(got.GetData()), "items draft 1 · simulation") {
		t.Fatalf("static summary = %v", got)
	}

	// The same request (fixtures reformatted) is the same run.
	again := req
	again.Fixtures = json.RawMessage(`{ "echo" : [ {"error":{"message":"boom"}}, {"durationMs":5,"output":{"id":"x"}} ] }`)
	acc2, err := b.starter.Enqueue(ctx, again, tc)
	if err != nil || acc2.Created || acc2.RunID != acc.RunID {
		t.Fatalf("repeat: %+v %v", acc2, err)
	}
	// Other fixtures, another draft or live mode under the same key conflict.
	two := 2
	if _, err := b.st.SaveDraft(ctx, b.t1, "items", 1, json.RawMessage(itemGraph), "tester"); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]Request{
		"other fixtures": {WorkflowKey: "items", Input: req.Input, IdempotencyKey: "sim-1", Mode: execution.ModeSimulation, DraftRevision: &one, Fixtures: json.RawMessage(`{}`)},
		"other draft":    {WorkflowKey: "items", Input: req.Input, IdempotencyKey: "sim-1", Mode: execution.ModeSimulation, DraftRevision: &two, Fixtures: fx},
	} {
		if _, err := b.starter.Enqueue(ctx, r, tc); err == nil {
			t.Fatalf("%s: accepted", name)
		} else {
			wantCode(t, err, failure.CodeIdempotencyConflict)
		}
	}
}

func TestSimulationRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "items", itemGraph)
	broken := strings.Replace(itemGraph, `"to": "out.in"`, `"to": "nowhere.in"`, 1)
	if _, err := b.st.SaveDraft(ctx, b.t1, "items", 1, json.RawMessage(broken), "tester"); err != nil {
		t.Fatal(err)
	}
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
			if len(problems) == 0 || problems[0].Path != c.path {
				t.Fatalf("%s: problems %+v", c.name, problems)
			}
		}
		if c.code == failure.CodeInvalidGraph && fe.Details["issues"] == nil {
			t.Fatalf("%s: no issues listed", c.name)
		}
	}
	if n := countRuns(t, b.st); n != 0 {
		t.Fatalf("refusals created %d runs", n)
	}
	// Simulating the published revision works, without node permissions.
	acc, err := b.starter.Enqueue(ctx, sim(func(r *Request) { r.Revision = &one }), trusted(b.t1))
	if err != nil || acc.Revision != 1 {
		t.Fatalf("simulate revision 1: %+v %v", acc, err)
	}
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
	if doc == itemGraph {
		t.Fatal("the mapping was not added")
	}
	if _, err := b.st.CreateWorkflow(ctx, b.t1, "items", json.RawMessage(doc), "tester"); err != nil {
		t.Fatal(err)
	}
	one := 1
	req := Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "k",
		Mode: execution.ModeSimulation, DraftRevision: &one}
	_, err := b.starter.Enqueue(ctx, req, trusted(b.t1, "runs.execute"))
	fe := wantCode(t, err, failure.CodeInvalidGraph)
	if !strings.Contains(fmt.Sprint(fe.Details["issues"]), `needs scope "agents.read"`) {
		t.Fatalf("issues = %v", fe.Details["issues"])
	}
	if n := countRuns(t, b.st); n != 0 {
		t.Fatalf("the refusal created %d runs", n)
	}
	if _, err := b.starter.Enqueue(ctx, req, trusted(b.t1, "runs.execute", "agents.read")); err != nil {
		t.Fatalf("with agents.read: %v", err)
	}
}
