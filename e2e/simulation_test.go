package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/weftworks/weft/activities"
	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/publication"
	"github.com/weftworks/weft/replay"
	"github.com/weftworks/weft/worker"
	"github.com/weftworks/weft/workflows"
)

// countingSim is the sim provider with every model turn counted.
type countingSim struct {
	provider.Sim
	turns *atomic.Int64
}

func (c countingSim) Turn(ctx context.Context, req provider.Request) (provider.Reply, error) {
	c.turns.Add(1)
	return c.Sim.Turn(ctx, req)
}

// counters count what a run called: action handlers and provider turns.
type counters struct {
	handlers, turns atomic.Int64
}

// startCountingWorker runs an in-process worker like startWorker (the
// interpreter, the node activities and the replay workflow) whose every
// action handler call and provider turn is counted: a simulation must
// leave both counts at zero.
func (e *env) startCountingWorker() *counters {
	e.t.Helper()
	cnt := &counters{}
	calls := &cnt.handlers
	builtins := catalog.Builtins(catalog.BuiltinDeps{Notes: e.st})
	for i := range builtins {
		h := builtins[i].Handler
		builtins[i].Handler = func(ctx context.Context, c catalog.Call) (json.RawMessage, error) {
			calls.Add(1)
			return h(ctx, c)
		}
	}
	actions, err := catalog.NewRegistry(builtins...)
	require.NoError(e.t, err)
	opts := worker.Options(e.cfg, e.log)
	if opts.MaxHeartbeatThrottleInterval == 0 {
		opts.MaxHeartbeatThrottleInterval = cancelDeliveryBound
	}
	rt, err := agents.New(agents.Deps{Store: e.st, Actions: actions, Logger: e.log,
		Providers: []provider.Provider{countingSim{turns: &cnt.turns}}})
	require.NoError(e.t, err)
	w := sdkworker.New(e.tc, e.queue, opts)
	workflows.Register(w)
	require.NoError(e.t, activities.Register(w, activities.Deps{Store: e.st, Actions: actions, Agents: rt, Variables: e.vars, Logger: e.log}))
	// Replays, as production registers them (worker.Register).
	ra, err := replay.NewActivities(replay.ActivityDeps{Store: e.st, Starter: e.starter, Deriver: replay.Recordings{Store: e.st}, Logger: e.log})
	require.NoError(e.t, err)
	replay.Register(w, ra)
	require.NoError(e.t, w.Start())
	e.t.Cleanup(w.Stop)
	return cnt
}

// createAgent creates agent key (revision 1) through the API.
func (e *env) createAgent(key string, definition string) {
	e.t.Helper()
	res := e.do(http.MethodPost, "/v1/agents", e.token, map[string]any{"key": key, "name": key, "definition": json.RawMessage(definition)})
	require.Equal(e.t, http.StatusCreated, res.Status, "create agent: %s", res.Body)
}

// simGraph: a flaky classifier retried with delays of 1 and 2 minutes, a
// note write, a ten-minute sleep, and an agent whose answer an
// agent-decision approves, joined and returned. Live, it would call three
// handlers and a model twice, write a note and take over thirteen minutes.
const simGraph = `{
  "schemaVersion": 1,
  "schemas": {"Order": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}},
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "Order"}},
    {"id": "classify", "kind": "action", "inputs": {"in": "Order"}, "outputs": {"out": "any"},
     "action": {"id": "core.fail", "version": 1},
     "mapping": {"untilAttempt": {"literal": 99}, "value": {"pointer": "/in"}},
     "retry": {"maxAttempts": 3, "initialIntervalMs": 60000, "backoff": 2, "maxIntervalMs": 300000}},
    {"id": "save", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"},
     "action": {"id": "workspace.notes.write", "version": 1},
     "mapping": {"title": {"template": "Order {{ order.id }}", "bindings": {"order.id": "/in/id"}}, "body": {"pointer": "/in"}}},
    {"id": "nap", "kind": "action", "inputs": {"in": "Order"}, "outputs": {"out": "any"},
     "action": {"id": "core.sleep", "version": 1}, "mapping": {"ms": {"literal": 600000}}, "timeoutMs": 600000},
    {"id": "triage", "kind": "agent", "inputs": {"in": "Order"}, "outputs": {"out": "any"}, "agent": {"key": "triage", "revision": 1}},
    {"id": "approve", "kind": "agent-decision", "inputs": {"in": "any"}, "outputs": {"pass": "any", "fail": "any"},
     "agent": {"key": "approver", "revision": 1}},
    {"id": "join", "kind": "merge", "inputs": {"note": "any", "nap": "any", "approved": "any"}, "outputs": {"out": "any"}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [
    {"from": "in.out", "to": "classify.in"}, {"from": "in.out", "to": "nap.in"},
    {"from": "classify.out", "to": "save.in"},
    {"from": "in.out", "to": "triage.in"}, {"from": "triage.out", "to": "approve.in"},
    {"from": "save.out", "to": "join.note"}, {"from": "nap.out", "to": "join.nap"}, {"from": "approve.pass", "to": "join.approved"},
    {"from": "join.out", "to": "out.in"}
  ]
}`

