package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra/inproc"
	"github.com/weftworks/weft/replay"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/worker"
)

// recordReplay writes the first replay's workflow history to
// replay/testdata for replay.TestHistories:
// go test ./e2e -run TestReplayDraftAgainstLiveRuns -record-replay
var recordReplay = flag.Bool("record-replay", false, "write a replay workflow history to replay/testdata")

// orderGraph is a diamond: the gate sends an order over the threshold to
// a note (a business write), the rest to an echo; a merge joins them.
func orderGraph(threshold int, extra string) string {
	out := `{"from": "join.out", "to": "out.in"}`
	nodes := ""
	if extra == "audit" {
		// The draft adds an audit echo between the merge and the output.
		nodes = `{"id": "audit", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},`
		out = `{"from": "join.out", "to": "audit.in"}, {"from": "audit.out", "to": "out.in"}`
	}
	return fmt.Sprintf(`{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "gate", "kind": "gate", "inputs": {"in": "any"}, "outputs": {"pass": "any", "fail": "any"},
     "language": "cel/v1", "expression": "input.body.qty > %d"},
    {"id": "big", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "workspace.notes.write", "version": 1}},
    {"id": "small", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    %s
    {"id": "join", "kind": "merge", "inputs": {"big": "any", "small": "any"}, "outputs": {"out": "any"}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [
    {"from": "in.out", "to": "gate.in"},
    {"from": "gate.pass", "to": "big.in"}, {"from": "gate.fail", "to": "small.in"},
    {"from": "big.out", "to": "join.big"}, {"from": "small.out", "to": "join.small"},
    %s
  ]
}`, threshold, nodes, out)
}

// replayView is GET /v1/replays/{id}.
type replayView struct {
	ReplayID      string         `json:"replayId"`
	WorkflowKey   string         `json:"workflowKey"`
	DraftRevision int            `json:"draftRevision"`
	Status        string         `json:"status"`
	Summary       map[string]int `json:"summary"`
	Runs          []struct {
		RunID           string `json:"runId"`
		Verdict         string `json:"verdict"`
		Reason          string `json:"reason"`
		SimulationRunID string `json:"simulationRunId"`
		RecordedStatus  string `json:"recordedStatus"`
		SimulatedStatus string `json:"simulatedStatus"`
		Diff            struct {
			Output []map[string]any `json:"output"`
			Nodes  []struct {
				NodeID    string `json:"nodeId"`
				Recorded  string `json:"recorded"`
				Simulated string `json:"simulated"`
			} `json:"nodes"`
			Unrecorded []string `json:"unrecorded"`
		} `json:"diff"`
	} `json:"runs"`
}

// saveDraft saves doc as the workflow's next draft and returns its revision.
func (e *env) saveDraft(key, doc string) int {
	e.t.Helper()
	res := e.do(http.MethodGet, "/v1/workflows/"+key, e.token, nil)
	require.Equal(e.t, http.StatusOK, res.Status, "%s", res.Body)
	current := int(res.JSON(e.t)["draft"].(map[string]any)["revision"].(float64))
	res = e.do(http.MethodPut, "/v1/workflows/"+key+"/draft", e.token, map[string]any{"expectedRevision": current, "graph": json.RawMessage(doc)})
	require.Equal(e.t, http.StatusOK, res.Status, "save draft: %s", res.Body)
	return int(res.JSON(e.t)["draftRevision"].(float64))
}

// startReplay starts a replay and returns its id, requiring 202.
func (e *env) startReplay(key string, body map[string]any) string {
	e.t.Helper()
	res := e.do(http.MethodPost, "/v1/workflows/"+key+"/replays", e.token, body)
	require.Equal(e.t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Equal(e.t, "running", res.JSON(e.t)["status"])
	return res.JSON(e.t)["replayId"].(string)
}

// waitReplay polls the replay until it is done.
func (e *env) waitReplay(id string, timeout time.Duration) replayView {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		res := e.do(http.MethodGet, "/v1/replays/"+id, e.token, nil)
		require.Equal(e.t, http.StatusOK, res.Status, "%s", res.Body)
		var v replayView
		require.NoError(e.t, json.Unmarshal(res.Body, &v))
		if v.Status == "done" {
			return v
		}
		require.True(e.t, time.Now().Before(deadline), "replay %s still %s after %s: %s", id, v.Status, timeout, res.Body)
		time.Sleep(200 * time.Millisecond)
	}
}

