package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/bridges"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/internal/testinfra/inproc"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/worker"
)

// Authorization on every tool call and action attempt (issue 12), end to
// end: the API, a real dev server, PostgreSQL and the production worker
// registration.

// gate is a test action a run waits in until the test releases it, so a
// revocation lands exactly between two steps (no timing).
type gate struct {
	held    chan struct{}
	release chan struct{}
	// writes counts test.flaky.note@1's writing attempts.
	writes atomic.Int32
}

func newGate() *gate { return &gate{held: make(chan struct{}, 8), release: make(chan struct{}, 8)} }

// pass waits until the run is in the gate, then lets it through.
func (g *gate) pass(t *testing.T, then func()) {
	t.Helper()
	select {
	case <-g.held:
	case <-time.After(60 * time.Second):
		t.Fatal("the run never reached the gate")
	}
	then()
	g.release <- struct{}{}
}

func (g *gate) wait(ctx context.Context) error {
	g.held <- struct{}{}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-g.release:
		return nil
	}
}

// authzActions are the test actions: test.hold@1 (an agent tool that waits
// in the gate) and test.flaky.note@1 (an action that needs notes.write;
// its first attempt waits in the gate and fails retryably, later ones
// write a note).
func authzActions(g *gate, notes catalog.NoteWriter) []catalog.Action {
	hold := graph.ActionContract{ID: "test.hold", Version: 1, Risk: graph.RiskRead, Description: "Waits for the test.",
		InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{}`), RequiredPermissions: []string{},
		TimeoutMs: 120000, Idempotency: catalog.IdempotencyNone}
	flaky := graph.ActionContract{ID: "test.flaky.note", Version: 1, Risk: graph.RiskWorkspaceWrite, Description: "Fails once, then writes a note.",
		InputSchema: json.RawMessage(`{}`), OutputSchema: json.RawMessage(`{}`), RequiredPermissions: []string{auth.ScopeNotesWrite},
		TimeoutMs: 120000, Idempotency: catalog.IdempotencyLedger}
	return []catalog.Action{
		{Contract: hold, Handler: func(ctx context.Context, _ catalog.Call) (json.RawMessage, error) {
			if err := g.wait(ctx); err != nil {
				return nil, err
			}
			return json.RawMessage(`{"held":true}`), nil
		}},
		{Contract: flaky, Handler: func(ctx context.Context, c catalog.Call) (json.RawMessage, error) {
			if c.Attempt == 1 {
				if err := g.wait(ctx); err != nil {
					return nil, err
				}
				return nil, fmt.Errorf("the first attempt fails")
			}
			g.writes.Add(1)
			id, err := notes.WriteNoteOnce(ctx, c.TenantID, c.RunID, c.NodeID, c.IdempotencyKey, "h", "flaky", json.RawMessage(`{}`), c.Actor)
			if err != nil {
				return nil, err
			}
			return json.Marshal(map[string]string{"noteId": id})
		}},
	}
}

// newAuthzEnv is newAgentEnv with the test actions registered on the
// worker and published to the catalog.
func newAuthzEnv(t *testing.T) (*env, *gate) {
	t.Helper()
	e := newAgentEnv(t)
	g := newGate()
	actions := authzActions(g, e.st)
	reg, err := catalog.NewRegistry(actions...)
	require.NoError(t, err)
	require.NoError(t, reg.Publish(context.Background(), e.st))
	inproc.Worker(t, worker.Deps{Config: e.cfg, Store: e.st, Temporal: e.tc, Logger: e.log, Actions: actions})
	return e, g
}

// soloAgentGraph is input → agent node "agent" (agent key) → output.
func soloAgentGraph(key string) string {
	return fmt.Sprintf(`{"schemaVersion": 1, "nodes": [
		{"id": "in", "kind": "input", "outputs": {"out": "any"}},
		{"id": "agent", "kind": "agent", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "agent": {"key": %q, "revision": 1}},
		{"id": "out", "kind": "output", "inputs": {"in": "any"}}],
		"edges": [{"from": "in.out", "to": "agent.in"}, {"from": "agent.out", "to": "out.in"}]}`, key)
}

// noteNotes is an agent that writes a note, waits in the gate, and writes
// another.
const noteNotes = `{
  "instructions": "Write two notes.",
  "allowedTools": ["workspace.notes.write@1", "test.hold@1"],
  "sim": {"toolCalls": [
      {"tool": "workspace.notes.write@1", "input": {"title": "first", "body": 1}},
      {"tool": "test.hold@1", "input": {}},
      {"tool": "workspace.notes.write@1", "input": {"title": "second", "body": 2}}],
    "output": {"summary": "done"}}
}`

// echoThenNote calls core.echo, then writes a note.
const echoThenNote = `{
  "instructions": "Look up, then write.",
  "allowedTools": ["core.echo@1", "workspace.notes.write@1"],
  "sim": {"toolCalls": [
      {"tool": "core.echo@1", "input": {"look": "up"}},
      {"tool": "workspace.notes.write@1", "input": {"title": "by a service actor", "body": {"n": 1}}}],
    "output": {"summary": "done"}}
}`

// noteView is one note of GET /v1/notes.
type noteView struct {
	NoteID      string           `json:"noteId"`
	RunID       string           `json:"runId"`
	Title       string           `json:"title"`
	Actor       *execution.Actor `json:"actor"`
	RequestedBy *string          `json:"requestedBy"`
}

func (e *env) notesOfRun(runID string) []noteView {
	e.t.Helper()
	res := e.do(http.MethodGet, "/v1/notes?limit=200", e.token, nil)
	require.Equal(e.t, http.StatusOK, res.Status, "%s", res.Body)
	var page struct{ Notes []noteView }
	require.NoError(e.t, json.Unmarshal(res.Body, &page))
	var out []noteView
	for _, n := range page.Notes {
		if n.RunID == runID {
			out = append(out, n)
		}
	}
	return out
}

// offered returns the tools each agent.turn event of node offered.
func (e *env) offered(id, node string) [][]string {
	e.t.Helper()
	var out [][]string
	for _, ev := range e.events(id) {
		if ev.Type != agents.EventAgentTurn || ev.NodeID != node {
			continue
		}
		var d struct{ Tools []string }
		require.NoError(e.t, json.Unmarshal(ev.Data, &d))
		out = append(out, d.Tools)
	}
	return out
}

func (e *env) toolEventData(id, typ string, ordinal int) map[string]any {
	e.t.Helper()
	for _, ev := range e.events(id) {
		var d map[string]any
		require.NoError(e.t, json.Unmarshal(ev.Data, &d))
		if ev.Type == typ && d["ordinal"] == float64(ordinal) {
			return d
		}
	}
	e.t.Fatalf("run %s has no %s for call %d", id, typ, ordinal)
	return nil
}

// TestRevokedScopeIsDeniedAtTheNextCall: a user's notes.write revoked while
// her agent waits between two note writes denies the second write (nothing
// written, tool.denied, the agent goes on), and revoked between two
// attempts of an action node refuses the next attempt (PERMISSION_DENIED,
// not retried, the handler never called again).
func TestRevokedScopeIsDeniedAtTheNextCall(t *testing.T) {
	t.Parallel()
	e, g := newAuthzEnv(t)
	e.addAgent("scribe", noteNotes)
	e.publish("scribe", soloAgentGraph("scribe"))
	bob := e.mint(e.tenant, "bob", auth.AllScopes...)

	id := e.runAs(bob, "scribe", map[string]any{"n": 1})
	g.pass(t, func() {
		res := e.do(http.MethodPost, "/v1/revocations", e.token, map[string]any{"sub": "bob", "scope": auth.ScopeNotesWrite})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	})
	v := e.wait(id, 60*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status, "a denied tool does not fail the node: %v", e.eventTypes(id))
	require.Equal(t, []string{
		"tool.started agent 1 workspace.notes.write@1", "tool.completed agent 1 workspace.notes.write@1",
		"tool.started agent 2 test.hold@1", "tool.completed agent 2 test.hold@1",
		"tool.denied agent 3 workspace.notes.write@1 TOOL_NOT_GRANTED",
	}, e.toolEvents(id))
	denied := e.toolEventData(id, execution.EventToolDenied, 3)
	require.Equal(t, []any{auth.ScopeNotesWrite}, denied["missing"])
	require.Contains(t, denied["message"], "notes.write revoked from bob")
	notes := e.notesOfRun(id)
	require.Len(t, notes, 1, "the second note was not written")
	require.Equal(t, "first", notes[0].Title)
	require.Equal(t, &execution.Actor{Kind: "user", Sub: "bob"}, notes[0].Actor)
	require.Equal(t, "bob", *notes[0].RequestedBy)
	e.checkChain(id)

	// An action node: attempt 1 runs (and fails retryably) before the
	// revocation; attempt 2 is refused before its handler runs.
	e.publish("flaky", `{"schemaVersion": 1, "nodes": [
		{"id": "in", "kind": "input", "outputs": {"out": "any"}},
		{"id": "save", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "test.flaky.note", "version": 1},
		 "retry": {"maxAttempts": 3, "initialIntervalMs": 100, "backoff": 1}},
		{"id": "out", "kind": "output", "inputs": {"in": "any"}}],
		"edges": [{"from": "in.out", "to": "save.in"}, {"from": "save.out", "to": "out.in"}]}`)
	carol := e.mint(e.tenant, "carol", auth.AllScopes...)
	id = e.runAs(carol, "flaky", map[string]any{"n": 2})
	g.pass(t, func() {
		res := e.do(http.MethodPost, "/v1/revocations", e.token, map[string]any{"sub": "carol", "scope": auth.ScopeNotesWrite})
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	})
	v = e.wait(id, 60*time.Second)
	require.Equal(t, execution.StatusFailed, v.Status, "%v", e.eventTypes(id))
	require.Equal(t, execution.RunErrNodeFailed, v.Error.Code)
	status, attempt, _, reason := v.node(t, "save")
	require.Equal(t, execution.NodeFailed, status)
	require.Equal(t, 2, attempt, "attempt 2 was refused, and not retried")
	require.Equal(t, execution.ErrPermissionDenied, reason)
	require.Zero(t, g.writes.Load(), "the handler ran for attempt 1 only")
	require.Empty(t, e.notesOfRun(id))
	e.checkChain(id)
}

// TestToolGrantsNarrowARun: toolGrants at enqueue leave the run's agents
// only the listed tools, are shown on the run, and bind with the key.
func TestToolGrantsNarrowARun(t *testing.T) {
	t.Parallel()
	e, _ := newAuthzEnv(t)
	e.addAgent("helper", echoThenNote)
	e.publish("helper", soloAgentGraph("helper"))

	body := map[string]any{"input": map[string]any{"n": 1}, "idempotencyKey": "granted", "toolGrants": []string{"core.echo@1", "core.sleep@1"}}
	res := e.do(http.MethodPost, "/v1/workflows/helper/runs", e.token, body)
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	id := res.JSON(t)["runId"].(string)
	v := e.wait(id, 60*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(id))
	require.Equal(t, [][]string{{"core.echo@1"}, {"core.echo@1"}}, e.offered(id, "agent"), "exactly the granted tools the agent allows")
	require.Equal(t, []string{
		"tool.started agent 1 core.echo@1", "tool.completed agent 1 core.echo@1",
		"tool.denied agent 2 workspace.notes.write@1 TOOL_NOT_GRANTED",
	}, e.toolEvents(id))
	require.Contains(t, e.toolEventData(id, execution.EventToolDenied, 2)["message"], "toolGrants")
	require.Empty(t, e.notesOfRun(id))
	run := e.do(http.MethodGet, "/v1/runs/"+id, e.token, nil).JSON(t)
	require.Equal(t, []any{"core.echo@1", "core.sleep@1"}, run["toolGrants"])

	// The same key: the same grants (in any order) are the same run, other
	// grants (or none) a conflict.
	body["toolGrants"] = []string{"core.sleep@1", "core.echo@1"}
	res = e.do(http.MethodPost, "/v1/workflows/helper/runs", e.token, body)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, id, res.JSON(t)["runId"])
	for _, other := range []any{[]string{"core.echo@1"}, nil, []string{}} {
		body["toolGrants"] = other
		res = e.do(http.MethodPost, "/v1/workflows/helper/runs", e.token, body)
		require.Equal(t, http.StatusConflict, res.Status, "%v: %s", other, res.Body)
		require.Equal(t, "IDEMPOTENCY_CONFLICT", res.Code(t))
	}

	// Without grants every allowed tool is offered; the note is written.
	id = e.run("helper", map[string]any{"n": 2})
	require.Equal(t, execution.StatusSucceeded, e.wait(id, 60*time.Second).Status)
	require.Equal(t, [][]string{{"core.echo@1", "workspace.notes.write@1"}, {"core.echo@1", "workspace.notes.write@1"}}, e.offered(id, "agent"))
	require.Len(t, e.notesOfRun(id), 1)
	require.Nil(t, e.do(http.MethodGet, "/v1/runs/"+id, e.token, nil).JSON(t)["toolGrants"])
}

// triggerSchedule creates a paused schedule of key with body, fires it
// once, waits for the run it started to finish and returns it with the
// schedule id.
func (e *env) triggerSchedule(key string, body map[string]any) (runView, string) {
	e.t.Helper()
	body["every"], body["paused"] = "1h", true
	res := e.do(http.MethodPost, "/v1/workflows/"+key+"/schedules", e.token, body)
	require.Equal(e.t, http.StatusCreated, res.Status, "%s", res.Body)
	sched := res.JSON(e.t)
	id := sched["scheduleId"].(string)
	ctx := context.Background()
	h := e.tc.ScheduleClient().GetHandle(ctx, bridges.TemporalScheduleID(e.tenant, id))
	require.NoError(e.t, h.Trigger(ctx, client.ScheduleTriggerOptions{}))
	var runID string
	require.Eventually(e.t, func() bool {
		runs, err := e.st.ListRuns(ctx, e.tenant, store.RunFilter{WorkflowKey: key, Limit: 100})
		require.NoError(e.t, err)
		for _, r := range runs {
			if r.Origin.Kind == "schedule" && r.Origin.ID == id {
				runID = r.RunID
				return true
			}
		}
		return false
	}, 60*time.Second, 50*time.Millisecond, "schedule %s never started a run", id)
	return e.wait(runID, 60*time.Second), id
}

// TestServiceActorsGetOnlyTheirToolPolicy: a schedule without a tool
// policy runs its agent with no tool offered; with one, exactly those
// tools; a note its run writes names the schedule and the user who
// configured it. A webhook's policy narrowed while a delivery's run is
// under way takes effect at its next call.
func TestServiceActorsGetOnlyTheirToolPolicy(t *testing.T) {
	t.Parallel()
	e, g := newAuthzEnv(t)
	e.addAgent("helper", echoThenNote)
	e.publish("helper", soloAgentGraph("helper"))

	// No policy: nothing offered, both calls denied, nothing written.
	v, bare := e.triggerSchedule("helper", map[string]any{"input": map[string]any{"n": 1}})
	require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(v.RunID))
	require.Equal(t, [][]string{{}, {}}, e.offered(v.RunID, "agent"), "no tool offered")
	require.Equal(t, []string{
		"tool.denied agent 1 core.echo@1 TOOL_NOT_GRANTED", "tool.denied agent 2 workspace.notes.write@1 TOOL_NOT_GRANTED",
	}, e.toolEvents(v.RunID))
	require.Contains(t, e.toolEventData(v.RunID, execution.EventToolDenied, 1)["message"], "schedule "+bare+"'s tool policy")
	require.Empty(t, e.notesOfRun(v.RunID))
	run := e.do(http.MethodGet, "/v1/runs/"+v.RunID, e.token, nil).JSON(t)
	require.Equal(t, []any{}, run["toolPolicy"])

	// A policy of core.echo@1 only: exactly that tool.
	v, _ = e.triggerSchedule("helper", map[string]any{"input": map[string]any{"n": 2}, "toolPolicy": []string{"core.echo@1"}})
	require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(v.RunID))
	require.Equal(t, [][]string{{"core.echo@1"}, {"core.echo@1"}}, e.offered(v.RunID, "agent"))
	require.Equal(t, []string{
		"tool.started agent 1 core.echo@1", "tool.completed agent 1 core.echo@1",
		"tool.denied agent 2 workspace.notes.write@1 TOOL_NOT_GRANTED",
	}, e.toolEvents(v.RunID))
	require.Empty(t, e.notesOfRun(v.RunID))

	// Both tools: the note names the schedule and alice, who configured it.
	v, full := e.triggerSchedule("helper", map[string]any{"input": map[string]any{"n": 3},
		"toolPolicy": []string{"workspace.notes.write@1", "core.echo@1"}})
	require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(v.RunID))
	require.Equal(t, [][]string{{"core.echo@1", "workspace.notes.write@1"}, {"core.echo@1", "workspace.notes.write@1"}}, e.offered(v.RunID, "agent"))
	notes := e.notesOfRun(v.RunID)
	require.Len(t, notes, 1)
	require.Equal(t, &execution.Actor{Kind: "service", Sub: "schedule:" + full, ConfiguredBy: "alice"}, notes[0].Actor)
	require.Equal(t, "alice", *notes[0].RequestedBy)
	res := e.do(http.MethodGet, "/v1/workflows/helper/schedules/"+full, e.token, nil)
	require.Equal(t, http.StatusOK, res.Status)
	require.Equal(t, []any{"core.echo@1", "workspace.notes.write@1"}, res.JSON(t)["toolPolicy"])

	// A creator cannot give a schedule a tool she could not use herself.
	noNotes := e.mint(e.tenant, "dora", auth.ScopeSchedulesManage, auth.ScopeRunsExecute)
	res = e.do(http.MethodPost, "/v1/workflows/helper/schedules", noNotes,
		map[string]any{"every": "1h", "paused": true, "toolPolicy": []string{"workspace.notes.write@1"}})
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	require.Equal(t, "MISSING_SCOPE", res.Code(t))

	// A webhook whose policy is narrowed between two calls of its run.
	e.addAgent("holder", `{"instructions": "Echo, wait, echo.", "allowedTools": ["core.echo@1", "test.hold@1"],
		"sim": {"toolCalls": [{"tool": "core.echo@1", "input": {}}, {"tool": "test.hold@1", "input": {}}, {"tool": "core.echo@1", "input": {}}],
		"output": {"summary": "done"}}}`)
	e.publish("holder", soloAgentGraph("holder"))
	res = e.do(http.MethodPost, "/v1/workflows/holder/webhooks", e.token, map[string]any{"toolPolicy": []string{"core.echo@1", "test.hold@1"}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	hook := res.JSON(t)
	hookID := hook["webhookId"].(string)
	require.Equal(t, []any{"core.echo@1", "test.hold@1"}, hook["toolPolicy"])
	payload := []byte(`{"n":4}`)
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/hooks/"+hookID, bytes.NewReader(payload))
	require.NoError(t, err)
	req.Header.Set(bridges.SignatureHeader, bridges.SignatureHeaderValue(hook["secret"].(string), time.Now(), payload))
	req.Header.Set(bridges.EventIDHeader, "evt-1")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var accepted struct{ RunID string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&accepted))
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	g.pass(t, func() {
		res := e.do(http.MethodPut, "/v1/workflows/holder/webhooks/"+hookID+"/tool-policy", e.token, map[string]any{"toolPolicy": []string{"test.hold@1"}})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	})
	v = e.wait(accepted.RunID, 60*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(v.RunID))
	require.Equal(t, []string{
		"tool.started agent 1 core.echo@1", "tool.completed agent 1 core.echo@1",
		"tool.started agent 2 test.hold@1", "tool.completed agent 2 test.hold@1",
		"tool.denied agent 3 core.echo@1 TOOL_NOT_GRANTED",
	}, e.toolEvents(v.RunID))
	require.Contains(t, e.toolEventData(v.RunID, execution.EventToolDenied, 3)["message"], "webhook "+hookID+"'s tool policy")
	res = e.do(http.MethodGet, "/v1/workflows/holder/webhooks/"+hookID, e.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, []any{"test.hold@1"}, res.JSON(t)["toolPolicy"])
	require.Equal(t, "alice", res.JSON(t)["toolPolicyUpdatedBy"])
}

// TestMigratedScheduleKeepsItsTools: a schedule created before tool
// policies existed (database at migration 00006) is given, by migration
// 00007, the tools it could use before, and its next firing's agent is
// offered them and writes its note.
func TestMigratedScheduleKeepsItsTools(t *testing.T) {
	t.Parallel()
	dbURL := testinfra.NewEmptyDatabase(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, store.MigrateTo(ctx, pool, 6))

	// Everything but the schedule is set up as before the migration (the
	// tables it touches are older than it); the schedule row as 00005 stored it.
	e := newEnvOn(t, dbURL)
	reg, err := catalog.NewRegistry(catalog.Builtins(catalog.BuiltinDeps{Notes: e.st})...)
	require.NoError(t, err)
	require.NoError(t, reg.Publish(ctx, e.st))
	e.addAgent("helper", echoThenNote)
	e.publish("helper", soloAgentGraph("helper"))
	_, err = pool.Exec(ctx, `INSERT INTO schedules (tenant_id, schedule_id, workflow_key, spec, input, created_by, scopes, temporal_schedule_id)
		VALUES ($1, 'sch_legacy', 'helper', '{"every":"1h"}', '{"n":1}', 'alice', $2, 'weft-sched-legacy')`, e.tenant, auth.AllScopes)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO schedules (tenant_id, schedule_id, workflow_key, spec, input, created_by, scopes, temporal_schedule_id)
		VALUES ($1, 'sch_narrow', 'helper', '{"every":"1h"}', '{"n":2}', 'erin', $2, 'weft-sched-narrow')`,
		e.tenant, []string{auth.ScopeRunsExecute})
	require.NoError(t, err)

	require.NoError(t, store.Migrate(ctx, pool))
	e.startWorker()
	legacy, err := e.st.GetSchedule(ctx, e.tenant, "sch_legacy")
	require.NoError(t, err)
	require.True(t, slices.Contains(legacy.ToolPolicy, "workspace.notes.write@1") && slices.Contains(legacy.ToolPolicy, "core.echo@1"),
		"policy %v", legacy.ToolPolicy)
	require.NotContains(t, legacy.ToolPolicy, "core.http.fetch@1", "external actions never ran")

	enq, err := bridges.NewEnqueuer(e.st, e.starter, e.vars, e.log)
	require.NoError(t, err)
	fire := func(id string) runView {
		res, err := enq.FireSchedule(ctx, e.tenant, id, time.Now().Truncate(time.Second))
		require.NoError(t, err)
		require.Nil(t, res.Refusal)
		require.NotEmpty(t, res.RunID)
		return e.wait(res.RunID, 60*time.Second)
	}
	v := fire("sch_legacy")
	require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(v.RunID))
	require.Equal(t, []string{
		"tool.started agent 1 core.echo@1", "tool.completed agent 1 core.echo@1",
		"tool.started agent 2 workspace.notes.write@1", "tool.completed agent 2 workspace.notes.write@1",
	}, e.toolEvents(v.RunID), "the migrated schedule keeps its tools")
	notes := e.notesOfRun(v.RunID)
	require.Len(t, notes, 1)
	require.Equal(t, "schedule:sch_legacy", notes[0].Actor.Sub)

	// erin never held notes.write: her schedule could not use the tool
	// before, and still cannot.
	v = fire("sch_narrow")
	require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(v.RunID))
	require.Equal(t, []string{
		"tool.started agent 1 core.echo@1", "tool.completed agent 1 core.echo@1",
		"tool.denied agent 2 workspace.notes.write@1 TOOL_NOT_GRANTED",
	}, e.toolEvents(v.RunID))
}