// simFixtures: classify fails twice (once with a type, once with the
// default) and then succeeds; save returns a fixed note id; approve passes;
// nap and triage have no fixture and return their schema-valid defaults.
const simFixtures = `{
  "classify": [
    {"error": {"type": "ACTION_FAILED", "message": "upstream down"}, "durationMs": 2000},
    {"error": {"message": "still down"}, "durationMs": 3000},
    {"output": {"id": "o-1", "class": "gold"}, "durationMs": 500}
  ],
  "save": {"output": {"noteId": "note-sim"}, "durationMs": 100},
  "approve": {"outcome": "pass", "durationMs": 50}
}`

// triageAgent answers {"priority": "high"|"low"}.
const triageAgent = `{"instructions": "Triage the order.",
  "outputSchema": {"type": "object", "required": ["priority"], "properties": {"priority": {"enum": ["high", "low"]}}}}`

func TestSimulatedDraftWithFixtures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cnt := e.startCountingWorker()
	e.createAgent("triage", triageAgent)
	e.createAgent("approver", `{"instructions": "Approve the triage."}`)

	// A draft, never published.
	res := e.do(http.MethodPost, "/v1/workflows", e.token, map[string]any{"key": "orders", "graph": json.RawMessage(simGraph)})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	draft := int(res.JSON(t)["draftRevision"].(float64))

	// Fixtures are checked against the draft before anything is stored.
	bad := e.do(http.MethodPost, "/v1/workflows/orders/runs", e.token, map[string]any{"input": map[string]any{"id": "o-1"},
		"idempotencyKey": "bad", "mode": "simulation", "draftRevision": draft, "fixtures": map[string]any{"join": map[string]any{}}})
	require.Equal(t, http.StatusUnprocessableEntity, bad.Status, "%s", bad.Body)
	require.Equal(t, "INVALID_FIXTURES", bad.Code(t))

	started := time.Now()
	res = e.do(http.MethodPost, "/v1/workflows/orders/runs", e.token, map[string]any{"input": map[string]any{"id": "o-1"},
		"idempotencyKey": uuid.NewString(), "mode": "simulation", "draftRevision": draft, "fixtures": json.RawMessage(simFixtures)})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.EqualValues(t, 0, res.JSON(t)["revision"])
	id := res.JSON(t)["runId"].(string)

	v := e.wait(id, 30*time.Second)
	elapsed := time.Since(started)
	require.Equal(t, execution.StatusSucceeded, v.Status, "error: %+v events: %v", v.Error, e.eventTypes(id))
	require.Equal(t, "simulation", v.Mode)
	require.Equal(t, 0, v.Revision)
	require.JSONEq(t, `{"note": {"noteId": "note-sim"}, "nap": {"sleptMs": 0}, "approved": {"priority": "high"}}`, string(v.Output))
	var raw map[string]any
	require.NoError(t, json.Unmarshal(e.do(http.MethodGet, "/v1/runs/"+id, e.token, nil).Body, &raw))
	require.EqualValues(t, draft, raw["draftRevision"])
	status, attempt, _, _ := v.node(t, "classify")
	require.Equal(t, execution.NodeSucceeded, status)
	require.Equal(t, 3, attempt, "failed twice, then succeeded on the third attempt")

	// Nothing was called: no handler, no model, no note, no ledger entry.
	require.Zero(t, cnt.handlers.Load(), "action handlers called during a simulation")
	require.Zero(t, cnt.turns.Load(), "provider turns during a simulation")
	notes := e.do(http.MethodGet, "/v1/notes", e.token, nil)
	require.Equal(t, http.StatusOK, notes.Status)
	require.Empty(t, notes.JSON(t)["notes"])
	var ledger int
	require.NoError(t, e.st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM action_ledger`).Scan(&ledger))
	require.Zero(t, ledger)

	// Retry delays of 1 and 2 minutes (and a 10-minute sleep) took seconds
	// of wall time; the virtual timeline records them.
	require.Less(t, elapsed, 20*time.Second)
	events := e.events(id)
	var delays []int64
	var first, last *time.Time
	var prev time.Time
	for _, ev := range events {
		var d execution.EventData
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		require.NotNil(t, d.VirtualAt, "%s %s has no virtualAt", ev.Type, ev.NodeID)
		require.False(t, d.VirtualAt.Before(prev), "virtual time went backwards at seq %d", ev.Seq)
		prev = *d.VirtualAt
		if first == nil {
			first = d.VirtualAt
			require.Equal(t, execution.EventRunStarted, ev.Type)
			require.Equal(t, execution.ModeSimulation, d.Mode)
		}
		last = d.VirtualAt
		if ev.Type == execution.EventNodeRetryScheduled {
			require.Equal(t, "classify", ev.NodeID)
			delays = append(delays, *d.DelayMs)
		}
		if ev.Type == execution.EventNodeAttemptFailed {
			require.Equal(t, "classify", ev.NodeID)
			require.True(t, *d.Retryable)
		}
	}
	require.Equal(t, []int64{60000, 120000}, delays)
	// durations 2000 + 3000 + 500 (classify) + 100 (save) + 50 (approve) and delays 60000 + 120000.
	require.Equal(t, 185650*time.Millisecond, last.Sub(*first))
	require.Equal(t, execution.EventRunSucceeded, events[len(events)-1].Type)
	types := e.eventTypes(id)
	require.Contains(t, types, "node.attempt.failed classify")
	require.Contains(t, types, "node.completed nap")
	e.checkChain(id)

	// The Temporal side says simulation too.
	desc, err := e.tc.DescribeWorkflow(context.Background(), v.Temporal.WorkflowID, "")
	require.NoError(t, err)
	sa := desc.RawResponse.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	require.Equal(t, `"simulation"`, string(sa[execution.SearchAttrMode].GetData()))

	// The draft is still unpublished.
	w := e.do(http.MethodGet, "/v1/workflows/orders", e.token, nil)
	require.Equal(t, http.StatusOK, w.Status)
	require.Nil(t, w.JSON(t)["published"])

	// The counters do count: a live run of an echo and an agent calls one
	// handler and the model. (This env's API resolves no agents, so the
	// revision is published with the store-backed resolver production uses.)
	e.publishWithAgents("sanity", `{"schemaVersion": 1, "nodes": [
	  {"id": "in", "kind": "input", "outputs": {"out": "any"}},
	  {"id": "echo", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
	  {"id": "bot", "kind": "agent", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "agent": {"key": "triage", "revision": 1}},
	  {"id": "out", "kind": "output", "inputs": {"in": "any"}}],
	  "edges": [{"from": "in.out", "to": "echo.in"}, {"from": "echo.out", "to": "bot.in"}, {"from": "bot.out", "to": "out.in"}]}`)
	live := e.wait(e.run("sanity", map[string]any{"id": "o-2"}), 30*time.Second)
	require.Equal(t, execution.StatusSucceeded, live.Status, "error: %+v", live.Error)
	require.EqualValues(t, 1, cnt.handlers.Load())
	require.Positive(t, cnt.turns.Load())
}

// publishWithAgents creates workflow key with doc and publishes it against
// the store-backed resolver (agents and published actions), as api.New
// does by default.
func (e *env) publishWithAgents(key, doc string) {
	e.t.Helper()
	ctx := context.Background()
	d, err := graph.Decode([]byte(doc))
	require.NoError(e.t, err)
	r := &publication.Resolver{Agents: e.st, Actions: e.st}
	cat, err := r.Catalog(ctx, e.tenant, d)
	require.NoError(e.t, err)
	c, issues := graph.CompileWith(d, cat, r.Options())
	require.Empty(e.t, issues)
	plan := c.Plan()
	_, err = e.st.CreateWorkflow(ctx, e.tenant, key, json.RawMessage(doc), "alice")
	require.NoError(e.t, err)
	_, _, err = e.st.Publish(ctx, e.tenant, key, 1, c, &plan, "alice")
	require.NoError(e.t, err)
}
