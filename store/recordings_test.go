package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/fixtures"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// runLog appends a run's events the way the interpreter records them.
type runLog struct {
	t      *testing.T
	st     *store.Store
	tenant string
	runID  string
	n      int
}

func (l *runLog) add(typ, nodeID string, attempt int, at time.Duration, d execution.EventData) {
	l.addWith(typ, nodeID, attempt, at, d, nil)
}

func (l *runLog) addWith(typ, nodeID string, attempt int, at time.Duration, d execution.EventData, upd *execution.RunUpdate) {
	l.t.Helper()
	l.n++
	raw, err := json.Marshal(d)
	require.NoError(l.t, err)
	ev := execution.EventDraft{Key: fmt.Sprintf("%s/%s/%d/%s/%d", l.runID, nodeID, attempt, typ, l.n), Type: typ,
		NodeID: nodeID, Attempt: attempt, At: t0.Add(at), Data: raw}
	require.NoError(l.t, l.st.AppendEvents(context.Background(), l.tenant, l.runID, []execution.EventDraft{ev}, upd))
}

// value is a JSON object of about n bytes holding a secret under "apiKey".
func value(n int) json.RawMessage {
	return json.RawMessage(`{"apiKey":"sk-live","text":"` + strings.Repeat("y", n) + `"}`)
}

// completed records a node.completed of value v the way the interpreter's
// valueData puts it in the event: inline up to MaxEventValueBytes, else
// truncated with its size.
func completed(port string, v json.RawMessage) execution.EventData {
	d := execution.EventData{Port: port}
	if len(v) > execution.MaxEventValueBytes {
		d.Truncated, d.OutputSize = true, len(v)
	} else {
		d.Output = v
	}
	return d
}

