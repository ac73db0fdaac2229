package activities_test

import (
	"context"
	"encoding/json"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/activities"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
)

const simDoc = `{"schemaVersion":1,
 "schemas":{"Item":{"type":"object","required":["id"],"properties":{"id":{"type":"string"}}}},
 "nodes":[
 {"id":"in","kind":"input","outputs":{"out":"any"}},
 {"id":"echo","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"core.echo","version":1}},
 {"id":"typed","kind":"action","inputs":{"in":"any"},"outputs":{"out":"Item"},"action":{"id":"core.echo","version":1}},
 {"id":"save","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"workspace.notes.write","version":1},
  "mapping":{"title":{"template":"Item {{ item.id }}","bindings":{"item.id":"/in/id"}},"body":{"pointer":"/in"}}},
 {"id":"nap","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"core.sleep","version":1},
  "mapping":{"ms":{"literal":600000}}},
 {"id":"unmapped","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"core.echo","version":1},
  "mapping":{"x":{"pointer":"/in/nope"}}},
 {"id":"bot","kind":"agent","inputs":{"in":"any"},"outputs":{"out":"any"},"agent":{"key":"bot","revision":1}},
 {"id":"judge","kind":"agent-decision","inputs":{"in":"any"},"outputs":{"pass":"any","fail":"any"},"agent":{"key":"bot","revision":1}},
 {"id":"out","kind":"output","inputs":{"in":"any"}}],
 "edges":[{"from":"in.out","to":"echo.in"},{"from":"in.out","to":"typed.in"},{"from":"in.out","to":"save.in"},
  {"from":"in.out","to":"nap.in"},{"from":"in.out","to":"unmapped.in"},{"from":"in.out","to":"bot.in"},
  {"from":"in.out","to":"judge.in"},{"from":"echo.out","to":"out.in"}]}`

var botAgent = graph.AgentContract{Key: "bot", Revision: 1, Hash: "h", RequiredPermissions: []string{},
	OutputSchema: json.RawMessage(`{"type":"object","required":["answer","score"],"properties":{"answer":{"type":"string"},"score":{"type":"integer","minimum":1}}}`)}

// countingBuiltins are the built-in actions with every handler call counted.
func countingBuiltins(st *store.Store, calls *atomic.Int64) []catalog.Action {
	actions := catalog.Builtins(catalog.BuiltinDeps{Notes: st})
	for i := range actions {
		h := actions[i].Handler
		actions[i].Handler = func(ctx context.Context, c catalog.Call) (json.RawMessage, error) {
			calls.Add(1)
			return h(ctx, c)
		}
	}
	return actions
}

// simBundle is a bundle whose run-1 is a simulation with fixtures.
func simBundle(t *testing.T, fixtures string) (*bundle, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	b := newBundle(t, simDoc, withAgent(botAgent), withLazyRegistry(func(st *store.Store) []catalog.Action {
		return countingBuiltins(st, &calls)
	}))
	run := store.Run{RunID: "run-1", TenantID: tenant, WorkflowKey: "wf", Checksum: b.checksum,
		Mode: string(execution.ModeSimulation), Input: json.RawMessage(`{}`), InputHash: "h",
		Origin: execution.Origin{Kind: "api"}, Actor: execution.Actor{Kind: "user", Sub: "ada"},
		Fixtures: json.RawMessage(fixtures), WorkflowID: "weft-sim"}
	_, _, err := b.st.CreateRun(context.Background(), run, "k")
	require.NoError(t, err)
	return b, &calls
}

func (b *bundle) simInput(node string, kind graph.Kind, attempt int) execution.NodeInput {
	in := b.input(node, kind, map[string]string{"in": item})
	in.Mode, in.Attempt = execution.ModeSimulation, attempt
	in.Permissions = nil // simulation calls nothing, so it needs no node permission
	return in
}

