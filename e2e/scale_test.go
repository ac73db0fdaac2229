package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
)

// wideGraph is the largest graph the limits allow, 200 nodes: the input,
// ten chains alternating core.echo actions and gates (197 nodes), a merge
// joining the chains and the output.
func wideGraph() string {
	nodes := []string{`{"id": "in", "kind": "input", "outputs": {"out": "any"}}`}
	var edges, ports []string
	for c := range 10 {
		length := 20
		if c >= 7 {
			length = 19
		}
		prev := "in.out"
		for j := range length {
			id := fmt.Sprintf("c%dn%d", c, j)
			if j%2 == 0 {
				nodes = append(nodes, fmt.Sprintf(`{"id": %q, "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}}`, id))
				edges = append(edges, fmt.Sprintf(`{"from": %q, "to": "%s.in"}`, prev, id))
				prev = id + ".out"
			} else {
				nodes = append(nodes, fmt.Sprintf(`{"id": %q, "kind": "gate", "inputs": {"in": "any"}, "outputs": {"pass": "any", "fail": "any"}, "language": "cel/v1", "expression": "input.n >= 0"}`, id))
				edges = append(edges, fmt.Sprintf(`{"from": %q, "to": "%s.in"}`, prev, id))
				prev = id + ".pass"
			}
		}
		edges = append(edges, fmt.Sprintf(`{"from": %q, "to": "join.p%d"}`, prev, c))
		ports = append(ports, fmt.Sprintf(`"p%d": "any"`, c))
	}
	nodes = append(nodes, `{"id": "join", "kind": "merge", "inputs": {`+strings.Join(ports, ", ")+`}, "outputs": {"out": "any"}}`,
		`{"id": "out", "kind": "output", "inputs": {"in": "any"}}`)
	edges = append(edges, `{"from": "join.out", "to": "out.in"}`)
	return `{"schemaVersion": 1, "nodes": [` + strings.Join(nodes, ", ") + `], "edges": [` + strings.Join(edges, ", ") + `]}`
}

// startDirect creates a run row of a published revision exactly as the
// starter does and starts its workflow with params and options the
// starter never sets (test knobs such as ForceContinueAsNewAfterEvents, a
// workflow timeout). It returns the run id and the workflow id.
func (e *env) startDirect(key string, revision int, input any, params func(*execution.RunParams), opts func(*client.StartWorkflowOptions)) (string, string) {
	e.t.Helper()
	ctx := context.Background()
	rev, err := e.st.GetRevision(ctx, e.tenant, key, revision)
	require.NoError(e.t, err)
	raw, err := json.Marshal(input)
	require.NoError(e.t, err)
	hash, err := starter.InputHash(raw)
	require.NoError(e.t, err)
	idem := uuid.NewString()
	run, created, err := e.st.CreateRun(ctx, store.Run{
		RunID: uuid.NewString(), TenantID: e.tenant, WorkflowKey: key, Revision: revision, Checksum: rev.Checksum,
		Mode: string(execution.ModeLive), Status: execution.StatusQueued, Input: raw, InputHash: hash,
		Origin: execution.Origin{Kind: "api"}, Actor: execution.Actor{Kind: "user", Sub: "alice"},
		Permissions: auth.AllScopes, WorkflowID: starter.WorkflowID(e.tenant, key, idem),
	}, idem)
	require.NoError(e.t, err)
	require.True(e.t, created)
	p := execution.RunParams{TenantID: e.tenant, RunID: run.RunID, WorkflowKey: key, Revision: revision, Checksum: rev.Checksum,
		Mode: execution.ModeLive, Input: execution.Value{Inline: raw}, Actor: run.Actor, Origin: run.Origin,
		Permissions: run.Permissions, EnqueuedAt: run.CreatedAt}
	if params != nil {
		params(&p)
	}
	o := client.StartWorkflowOptions{ID: run.WorkflowID, TaskQueue: e.queue,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			execution.KeyTenant.ValueSet(e.tenant), execution.KeyWorkflowKey.ValueSet(key),
			execution.KeyMode.ValueSet(string(execution.ModeLive)), execution.KeyRevision.ValueSet(int64(revision)))}
	if opts != nil {
		opts(&o)
	}
	we, err := e.tc.ExecuteWorkflow(ctx, o, execution.WorkflowName, p)
	require.NoError(e.t, err)
	require.NoError(e.t, e.st.SetTemporalRunID(ctx, run.RunID, we.GetRunID()))
	return run.RunID, run.WorkflowID
}