func TestRunRecordingResolvesEveryValue(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	l := &runLog{t: t, st: st, tenant: "t1", runID: run.RunID}
	mid := value(20 << 10) // between the event's bound and the claim check
	big := value(40 << 10)
	bigRef, err := st.PutValue(ctx, "t1", run.RunID, "big", "out", big)
	require.NoError(t, err)
	// The compiled revision names the kinds of nodes that never started.
	compiled := &graph.Compiled{Checksum: run.Checksum, Document: graph.Document{Nodes: []graph.Node{
		{ID: "skipped", Kind: graph.KindAction}}}}
	require.NoError(t, st.PutCompiled(ctx, "t1", compiled, &graph.Plan{Checksum: run.Checksum}))

	l.add(execution.EventRunStarted, "", 0, 0, execution.EventData{Mode: execution.ModeLive, Revision: 1})
	// agent: a failed first attempt, a 20 KiB output from the second.
	l.add(execution.EventNodeStarted, "agent", 1, time.Second, execution.EventData{Kind: graph.KindAgent})
	l.add(execution.EventNodeAttemptFailed, "agent", 1, 2*time.Second, execution.EventData{Attempt: 1,
		Error: &execution.EventError{Type: "ACTION_TIMEOUT", Message: "slow"}})
	l.add(execution.EventNodeRetryScheduled, "agent", 1, 2*time.Second, execution.EventData{NextAttempt: 2})
	l.add(execution.EventNodeStarted, "agent", 2, 10*time.Second, execution.EventData{Kind: graph.KindAgent})
	require.NoError(t, st.PutNodeResult(ctx, "t1", run.RunID, "agent", 2, 0, "out", mid, len(mid)))
	l.add(execution.EventNodeCompleted, "agent", 2, 12500*time.Millisecond, completed("out", mid))
	// small: inline in its event.
	l.add(execution.EventNodeStarted, "small", 1, 13*time.Second, execution.EventData{Kind: graph.KindAction})
	l.add(execution.EventNodeCompleted, "small", 1, 13*time.Second+20*time.Millisecond, completed("out", value(10)))
	// big: claim-checked.
	l.add(execution.EventNodeStarted, "big", 1, 14*time.Second, execution.EventData{Kind: graph.KindAction})
	l.add(execution.EventNodeCompleted, "big", 1, 15*time.Second, execution.EventData{Port: "out", OutputRef: &bigRef})
	// decide: failed its check.
	l.add(execution.EventNodeStarted, "decide", 1, 16*time.Second, execution.EventData{Kind: graph.KindAgentDecision})
	l.add(execution.EventNodeCompleted, "decide", 1, 17*time.Second, completed("fail", json.RawMessage(`{"q":1}`)))
	// ok: an approval approved after a minute.
	l.add(execution.EventNodeStarted, "ok", 1, 20*time.Second, execution.EventData{Kind: graph.KindApproval})
	l.add(execution.EventNodeApprovalRequested, "ok", 1, 20*time.Second, execution.EventData{Request: 1, TimeoutMs: 3_600_000})
	l.add(execution.EventNodeApprovalDecided, "ok", 1, 80*time.Second, execution.EventData{Request: 1, Decision: "approve"})
	l.add(execution.EventNodeCompleted, "ok", 1, 80*time.Second, completed(graph.PortApproved, json.RawMessage(`{"q":1}`)))
	// broken: failed; skipped: never ran.
	l.add(execution.EventNodeStarted, "broken", 1, 81*time.Second, execution.EventData{Kind: graph.KindAction})
	l.add(execution.EventNodeFailed, "broken", 1, 81*time.Second+5*time.Millisecond, execution.EventData{Attempts: 1,
		Error: &execution.EventError{Type: "ACTION_FAILED", Message: "no"}})
	l.add(execution.EventNodeSkipped, "skipped", 0, 82*time.Second, execution.EventData{Reason: execution.SkipDeadInput})
	out := execution.Value{Inline: json.RawMessage(`{"done":true}`)}
	l.addWith(execution.EventRunSucceeded, "", 0, 83*time.Second, execution.EventData{NodeID: "out"},
		&execution.RunUpdate{Status: execution.StatusSucceeded, Output: &out})

	rec, err := st.RunRecording(ctx, "t1", run.RunID)
	require.NoError(t, err)
	require.True(t, rec.Replayable, "reason %q", rec.Reason)
	require.Empty(t, rec.Reason)
	require.Equal(t, execution.StatusSucceeded, rec.Status)
	require.Equal(t, string(execution.ModeLive), rec.Mode)
	require.JSONEq(t, `{"done":true}`, string(rec.Output))
	require.JSONEq(t, `{"id":"a"}`, string(rec.Input))
	require.Nil(t, rec.Error)
	require.Len(t, rec.Nodes, 7)

	redacted := func(v json.RawMessage) string { return strings.Replace(string(v), `"sk-live"`, `"[REDACTED]"`, 1) }
	agent := rec.Nodes["agent"]
	require.Equal(t, store.NodeRecording{NodeID: "agent", Kind: "agent", Status: execution.NodeSucceeded, Port: "out",
		Output: agent.Output, Attempts: 2, DurationMs: 2500, Recorded: true}, agent)
	require.JSONEq(t, redacted(mid), string(agent.Output), "the 20 KiB output, redacted")
	require.JSONEq(t, redacted(value(10)), string(rec.Nodes["small"].Output))
	require.EqualValues(t, 20, rec.Nodes["small"].DurationMs)
	require.JSONEq(t, redacted(big), string(rec.Nodes["big"].Output), "claim-checked values are redacted too")
	require.Equal(t, "fail", rec.Nodes["decide"].Port)
	ok := rec.Nodes["ok"]
	require.Equal(t, fixtures.DecisionApprove, ok.Decision)
	require.EqualValues(t, 60_000, ok.DurationMs)
	broken := rec.Nodes["broken"]
	require.Equal(t, execution.NodeFailed, broken.Status)
	require.Equal(t, &execution.EventError{Type: "ACTION_FAILED", Message: "no"}, broken.Error)
	require.EqualValues(t, 5, broken.DurationMs)
	require.Equal(t, execution.NodeSkipped, rec.Nodes["skipped"].Status)
	require.Equal(t, "action", rec.Nodes["skipped"].Kind)
	require.True(t, rec.Nodes["skipped"].Recorded)

	// The recording derives a replay's fixtures.
	doc := graph.Document{Nodes: []graph.Node{
		{ID: "agent", Kind: graph.KindAgent}, {ID: "small", Kind: graph.KindAction}, {ID: "big", Kind: graph.KindAction},
		{ID: "decide", Kind: graph.KindAgentDecision}, {ID: "ok", Kind: graph.KindApproval},
		{ID: "broken", Kind: graph.KindAction}, {ID: "skipped", Kind: graph.KindAction},
	}}
	set, unrecorded, err := fixtures.FromRecording(&doc, rec.NodeResults(), nil)
	require.NoError(t, err)
	require.Equal(t, []string{"skipped"}, unrecorded)
	require.JSONEq(t, redacted(mid), string(set["agent"][0].Output))
	require.EqualValues(t, 2500, set["agent"][0].DurationMs)
	require.Equal(t, fixtures.OutcomeFail, set["decide"][0].Outcome)
	require.Equal(t, fixtures.DecisionApprove, set["ok"][0].Decision)
	require.Equal(t, "ACTION_FAILED", set["broken"][0].Error.Type)

	// Another tenant's run is not found.
	_, err = st.RunRecording(ctx, "t2", run.RunID)
	require.ErrorIs(t, err, failure.ErrNotFound)
	_, err = st.RunRecording(ctx, "t1", "run_missing")
	require.ErrorIs(t, err, failure.ErrNotFound)
}