func TestSimulatedNodesReturnFixturesAndCallNothing(t *testing.T) {
	t.Parallel()
	b, calls := simBundle(t, `{
		"echo": [{"error": {"message": "down", "type": "ACTION_FAILED"}, "durationMs": 1500},
		         {"error": {"message": "still down"}},
		         {"output": {"echoed": true}, "durationMs": 250}],
		"save": {"output": {"noteId": "sim-note"}},
		"bot": {"output": {"answer": "42", "score": 7}, "durationMs": 9000},
		"judge": [{"outcome": "fail"}, {"error": {"message": "refused", "retryable": false, "type": "POLICY"}}]
	}`)

	_, err := b.runNode(b.simInput("echo", graph.KindAction, 1))
	ae := wantAppErr(t, err, "ACTION_FAILED", false)
	var d execution.FailureDetails
	err = ae.Details(&d)
	require.NoError(t, err, "details %+v", d)
	require.Equal(t, int64(1500), d.DurationMs, "details %+v %v", d, err)
	_, err = b.runNode(b.simInput("echo", graph.KindAction, 2))
	wantAppErr(t, err, "SIMULATED_ERROR", false)
	for _, attempt := range []int{3, 4} { // the last fixture repeats
		res, err := b.runNode(b.simInput("echo", graph.KindAction, attempt))
		require.NoError(t, err, "attempt %d: %+v", attempt, res)
		require.Equal(t, "out", res.Port, "attempt %d: %+v %v", attempt, res, err)
		require.True(t, jsonEq(b.value(res.Value), `{"echoed": true}`), "attempt %d: %+v %v", attempt, res, err)
		require.Equal(t, int64(250), res.DurationMs, "attempt %d: %+v %v", attempt, res, err)
	}

	res, err := b.runNode(b.simInput("save", graph.KindAction, 1))
	require.NoError(t, err, "save: %+v", res)
	require.True(t, jsonEq(b.value(res.Value), `{"noteId": "sim-note"}`), "save: %+v %v", res, err)
	res, err = b.runNode(b.simInput("bot", graph.KindAgent, 1))
	require.NoError(t, err, "bot: %+v", res)
	require.Equal(t, "out", res.Port, "bot: %+v %v", res, err)
	require.Equal(t, int64(9000), res.DurationMs, "bot: %+v %v", res, err)
	require.True(t, jsonEq(b.value(res.Value), `{"answer": "42", "score": 7}`), "bot: %+v %v", res, err)
	res, err = b.runNode(b.simInput("judge", graph.KindAgentDecision, 1))
	require.NoError(t, err, "judge: %+v", res)
	require.Equal(t, "fail", res.Port, "judge: %+v %v", res, err)
	require.Equal(t, item, b.value(res.Value), "judge: %+v %v", res, err)
	_, err = b.runNode(b.simInput("judge", graph.KindAgentDecision, 2))
	wantAppErr(t, err, "POLICY", true)

	n := calls.Load()
	require.Equal(t, int64(0), n, "%d handler calls in simulation", n)
	notes, _ := b.st.ListNotes(context.Background(), tenant, 10, nil)
	require.Empty(t, notes, "simulation wrote %d notes", len(notes))
	var ledger int
	err = b.st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM action_ledger`).Scan(&ledger)
	require.NoError(t, err, "simulation wrote %d ledger rows (%v)", ledger, err)
	require.Equal(t, 0, ledger, "simulation wrote %d ledger rows (%v)", ledger, err)
}

func TestSimulatedDefaultsAreSchemaValidAndStable(t *testing.T) {
	t.Parallel()
	b, calls := simBundle(t, `{}`)
	want := map[string]string{
		"echo":  `{}`,
		"typed": `{"id":"sample"}`, // the out port's schema Item
		"save":  `{"noteId":"sample"}`,
		"nap":   `{"sleptMs":0}`, // and it did not sleep ten minutes
		"bot":   `{"answer":"sample","score":1}`,
	}
	for node, w := range want {
		kind := graph.KindAction
		if node == "bot" {
			kind = graph.KindAgent
		}
		for attempt := 1; attempt <= 2; attempt++ {
			res, err := b.runNode(b.simInput(node, kind, attempt))
			require.NoError(t, err, "%s attempt %d: %+v %s %v, want %s", node, attempt, res, b.value(res.Value), err, w)
			require.Equal(t, "out", res.Port, "%s attempt %d: %+v %s %v, want %s", node, attempt, res, b.value(res.Value), err, w)
			require.Equal(t, w, b.value(res.Value), "%s attempt %d: %+v %s %v, want %s", node, attempt, res, b.value(res.Value), err, w)
			require.Equal(t, int64(0), res.DurationMs, "%s attempt %d: %+v %s %v, want %s", node, attempt, res, b.value(res.Value), err, w)
		}
	}
	res, err := b.runNode(b.simInput("judge", graph.KindAgentDecision, 1))
	require.NoError(t, err, "decisions default to pass carrying the input: %+v", res)
	require.Equal(t, "pass", res.Port, "decisions default to pass carrying the input: %+v %v", res, err)
	require.Equal(t, item, b.value(res.Value), "decisions default to pass carrying the input: %+v %v", res, err)
	n := calls.Load()
	require.Equal(t, int64(0), n, "%d handler calls in simulation", n)
}

func TestSimulationRefusals(t *testing.T) {
	t.Parallel()
	b, calls := simBundle(t, `{"save": {"output": {"id": 1}}, "bot": {"output": {"answer": 3}}}`)
	// The mapping is built as in a live run: a pointer to nothing fails.
	_, err := b.runNode(b.simInput("unmapped", graph.KindAction, 1))
	wantAppErr(t, err, execution.ErrMappingUnresolved, true)
	// A fixture output must satisfy the contract's output schema.
	_, err = b.runNode(b.simInput("save", graph.KindAction, 1))
	wantAppErr(t, err, execution.ErrInvalidOutput, true)
	_, err = b.runNode(b.simInput("bot", graph.KindAgent, 1))
	wantAppErr(t, err, execution.ErrInvalidOutput, true)
	// A live run is never simulated, whatever its node input says.
	live := store.Run{RunID: "run-live", TenantID: tenant, WorkflowKey: "wf", Checksum: b.checksum,
		Mode: string(execution.ModeLive), Input: json.RawMessage(`{}`), InputHash: "h",
		Origin: execution.Origin{Kind: "api"}, Actor: execution.Actor{Kind: "user", Sub: "ada"}, WorkflowID: "weft-live"}
	_, _, err = b.st.CreateRun(context.Background(), live, "k-live")
	require.NoError(t, err)
	in := b.simInput("echo", graph.KindAction, 1)
	in.RunID = "run-live"
	_, err = b.runNode(in)
	wantAppErr(t, err, activities.ErrNotSimulation, true)
	// A run without a row has no fixtures to trust.
	in.RunID = "run-missing"
	_, err = b.runNode(in)
	wantAppErr(t, err, activities.ErrInvalidFixtures, true)
	n := calls.Load()
	require.Equal(t, int64(0), n, "%d handler calls in simulation", n)
}

// jsonEq compares two JSON documents by value.
func jsonEq(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