// writeReplayHistory writes replay id's workflow history to
// replay/testdata/<name>.json.
func (e *env) writeReplayHistory(id, name string) {
	e.t.Helper()
	ctx := context.Background()
	// The replay is done a moment before its workflow closes.
	require.NoError(e.t, e.tc.GetWorkflow(ctx, replay.WorkflowID(id), "").Get(ctx, nil))
	it := e.tc.GetWorkflowHistory(ctx, replay.WorkflowID(id), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(e.t, err)
		h.Events = append(h.Events, ev)
	}
	raw, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	require.NoError(e.t, err)
	dir := filepath.Join("..", "replay", "testdata")
	require.NoError(e.t, os.MkdirAll(dir, 0o755))
	require.NoError(e.t, os.WriteFile(filepath.Join(dir, name+".json"), append(raw, '\n'), 0o644))
}

func (e *env) noteCount() int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM notes`).Scan(&n))
	return n
}

// TestReplayDraftAgainstLiveRuns is issue 21's live test: five live runs
// of a diamond whose gate is qty > 2, a draft moving it to qty > 3, and a
// replay that finds exactly the qty = 3 run path-changed, calling nothing.
func TestReplayDraftAgainstLiveRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cnt := e.startCountingWorker()
	rev := e.publish("orders", orderGraph(2, ""))

	byQty := map[int]string{}
	for qty := 1; qty <= 5; qty++ {
		id := e.run("orders", map[string]any{"title": fmt.Sprintf("order %d", qty), "body": map[string]any{"qty": qty}})
		v := e.wait(id, time.Minute)
		require.Equal(t, execution.StatusSucceeded, v.Status, "qty %d: %+v", qty, v.Error)
		byQty[qty] = id
	}
	require.Equal(t, 3, e.noteCount(), "qty 3, 4 and 5 wrote a note live")
	handlers := cnt.handlers.Load()
	require.EqualValues(t, 5, handlers)

	draft := e.saveDraft("orders", orderGraph(3, ""))
	began := time.Now()
	id := e.startReplay("orders", map[string]any{"draftRevision": draft, "last": 5})
	v := e.waitReplay(id, 2*time.Minute)
	t.Logf("replayed 5 runs (4 at once) in %s, polling every 200ms", time.Since(began).Round(10*time.Millisecond))
	if *recordReplay {
		e.writeReplayHistory(id, "five-runs")
	}
	require.Equal(t, "orders", v.WorkflowKey)
	require.Equal(t, draft, v.DraftRevision)
	require.Len(t, v.Runs, 5)
	require.Equal(t, map[string]int{"same": 4, "pathChanged": 1, "outputChanged": 0, "nowFails": 0, "nowSucceeds": 0,
		"notReplayable": 0, "pending": 0}, v.Summary)
	for _, r := range v.Runs {
		require.NotEmpty(t, r.SimulationRunID, "run %s", r.RunID)
		require.Equal(t, execution.StatusSucceeded, r.RecordedStatus)
		require.Equal(t, execution.StatusSucceeded, r.SimulatedStatus)
		if r.RunID != byQty[3] {
			assert.Equal(t, "same", r.Verdict, "run %s: %+v", r.RunID, r.Diff)
			assert.Empty(t, r.Diff.Unrecorded, "run %s took the branch it recorded", r.RunID)
			continue
		}
		assert.Equal(t, "path-changed", r.Verdict)
		changed := map[string]string{}
		for _, n := range r.Diff.Nodes {
			changed[n.NodeID] = n.Recorded + " -> " + n.Simulated
		}
		assert.Equal(t, map[string]string{"gate": "succeeded:pass -> succeeded:fail", "big": "succeeded -> skipped",
			"small": "skipped -> succeeded"}, changed)
		assert.Equal(t, []string{"small"}, r.Diff.Unrecorded, "the new branch ran without a recording")

		// The simulated run is a run like any other, marked as the replay's.
		sim := e.getRun(r.SimulationRunID)
		assert.Equal(t, "simulation", sim.Mode)
		assert.Equal(t, map[string]any{"kind": "replay", "id": id}, sim.Origin)
	}

	// Nothing ran live: no handler, no note; the draft was never published.
	require.Equal(t, handlers, cnt.handlers.Load(), "action handlers called during the replay")
	require.Equal(t, 3, e.noteCount(), "a business write happened during the replay")
	require.Zero(t, cnt.turns.Load())
	w := e.do(http.MethodGet, "/v1/workflows/orders", e.token, nil)
	require.Equal(t, http.StatusOK, w.Status)
	require.EqualValues(t, rev, w.JSON(t)["publishedRevision"], "%s", w.Body)

	// The replay's simulations are never replay sources: the last 10 are
	// still the five live runs.
	again := e.waitReplay(e.startReplay("orders", map[string]any{"draftRevision": draft}), 2*time.Minute)
	var sources []string
	for _, r := range again.Runs {
		sources = append(sources, r.RunID)
	}
	want := []string{byQty[1], byQty[2], byQty[3], byQty[4], byQty[5]}
	sort.Strings(sources)
	sort.Strings(want)
	require.Equal(t, want, sources)

	// A draft that adds a node: the node is noted unrecorded on every run,
	// and is no path change.
	added := e.saveDraft("orders", orderGraph(2, "audit"))
	av := e.waitReplay(e.startReplay("orders", map[string]any{"draftRevision": added, "runs": []string{byQty[1], byQty[4]}}), 2*time.Minute)
	require.Len(t, av.Runs, 2)
	for _, r := range av.Runs {
		assert.Contains(t, []string{"same", "output-changed"}, r.Verdict, "run %s: %+v", r.RunID, r.Diff)
		assert.Equal(t, []string{"audit"}, r.Diff.Unrecorded, "run %s", r.RunID)
	}

	// The list shows the three replays, newest first, without their runs.
	list := e.do(http.MethodGet, "/v1/workflows/orders/replays?limit=2", e.token, nil)
	require.Equal(t, http.StatusOK, list.Status, "%s", list.Body)
	page := list.JSON(t)
	items := page["replays"].([]any)
	require.Len(t, items, 2)
	require.Equal(t, av.ReplayID, items[0].(map[string]any)["replayId"])
	require.Nil(t, items[0].(map[string]any)["runs"])
	require.NotNil(t, page["nextCursor"])
	list = e.do(http.MethodGet, "/v1/workflows/orders/replays?limit=2&cursor="+page["nextCursor"].(string), e.token, nil)
	require.Equal(t, http.StatusOK, list.Status, "%s", list.Body)
	require.Len(t, list.JSON(t)["replays"], 1)
	require.Equal(t, id, list.JSON(t)["replays"].([]any)[0].(map[string]any)["replayId"])

	// Refusals.
	otherToken := e.mint(e.other, "mallory", auth.AllScopes...)
	res := e.do(http.MethodGet, "/v1/replays/"+id, otherToken, nil)
	require.Equal(t, http.StatusNotFound, res.Status, "another tenant's replay: %s", res.Body)
	require.Equal(t, "NOT_FOUND", res.Code(t))
	res = e.do(http.MethodPost, "/v1/workflows/orders/replays", otherToken, map[string]any{"draftRevision": draft})
	require.Equal(t, http.StatusNotFound, res.Status, "another tenant's workflow: %s", res.Body)
	res = e.do(http.MethodPost, "/v1/workflows/orders/replays", e.mint(e.tenant, "bob", auth.ScopeWorkflowsRead, auth.ScopeRunsRead),
		map[string]any{"draftRevision": draft})
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	require.Equal(t, "MISSING_SCOPE", res.Code(t))
	res = e.do(http.MethodPost, "/v1/workflows/orders/replays", e.token, map[string]any{"draftRevision": draft, "last": 51})
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	require.Equal(t, "REPLAY_TOO_MANY_RUNS", res.Code(t))
	require.EqualValues(t, 50, res.JSON(t)["error"].(map[string]any)["details"].(map[string]any)["limit"])
	res = e.do(http.MethodPost, "/v1/workflows/orders/replays", e.token, map[string]any{"draftRevision": draft, "last": 2, "runs": []string{byQty[1]}})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Equal(t, "INVALID_REQUEST", res.Code(t))
	sim := v.Runs[0].SimulationRunID
	res = e.do(http.MethodPost, "/v1/workflows/orders/replays", e.token, map[string]any{"draftRevision": draft, "runs": []string{sim}})
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "a simulation run is no replay source: %s", res.Body)
	require.Equal(t, "REPLAY_RUN_INVALID", res.Code(t))
	require.Equal(t, sim, res.JSON(t)["error"].(map[string]any)["details"].(map[string]any)["runId"])
	res = e.do(http.MethodPost, "/v1/workflows/orders/replays", e.token, map[string]any{"draftRevision": 99})
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)

	// A draft that breaks validation is refused with its issues.
	broken := e.saveDraft("orders", strings.Replace(orderGraph(3, ""), `"core.echo"`, `"core.nope"`, 1))
	res = e.do(http.MethodPost, "/v1/workflows/orders/replays", e.token, map[string]any{"draftRevision": broken})
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	require.Equal(t, "INVALID_GRAPH", res.Code(t))
	require.NotEmpty(t, res.JSON(t)["error"].(map[string]any)["details"].(map[string]any)["issues"])
}

// TestReplayLargeNodeOutput: a node output of 20 KiB (beyond what events
// carry inline, below the claim check) replays with that output.
func TestReplayLargeNodeOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startCountingWorker()
	const doc = `{"schemaVersion": 1, "nodes": [
	  {"id": "in", "kind": "input", "outputs": {"out": "any"}},
	  {"id": "echo", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
	  {"id": "out", "kind": "output", "inputs": {"in": "any"}}],
	  "edges": [{"from": "in.out", "to": "echo.in"}, {"from": "echo.out", "to": "out.in"}]}`
	e.publish("blobs", doc)
	blob := strings.Repeat("x", 20<<10)
	live := e.wait(e.run("blobs", map[string]any{"blob": blob}), time.Minute)
	require.Equal(t, execution.StatusSucceeded, live.Status, "%+v", live.Error)

	// A run whose events retention deleted cannot be replayed; it is
	// reported, not failed.
	gone := e.wait(e.run("blobs", map[string]any{"blob": "small"}), time.Minute)
	require.Equal(t, execution.StatusSucceeded, gone.Status, "%+v", gone.Error)
	_, err := e.st.Pool.Exec(context.Background(), `UPDATE runs SET events_deleted_at = now() WHERE run_id = $1`, gone.RunID)
	require.NoError(t, err)

	draft := e.saveDraft("blobs", doc)
	v := e.waitReplay(e.startReplay("blobs", map[string]any{"draftRevision": draft, "runs": []string{live.RunID, gone.RunID}}), 2*time.Minute)
	require.Len(t, v.Runs, 2)
	require.Equal(t, 1, v.Summary["notReplayable"])
	require.Equal(t, "not-replayable", v.Runs[1].Verdict)
	require.Equal(t, "RESULTS_DELETED", v.Runs[1].Reason)
	require.Empty(t, v.Runs[1].SimulationRunID, "nothing was simulated for it")
	r := v.Runs[0]
	require.Equal(t, "same", r.Verdict, "%+v reason %s", r.Diff, r.Reason)
	sim := e.getRun(r.SimulationRunID)
	require.Equal(t, execution.StatusSucceeded, sim.Status)
	require.JSONEq(t, string(live.Output), string(sim.Output))
	require.Contains(t, string(sim.Output), blob, "the simulation returned the recorded 20 KiB output")
}

// TestReplayLostStartIsSwept: a replay stored whose workflow never started
// (the API died in between) is started by the sweeper and completes.
func TestReplayLostStartIsSwept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startCountingWorker()
	e.publish("orders", orderGraph(2, ""))
	live := e.wait(e.run("orders", map[string]any{"title": "o", "body": map[string]any{"qty": 3}}), time.Minute)
	require.Equal(t, execution.StatusSucceeded, live.Status, "%+v", live.Error)
	draft := e.saveDraft("orders", orderGraph(3, ""))

	ctx := context.Background()
	lost, err := e.st.CreateReplay(ctx, store.Replay{ReplayID: "rpl_" + uuid.NewString(), TenantID: e.tenant, WorkflowKey: "orders",
		DraftRevision: draft, Actor: execution.Actor{Kind: "user", Sub: "alice"}, Permissions: auth.AllScopes}, []string{live.RunID})
	require.NoError(t, err)
	eng, err := replay.New(replay.Deps{Store: e.st, Starter: e.starter, Temporal: e.tc, TaskQueue: e.queue, MaxRuns: 50, Parallel: 2, Logger: e.log})
	require.NoError(t, err)
	n, err := eng.Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a replay just stored is its request's to start")

	_, err = e.st.Pool.Exec(ctx, `UPDATE replays SET created_at = now() - interval '1 hour' WHERE replay_id = $1`, lost.ReplayID)
	require.NoError(t, err)
	n, err = eng.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	v := e.waitReplay(lost.ReplayID, 2*time.Minute)
	require.Len(t, v.Runs, 1)
	require.Equal(t, "path-changed", v.Runs[0].Verdict, "qty 3 passed > 2 and fails > 3: %+v", v.Runs[0].Diff)
	n, err = eng.Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a done replay is not started again")
}

// TestReplayFailedRun: a run that failed live replays its recorded failure
// (same), and a draft that routes around the failing node now succeeds.
func TestReplayFailedRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startCountingWorker()
	const failing = `{"schemaVersion": 1, "nodes": [
	  {"id": "in", "kind": "input", "outputs": {"out": "any"}},
	  {"id": "flaky", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.fail", "version": 1},
	   "retry": {"maxAttempts": 2, "initialIntervalMs": 100, "backoff": 1}},
	  {"id": "out", "kind": "output", "inputs": {"in": "any"}}],
	  "edges": [{"from": "in.out", "to": "flaky.in"}, {"from": "flaky.out", "to": "out.in"}]}`
	e.publish("flaky", failing)
	live := e.wait(e.run("flaky", map[string]any{"untilAttempt": 99}), time.Minute)
	require.Equal(t, execution.StatusFailed, live.Status)

	same := e.saveDraft("flaky", failing)
	v := e.waitReplay(e.startReplay("flaky", map[string]any{"draftRevision": same}), 2*time.Minute)
	require.Len(t, v.Runs, 1)
	require.Equal(t, "same", v.Runs[0].Verdict, "%+v", v.Runs[0].Diff)
	require.Equal(t, execution.StatusFailed, v.Runs[0].SimulatedStatus)

	// Replays go by node id: the recorded failure of "flaky" replays
	// whatever "flaky" becomes, so the fix is a new node.
	fixed := e.saveDraft("flaky", strings.NewReplacer(`"core.fail"`, `"core.echo"`, `"flaky`, `"steady`).Replace(failing))
	v = e.waitReplay(e.startReplay("flaky", map[string]any{"draftRevision": fixed, "status": []string{"failed"}}), 2*time.Minute)
	require.Len(t, v.Runs, 1)
	require.Equal(t, "now-succeeds", v.Runs[0].Verdict, "%+v", v.Runs[0].Diff)
	require.Equal(t, []string{"steady"}, v.Runs[0].Diff.Unrecorded)
}

// TestReplaySurvivesRestarts: a replay is driven by its workflow, not by
// the API that started it: started while no worker polls, across an API
// restart, it completes once a worker is back.
func TestReplaySurvivesRestarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first, err := inproc.NewWorker(worker.Deps{Config: e.cfg, Store: e.st, Temporal: e.tc, Logger: e.log})
	require.NoError(t, err)
	require.NoError(t, first.Start())
	e.publish("orders", orderGraph(2, ""))
	live := e.wait(e.run("orders", map[string]any{"title": "o", "body": map[string]any{"qty": 5}}), time.Minute)
	require.Equal(t, execution.StatusSucceeded, live.Status, "%+v", live.Error)
	first.Stop()

	draft := e.saveDraft("orders", orderGraph(3, ""))
	id := e.startReplay("orders", map[string]any{"draftRevision": draft})
	e.serveAPIThrough(e.dbURL) // the API restarts; nothing of the replay lived in it
	res := e.do(http.MethodGet, "/v1/replays/"+id, e.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "running", res.JSON(t)["status"], "no worker polls yet")

	e.startWorker()
	v := e.waitReplay(id, 2*time.Minute)
	require.Len(t, v.Runs, 1)
	require.Equal(t, "same", v.Runs[0].Verdict, "%+v", v.Runs[0].Diff)
}

// TestReplayIgnoresRunCaps: a replay's simulations are not held by the
// tenant's run caps, which hold live runs only.
func TestReplayIgnoresRunCaps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startCountingWorker()
	e.publish("orders", orderGraph(2, ""))
	live := e.wait(e.run("orders", map[string]any{"title": "o", "body": map[string]any{"qty": 5}}), time.Minute)
	require.Equal(t, execution.StatusSucceeded, live.Status, "%+v", live.Error)

	// A long live run holds the tenant's only slot: the next live run waits.
	e.publish("sleepy", `{"schemaVersion": 1, "nodes": [
	  {"id": "in", "kind": "input", "outputs": {"out": "any"}},
	  {"id": "nap", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"},
	   "action": {"id": "core.sleep", "version": 1}, "mapping": {"ms": {"literal": 60000}}, "timeoutMs": 90000},
	  {"id": "out", "kind": "output", "inputs": {"in": "any"}}],
	  "edges": [{"from": "in.out", "to": "nap.in"}, {"from": "nap.out", "to": "out.in"}]}`)
	res := e.do(http.MethodPut, "/v1/limits", e.token, map[string]any{"maxConcurrentRuns": 1})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	sleeper := e.run("sleepy", map[string]any{})
	t.Cleanup(func() { e.do(http.MethodPost, "/v1/runs/"+sleeper+"/cancel", e.token, nil) })
	res = e.enqueue("orders", map[string]any{"title": "o", "body": map[string]any{"qty": 1}}, uuid.NewString())
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Equal(t, execution.StatusThrottled, res.JSON(t)["status"], "the cap holds live runs")

	draft := e.saveDraft("orders", orderGraph(3, ""))
	v := e.waitReplay(e.startReplay("orders", map[string]any{"draftRevision": draft, "runs": []string{live.RunID}}), 2*time.Minute)
	require.Len(t, v.Runs, 1)
	require.Equal(t, "same", v.Runs[0].Verdict, "%+v", v.Runs[0].Diff)
	var createdAt, admittedAt time.Time
	require.NoError(t, e.st.Pool.QueryRow(context.Background(), `SELECT created_at, admitted_at FROM runs WHERE run_id = $1`,
		v.Runs[0].SimulationRunID).Scan(&createdAt, &admittedAt))
	require.Less(t, admittedAt.Sub(createdAt), time.Second, "the simulation was admitted at its enqueue, never throttled")
}