func TestRunRecordingOfAnOldRunWithoutNodeResults(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	l := &runLog{t: t, st: st, tenant: "t1", runID: run.RunID}
	l.add(execution.EventNodeStarted, "agent", 1, 0, execution.EventData{Kind: graph.KindAgent})
	// Truncated, and no node_results row: recorded before migration 00018.
	l.add(execution.EventNodeCompleted, "agent", 1, time.Second, completed("out", value(20<<10)))
	l.add(execution.EventNodeStarted, "gate", 1, time.Second, execution.EventData{Kind: graph.KindGate})
	l.add(execution.EventNodeCompleted, "gate", 1, time.Second, completed("true", value(20<<10)))
	l.addWith(execution.EventRunSucceeded, "", 0, 2*time.Second, execution.EventData{},
		&execution.RunUpdate{Status: execution.StatusSucceeded})

	rec, err := st.RunRecording(ctx, "t1", run.RunID)
	require.NoError(t, err)
	require.False(t, rec.Replayable)
	require.Equal(t, store.RecordingResultsMissing, rec.Reason)
	require.False(t, rec.Nodes["agent"].Recorded)
	require.Nil(t, rec.Nodes["agent"].Output)
	require.True(t, rec.Nodes["gate"].Recorded, "a gate's value is recomputed by a replay")
	require.NotContains(t, rec.NodeResults(), "agent", "unrecoverable nodes are left out of the fixtures' input")
}

func TestRunRecordingClaimCheckedValueGone(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	l := &runLog{t: t, st: st, tenant: "t1", runID: run.RunID}
	ref := execution.ValueRef{NodeID: "act", Port: "out", SHA256: strings.Repeat("0", 64), Size: 40 << 10}
	l.add(execution.EventNodeStarted, "act", 1, 0, execution.EventData{Kind: graph.KindAction})
	l.add(execution.EventNodeCompleted, "act", 1, time.Second, execution.EventData{Port: "out", OutputRef: &ref})
	l.addWith(execution.EventRunFailed, "", 0, 2*time.Second, execution.EventData{},
		&execution.RunUpdate{Status: execution.StatusFailed, Error: &execution.RunError{Code: "NODE_FAILED", Message: "x", NodeID: "b"}})
	rec, err := st.RunRecording(ctx, "t1", run.RunID)
	require.NoError(t, err)
	require.Equal(t, store.RecordingResultsMissing, rec.Reason)
	require.Equal(t, &execution.EventError{Type: "NODE_FAILED", Message: "x"}, rec.Error)
	require.Nil(t, rec.Output)
}

func TestRunRecordingNotReplayable(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()

	open := createRun(t, st, "t1")
	rec, err := st.RunRecording(ctx, "t1", open.RunID)
	require.NoError(t, err)
	require.False(t, rec.Replayable)
	require.Equal(t, store.RecordingNotTerminal, rec.Reason)

	sim := newRunValue("t1", "wf", "sim")
	sim.Mode = string(execution.ModeSimulation)
	sim, _, err = st.CreateRun(ctx, sim, "sim")
	require.NoError(t, err)
	require.NoError(t, st.AppendEvents(ctx, "t1", sim.RunID, []execution.EventDraft{draft("z", execution.EventRunSucceeded, "")},
		&execution.RunUpdate{Status: execution.StatusSucceeded}))
	rec, err = st.RunRecording(ctx, "t1", sim.RunID)
	require.NoError(t, err)
	require.Equal(t, store.RecordingNotLive, rec.Reason)

	// Retention deleted the events of an old run.
	old := closedRun(t, st, "t1", "old", time.Now().Add(-40*24*time.Hour))
	_, err = st.DeleteEventsOfRunsClosedBefore(ctx, time.Now().Add(-30*24*time.Hour))
	require.NoError(t, err)
	rec, err = st.RunRecording(ctx, "t1", old.RunID)
	require.NoError(t, err)
	require.False(t, rec.Replayable)
	require.Equal(t, store.RecordingResultsDeleted, rec.Reason)
	require.Empty(t, rec.Nodes)
}

func TestPutNodeResultIsIdempotentAndLaterDispatchesWin(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	stored := func() (string, int) {
		var v string
		var redispatch int
		require.NoError(t, st.Pool.QueryRow(ctx, `SELECT value::text, redispatch FROM node_results
			WHERE tenant_id = 't1' AND run_id = $1 AND node_id = 'n' AND attempt = 1`, run.RunID).Scan(&v, &redispatch))
		return v, redispatch
	}
	put := func(redispatch int, v string) {
		require.NoError(t, st.PutNodeResult(ctx, "t1", run.RunID, "n", 1, redispatch, "out", json.RawMessage(v), len(v)))
	}
	put(0, `{"v":"first","password":"p"}`)
	put(0, `{"v":"first again"}`) // a retry of the same dispatch: the first stays
	v, _ := stored()
	require.JSONEq(t, `{"v":"first","password":"[REDACTED]"}`, v)
	put(2, `{"v":"third"}`)
	put(1, `{"v":"zombie"}`) // an earlier dispatch finishing late
	v, redispatch := stored()
	require.JSONEq(t, `{"v":"third"}`, v)
	require.Equal(t, 2, redispatch)
	require.Equal(t, 1, count(t, st, `SELECT count(*) FROM node_results WHERE run_id = $1`, run.RunID))

	// Numbers stay as written: no rounding beyond 2^53.
	put(3, `{"id":12345678901234567890,"f":1.50}`)
	v, _ = stored()
	require.Equal(t, `{"f": 1.50, "id": 12345678901234567890}`, v)

	err := st.PutNodeResult(ctx, "t1", run.RunID, "n", 2, 0, "out", json.RawMessage(`{`), 1)
	require.Equal(t, failure.CodeInvalidRequest, failure.CodeOf(err))
}