func TestTwoHundredNodesAndForcedContinueAsNew(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	doc := wideGraph()
	rev := e.publish("wide", doc)
	res := e.do(http.MethodGet, fmt.Sprintf("/v1/workflows/wide/revisions/%d", rev), e.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Len(t, res.JSON(t)["graph"].(map[string]any)["nodes"], 200)
	// Publication estimated the worst-case history (nodes x attempts): 16
	// overhead + 2 inline nodes + 100 activities x 7 + 98 local x 5; dry-run
	// reports it too, well within one execution.
	require.EqualValues(t, 1208, res.JSON(t)["estimatedHistoryEvents"])
	dry := e.do(http.MethodPost, "/v1/workflows/wide/dry-run", e.token, map[string]any{})
	require.Equal(t, http.StatusOK, dry.Status, "%s", dry.Body)
	require.EqualValues(t, 1208, dry.JSON(t)["estimatedHistoryEvents"])
	history := dry.JSON(t)["history"].(map[string]any)
	require.Equal(t, false, history["continueAsNew"])
	require.EqualValues(t, 198, history["maxPendingActivities"]) // all but input and output
	small := map[string]any{"n": float64(1)}
	// 8 KiB per value: some 200 resolved ports would carry 1.6 MB inline
	// across continue-as-new; they must travel as references instead.
	padded := map[string]any{"n": float64(1), "pad": strings.Repeat("p", 8<<10)}

	// One run through the API, and one forced to continue as new every
	// 150 events, concurrently.
	started := time.Now()
	plain := e.run("wide", small)
	forced, wid := e.startDirect("wide", rev, padded, func(p *execution.RunParams) { p.ForceContinueAsNewAfterEvents = 150 }, nil)

	for id, input := range map[string]map[string]any{plain: small, forced: padded} {
		want := map[string]any{}
		for c := range 10 {
			want[fmt.Sprintf("p%d", c)] = input
		}
		v := e.wait(id, 120*time.Second)
		require.Equal(t, execution.StatusSucceeded, v.Status, "run %s error: %+v", id, v.Error)
		var out map[string]any
		require.NoError(t, json.Unmarshal(v.Output, &out))
		require.Equal(t, want, out)
		require.Len(t, v.Nodes, 200)
		for _, n := range v.Nodes {
			require.Equal(t, execution.NodeSucceeded, n.Status, "node %s", n.ID)
		}
		e.checkChain(id)
	}
	t.Logf("two 200-node runs in %s", time.Since(started))

	// The forced run continued as new several times, yet it is one logical
	// run: one gapless hash-valid log (checked above), one run id in the
	// API, addressed by its workflow id across the whole chain.
	continued := 0
	for _, ev := range e.events(forced) {
		if ev.Type == execution.EventRunContinued {
			continued++
			var d execution.EventData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			require.Equal(t, execution.ReasonContinueForced, d.Reason)
		}
	}
	require.GreaterOrEqual(t, continued, 2)
	v := e.getRun(forced)
	require.Equal(t, forced, v.RunID)
	require.Equal(t, wid, v.Temporal.WorkflowID)
	desc, err := e.tc.DescribeWorkflow(context.Background(), wid, "")
	require.NoError(t, err)
	require.NotEqual(t, v.Temporal.RunID, desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId(),
		"the API keeps the first Temporal run id; the chain moved on")
	largest, _, executions := e.largestHistoryPayload(wid)
	require.Equal(t, continued+1, executions)
	// The largest payload is a continue-as-new input: 200 node states and
	// some 300 resolved ports as references, about 60 KB (the 1.6 MB of
	// values stay in PostgreSQL).
	require.LessOrEqual(t, largest, 2*maxHistoryPayload, "a history payload of %d bytes", largest)
	t.Logf("forced run: %d executions, largest history payload %d bytes", executions, largest)
	list := e.do(http.MethodGet, "/v1/runs?workflowKey=wide", e.token, nil)
	require.Equal(t, http.StatusOK, list.Status)
	require.Len(t, list.JSON(t)["runs"], 2, "continue-as-new never adds runs")
}
