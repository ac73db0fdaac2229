package workflows

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

const linear = `
in  input
a   action in=in.out
b   action in=a.out
out output in=b.out
`

func TestLinearChain(t *testing.T) {
	w := newWF(t, linear, nil)
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.JSONEq(t, `{"id":"x"}`, string(w.result().Inline))
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
		"--", "node.completed a", "edge.taken a.out>b.in", "node.started b",
		"--", "node.completed b", "edge.taken b.out>out.in", "node.started out", "node.completed out", "run.succeeded",
	}, w.f.flushes())
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)

	// The run row gets the output in the same append as run.succeeded.
	last := w.f.appends[len(w.f.appends)-1]
	require.JSONEq(t, `{"id":"x"}`, string(last.Run.Output.Inline))
	events := w.f.events()
	d := eventData(t, findEvent(t, events, execution.EventNodeCompleted, "a", 1))
	require.Equal(t, "out", d.Port)
	require.JSONEq(t, `{"id":"x"}`, string(d.Output))
	require.Equal(t, "action", string(eventData(t, findEvent(t, events, execution.EventNodeStarted, "a", 1)).Kind))
	require.Equal(t, "out", eventData(t, events[len(events)-1]).NodeID)

	in := w.f.nodeInputs("b")
	require.Len(t, in, 1)
	require.Equal(t, execution.NodeInput{
		TenantID: "tenant-1", RunID: "run-1", WorkflowKey: "wf", Checksum: "sha256-test", Mode: execution.ModeLive,
		NodeID: "b", Kind: "action", Attempt: 1,
		Inputs:       map[string]execution.Value{"in": {Inline: json.RawMessage(`{"id":"x"}`)}},
		Actor:        execution.Actor{Kind: "user", Sub: "u1"},
		Permissions:  []string{"notes.write"},
		TenantName:   "Tenant One",
		RunStartedAt: testParams(execution.ModeLive).EnqueuedAt,
	}, in[0])
}

const diamond = `
in  input
g   gate   in=in.out
b   action in=g.pass
c   action in=g.fail
m   merge  left=b.out right=c.out
out output in=m.out
`

func TestDiamond(t *testing.T) {
	t.Run("gate pass", func(t *testing.T) {
		w := newWF(t, diamond, nil)
		require.NoError(t, w.run(testParams(execution.ModeLive)))
		require.Equal(t, []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>g.in", "node.started g",
			"node.completed g", "edge.dead g.fail>c.in", "edge.taken g.pass>b.in",
			"node.skipped c DEAD_INPUT", "edge.dead c.out>m.right", "node.started b",
			"--", "node.completed b", "edge.taken b.out>m.left", "node.started m",
			"node.completed m", "edge.taken m.out>out.in", "node.started out", "node.completed out", "run.succeeded",
		}, w.f.flushes())
		checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
		// The merge with one dead input still runs, with only the live port.
		m := w.f.nodeInputs("m")
		require.Len(t, m, 1)
		require.Equal(t, []string{"left"}, keys(m[0].Inputs))
		require.JSONEq(t, `{"left":{"id":"x"}}`, string(w.result().Inline))
	})
	t.Run("gate fail", func(t *testing.T) {
		w := newWF(t, diamond, map[string][]step{"g": {{port: "fail"}}})
		require.NoError(t, w.run(testParams(execution.ModeLive)))
		require.Equal(t, []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>g.in", "node.started g",
			"node.completed g", "edge.taken g.fail>c.in", "edge.dead g.pass>b.in",
			"node.skipped b DEAD_INPUT", "edge.dead b.out>m.left", "node.started c",
			"--", "node.completed c", "edge.taken c.out>m.right", "node.started m",
			"node.completed m", "edge.taken m.out>out.in", "node.started out", "node.completed out", "run.succeeded",
		}, w.f.flushes())
		checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
		require.JSONEq(t, `{"right":{"id":"x"}}`, string(w.result().Inline))
		require.Empty(t, w.f.nodeInputs("b"))
	})
}

func TestValidatorFailBranch(t *testing.T) {
	w := newWF(t, `
in     input
v      validator in=in.out
report action    in=v.fail
save   action    in=v.pass
bad    output    in=report.out
ok     output    in=save.out
`, map[string][]step{"v": {{port: "fail", value: `{"value":{"id":"x"},"errors":["/id: too short"]}`}}})
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>v.in", "node.started v",
		"node.completed v", "edge.taken v.fail>report.in", "edge.dead v.pass>save.in",
		"node.skipped save DEAD_INPUT", "edge.dead save.out>ok.in", "node.skipped ok DEAD_INPUT", "node.started report",
		"--", "node.completed report", "edge.taken report.out>bad.in", "node.started bad", "node.completed bad", "run.succeeded",
	}, w.f.flushes())
	require.JSONEq(t, `{"value":{"id":"x"},"errors":["/id: too short"]}`, string(w.result().Inline))
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
}

func TestAllDeadMergeSkipped(t *testing.T) {
	w := newWF(t, `
in  input
g   gate   in=in.out
a   action in=g.pass
alt output in=g.fail
b   action in=g.pass
m   merge  x=a.out y=b.out
out output in=m.out
`, map[string][]step{"g": {{port: "fail"}}})
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>g.in", "node.started g",
		"node.completed g", "edge.taken g.fail>alt.in", "edge.dead g.pass>a.in", "edge.dead g.pass>b.in",
		"node.skipped a DEAD_INPUT", "edge.dead a.out>m.x", "node.started alt", "node.completed alt",
		"node.skipped b DEAD_INPUT", "edge.dead b.out>m.y", "node.skipped m DEAD_INPUT", "edge.dead m.out>out.in",
		"node.skipped out DEAD_INPUT", "run.succeeded",
	}, w.f.flushes())
	require.Empty(t, w.f.nodeInputs("m"))
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
}

func TestNoOutput(t *testing.T) {
	w := newWF(t, `
in  input
g   gate   in=in.out
a   action in=g.pass
out output in=a.out
`, map[string][]step{"g": {{port: "fail"}}})
	err := w.run(testParams(execution.ModeLive))
	requireAppError(t, err, execution.RunErrNoOutput)
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>g.in", "node.started g",
		"node.completed g", "edge.dead g.pass>a.in", "node.skipped a DEAD_INPUT", "edge.dead a.out>out.in",
		"node.skipped out DEAD_INPUT", "run.failed",
	}, w.f.flushes())
	checkLog(t, w.f, "run-1", 1, execution.StatusFailed)
	last := w.f.appends[len(w.f.appends)-1].Run
	require.Equal(t, &execution.RunError{Code: execution.RunErrNoOutput, Message: "no output node can receive a value"}, last.Error)
}

func TestFirstOutputWins(t *testing.T) {
	t.Run("different workflow tasks", func(t *testing.T) {
		// slowOut has the lower index but its value would come later: the
		// first output to receive a value wins, and slow is cancelled.
		w := newWF(t, `
in      input
fast    action in=in.out
slow    action in=in.out
aSlow   output in=slow.out
bFast   output in=fast.out
`, map[string][]step{"fast": {{value: `"fast"`}}, "slow": {{block: true}}})
		require.NoError(t, w.run(testParams(execution.ModeLive)))
		require.JSONEq(t, `"fast"`, string(w.result().Inline))
		require.Equal(t, []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>fast.in", "edge.taken in.out>slow.in",
			"node.started fast", "node.started slow",
			"--", "node.completed fast", "edge.taken fast.out>bFast.in", "node.started bFast", "node.completed bFast",
			"node.skipped aSlow SETTLED",
			"--", "node.cancel.acknowledged slow",
			"--", "run.succeeded",
		}, w.f.flushes())
		checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
	})
	t.Run("tie in one workflow task goes to compiled order", func(t *testing.T) {
		w := newWF(t, `
in  input
a   action in=in.out
o1  output in=a.out
o2  output in=a.out
`, nil)
		require.NoError(t, w.run(testParams(execution.ModeLive)))
		require.Equal(t, []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
			"--", "node.completed a", "edge.taken a.out>o1.in", "edge.taken a.out>o2.in",
			"node.started o1", "node.completed o1", "node.skipped o2 SETTLED", "run.succeeded",
		}, w.f.flushes())
		checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
	})
}

func TestNodeOutOfAttemptsFailsRunAndCancelsSibling(t *testing.T) {
	w := newWF(t, `
in  input
a   action in=in.out retry=2,10,2,0
b   action in=in.out
m   merge  x=a.out y=b.out
out output in=m.out
`, map[string][]step{"a": {{fail: execution.ErrActionFailed}}, "b": {{block: true}}})
	err := w.run(testParams(execution.ModeLive))
	requireAppError(t, err, execution.RunErrNodeFailed)
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "edge.taken in.out>b.in",
		"node.started a", "node.started b",
		"--", "node.attempt.failed a", "node.retry.scheduled a",
		"--", "node.started a#2",
		"--", "node.attempt.failed a#2", "node.failed a#2", "node.skipped m CANCELLED", "node.skipped out CANCELLED",
		"--", "node.cancel.acknowledged b",
		"--", "run.failed",
	}, w.f.flushes())
	checkLog(t, w.f, "run-1", 1, execution.StatusFailed)

	events := w.f.events()
	failed := eventData(t, findEvent(t, events, execution.EventNodeFailed, "a", 2))
	require.Equal(t, 2, failed.Attempts)
	require.Equal(t, &execution.EventError{Type: execution.ErrActionFailed, Message: "a attempt 2 failed"}, failed.Error)
	runErr := w.f.appends[len(w.f.appends)-1].Run.Error
	require.Equal(t, execution.RunErrNodeFailed, runErr.Code)
	require.Equal(t, "a", runErr.NodeID)
	require.Equal(t, runErr, eventData(t, events[len(events)-1]).RunError)
}

func TestRetryThenSucceed(t *testing.T) {
	w := newWF(t, `
in  input
a   action in=in.out retry=3,1000,2,0
out output in=a.out
`, map[string][]step{"a": {{fail: execution.ErrActionFailed}, {fail: execution.ErrActionFailed}, {}}})
	var timers []time.Duration
	w.env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { timers = append(timers, d) })
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
		"--", "node.attempt.failed a", "node.retry.scheduled a",
		"--", "node.started a#2",
		"--", "node.attempt.failed a#2", "node.retry.scheduled a#2",
		"--", "node.started a#3",
		"--", "node.completed a#3", "edge.taken a.out>out.in", "node.started out", "node.completed out", "run.succeeded",
	}, w.f.flushes())
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second}, timers)

	events := w.f.events()
	for attempt, wantDelay := range map[int]int64{1: 1000, 2: 2000} {
		failed := eventData(t, findEvent(t, events, execution.EventNodeAttemptFailed, "a", attempt))
		require.Equal(t, attempt, failed.Attempt)
		require.True(t, *failed.Retryable)
		require.Equal(t, execution.ErrActionFailed, failed.Error.Type)
		sched := findEvent(t, events, execution.EventNodeRetryScheduled, "a", attempt)
		d := eventData(t, sched)
		require.Equal(t, wantDelay, *d.DelayMs)
		require.Equal(t, attempt+1, d.NextAttempt)
		// The next attempt starts only after the recorded delay.
		next := findEvent(t, events, execution.EventNodeStarted, "a", attempt+1)
		require.Equal(t, time.Duration(wantDelay)*time.Millisecond, next.At.Sub(sched.At))
	}
	require.Len(t, w.f.nodeInputs("a"), 3)
}

func TestNonRetryableEndsNodeAtOnce(t *testing.T) {
	for name, s := range map[string]step{
		"non-retryable flag": {fail: execution.ErrActionFailed, permanent: true},
		"permanent type":     {fail: execution.ErrSchemaViolation},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWF(t, `
in  input
a   action in=in.out retry=5,1000,2,0
out output in=a.out
`, map[string][]step{"a": {s}})
			requireAppError(t, w.run(testParams(execution.ModeLive)), execution.RunErrNodeFailed)
			require.Equal(t, []string{
				"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
				"--", "node.attempt.failed a", "node.failed a", "node.skipped out CANCELLED", "run.failed",
			}, w.f.flushes())
			require.False(t, *eventData(t, findEvent(t, w.f.events(), execution.EventNodeAttemptFailed, "a", 1)).Retryable)
			require.Len(t, w.f.nodeInputs("a"), 1)
			checkLog(t, w.f, "run-1", 1, execution.StatusFailed)
		})
	}
}

func TestCancelRun(t *testing.T) {
	t.Run("in-flight attempt acknowledges", func(t *testing.T) {
		w := newWF(t, linear, map[string][]step{"a": {{block: true}}})
		w.env.RegisterDelayedCallback(w.env.CancelWorkflow, 50*time.Millisecond)
		err := w.run(testParams(execution.ModeLive))
		var canceled *temporal.CanceledError
		require.ErrorAs(t, err, &canceled)
		require.Equal(t, []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
			"--", "run.cancel.requested", "node.skipped b CANCELLED", "node.skipped out CANCELLED",
			"--", "node.cancel.acknowledged a",
			"--", "run.cancelled",
		}, w.f.flushes())
		checkLog(t, w.f, "run-1", 1, execution.StatusCancelled)
		require.Empty(t, w.f.nodeInputs("b"))
	})
	t.Run("node waiting between attempts", func(t *testing.T) {
		w := newWF(t, `
in  input
a   action in=in.out retry=3,60000,2,0
out output in=a.out
`, map[string][]step{"a": {{fail: execution.ErrActionFailed}}})
		w.env.RegisterDelayedCallback(w.env.CancelWorkflow, 10*time.Second)
		var canceled *temporal.CanceledError
		require.ErrorAs(t, w.run(testParams(execution.ModeLive)), &canceled)
		require.Equal(t, []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
			"--", "node.attempt.failed a", "node.retry.scheduled a",
			"--", "run.cancel.requested", "node.cancel.acknowledged a", "node.skipped out CANCELLED", "run.cancelled",
		}, w.f.flushes())
		ack := eventData(t, findEvent(t, w.f.events(), execution.EventNodeCancelAcknowledged, "a", 1))
		require.Equal(t, execution.ReasonRetryWait, ack.Reason)
		require.Len(t, w.f.nodeInputs("a"), 1)
		checkLog(t, w.f, "run-1", 1, execution.StatusCancelled)
	})
}

func TestSimulationRetriesDoNotWait(t *testing.T) {
	w := newWF(t, `
in  input
a   action in=in.out retry=3,120000,2,0
out output in=a.out
`, map[string][]step{"a": {
		{fail: execution.ErrActionFailed, durationMs: 1000},
		{fail: execution.ErrActionFailed, durationMs: 1000},
		{durationMs: 5000},
	}})
	w.env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { t.Errorf("simulation started a %v timer", d) })
	began := time.Now()
	require.NoError(t, w.run(testParams(execution.ModeSimulation)))
	require.Less(t, time.Since(began), 5*time.Second)
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
		"--", "node.attempt.failed a", "node.retry.scheduled a", "node.started a#2",
		"--", "node.attempt.failed a#2", "node.retry.scheduled a#2", "node.started a#3",
		"--", "node.completed a#3", "edge.taken a.out>out.in", "node.started out", "node.completed out", "run.succeeded",
	}, w.f.flushes())
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)

	start := testParams(execution.ModeSimulation).EnqueuedAt
	at := func(typ string, attempt int) time.Duration {
		e := findEvent(t, w.f.events(), typ, "a", attempt)
		return eventData(t, e).VirtualAt.Sub(start)
	}
	// 1 s attempt, 2 min backoff, 1 s attempt, 4 min backoff, 5 s attempt.
	require.Equal(t, time.Duration(0), at(execution.EventNodeStarted, 1))
	require.Equal(t, time.Second, at(execution.EventNodeAttemptFailed, 1))
	require.Equal(t, time.Second+2*time.Minute, at(execution.EventNodeStarted, 2))
	require.Equal(t, 2*time.Second+6*time.Minute, at(execution.EventNodeStarted, 3))
	require.Equal(t, 7*time.Second+6*time.Minute, at(execution.EventNodeCompleted, 3))
	inputs := w.f.nodeInputs("a")
	require.Len(t, inputs, 3)
	require.Equal(t, start.Add(2*time.Second+6*time.Minute), inputs[2].VirtualNow)
	// Nothing waited on the workflow clock either.
	events := w.f.events()
	require.Less(t, events[len(events)-1].At.Sub(events[0].At), time.Minute)
	for _, e := range events {
		require.NotNil(t, eventData(t, e).VirtualAt, "%s has no virtualAt", e.Key)
	}
}

func TestStateQuery(t *testing.T) {
	w := newWF(t, linear, map[string][]step{"a": {{hang: true}}})
	var during []execution.NodeState
	w.env.RegisterDelayedCallback(func() {
		v, err := w.env.QueryWorkflow(execution.QueryState)
		require.NoError(t, err)
		require.NoError(t, v.Get(&during))
		w.f.releaseAll()
	}, 50*time.Millisecond)
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, []execution.NodeState{
		{ID: "in", Kind: "input", Status: execution.NodeSucceeded, Attempt: 1, Port: "out"},
		{ID: "a", Kind: "action", Status: execution.NodeRunning, Attempt: 1},
		{ID: "b", Kind: "action", Status: execution.NodePending},
		{ID: "out", Kind: "output", Status: execution.NodePending},
	}, during)

	v, err := w.env.QueryWorkflow(execution.QueryState)
	require.NoError(t, err)
	var after []execution.NodeState
	require.NoError(t, v.Get(&after))
	require.Equal(t, []string{"in", "a", "b", "out"}, stateField(after, func(s execution.NodeState) string { return s.ID }))
	require.Equal(t, []string{"succeeded", "succeeded", "succeeded", "succeeded"},
		stateField(after, func(s execution.NodeState) string { return s.Status }))
}

func TestDeterministicEventKeys(t *testing.T) {
	desc := `
in  input
a   action in=in.out retry=2,500,2,0
g   gate   in=a.out
out output in=g.pass
`
	steps := map[string][]step{"a": {{fail: execution.ErrActionFailed}, {}}}
	var runs [][]string
	for range 2 {
		w := newWF(t, desc, steps)
		require.NoError(t, w.run(testParams(execution.ModeLive)))
		var ks []string
		for _, e := range w.f.events() {
			ks = append(ks, e.Key)
		}
		runs = append(runs, ks)
	}
	require.Equal(t, runs[0], runs[1])
	require.Equal(t, "run-1/-/0/run.started", runs[0][0])
	require.Contains(t, runs[0], "run-1/a/1/node.retry.scheduled")
	require.Contains(t, runs[0], "run-1/a/2/node.started")
	require.Contains(t, runs[0], "run-1/a/2/edge.taken/a.out>g.in")
}

func TestContinueAsNew(t *testing.T) {
	t.Run("forced after events", func(t *testing.T) {
		p := testParams(execution.ModeLive)
		p.ForceContinueAsNewAfterEvents = 5
		w1 := newWF(t, linear, nil)
		next := requireContinued(t, w1.run(p))
		require.Equal(t, []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
			"--", "node.completed a", "edge.taken a.out>b.in", "run.continued",
		}, w1.f.flushes())
		checkLog(t, w1.f, "run-1", 1, "")
		require.Equal(t, execution.ReasonContinueForced,
			eventData(t, w1.f.events()[len(w1.f.events())-1]).Reason)

		c := next.Carry
		require.NotNil(t, c)
		require.Equal(t, 8, c.EventOrdinal)
		require.Equal(t, []string{"succeeded", "succeeded", "pending", "pending"},
			stateField(c.Nodes, func(s execution.NodeState) string { return s.Status }))
		// Node states and references only: even small values are stored
		// first and carried by reference (the run input with them).
		require.Len(t, c.Ports, 2)
		for _, key := range []string{"in.out", "a.out"} {
			slot := c.Ports[key]
			require.True(t, slot.Fired, key)
			require.Nil(t, slot.Value.Inline, key)
			require.NotNil(t, slot.Value.Ref, key)
		}
		require.Nil(t, next.Input.Inline)
		require.Equal(t, c.Ports["in.out"].Value, next.Input)

		w2 := newWF(t, linear, nil)
		require.NoError(t, w2.run(next))
		require.Equal(t, []string{
			"node.started b",
			"--", "node.completed b", "edge.taken b.out>out.in", "node.started out", "node.completed out", "run.succeeded",
		}, w2.f.flushes())
		checkLog(t, w2.f, "run-1", 9, execution.StatusSucceeded)
		require.Len(t, w2.f.nodeInputs("b"), 1)
		require.Empty(t, w2.f.nodeInputs("a"))
	})
	t.Run("suggested by Temporal, waiting node re-armed", func(t *testing.T) {
		desc := `
in  input
a   action in=in.out retry=2,60000,2,0
out output in=a.out
`
		steps := map[string][]step{"a": {{fail: execution.ErrActionFailed}, {}}}
		w1 := newWF(t, desc, steps)
		w1.env.SetContinueAsNewSuggested(true)
		started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		w1.env.SetStartTime(started)
		next := requireContinued(t, w1.run(testParams(execution.ModeLive)))
		require.Equal(t, []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
			"--", "node.attempt.failed a", "node.retry.scheduled a", "run.continued",
		}, w1.f.flushes())
		waiting := next.Carry.Nodes[1]
		require.Equal(t, execution.NodeWaiting, waiting.Status)
		require.NotNil(t, waiting.RetryAt)

		w2 := newWF(t, desc, steps)
		w2.env.SetStartTime(waiting.RetryAt.Add(-45 * time.Second))
		var timers []time.Duration
		w2.env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { timers = append(timers, d) })
		require.NoError(t, w2.run(next))
		require.Equal(t, []time.Duration{45 * time.Second}, timers)
		require.Equal(t, []string{
			"node.started a#2",
			"--", "node.completed a#2", "edge.taken a.out>out.in", "node.started out", "node.completed out", "run.succeeded",
		}, w2.f.flushes())
		checkLog(t, w2.f, "run-1", next.Carry.EventOrdinal+1, execution.StatusSucceeded)
	})
}

func TestPlanUnavailable(t *testing.T) {
	w := newWF(t, linear, nil)
	p := testParams(execution.ModeLive)
	p.Checksum = "sha256-other"
	requireAppError(t, w.run(p), execution.RunErrPlanUnavailable)
	require.Equal(t, []string{"run.failed"}, w.f.flushes())
	require.Equal(t, execution.StatusFailed, w.f.appends[0].Run.Status)
}

func TestRetryDelay(t *testing.T) {
	cases := []struct {
		initial, maxMs int
		backoff        float64
		attempt        int
		want           time.Duration
	}{
		{1000, 0, 2, 1, time.Second},
		{1000, 0, 2, 2, 2 * time.Second},
		{1000, 0, 2, 3, 4 * time.Second},
		{1000, 3000, 2, 3, 3 * time.Second},
		{500, 0, 1, 4, 500 * time.Millisecond},
		{1000, 0, 0, 3, time.Second}, // backoff < 1 is treated as 1
		{1000, 0, 1000, 9, maxRetryDelay},
	}
	for _, c := range cases {
		got := retryDelay(graph.Retry{MaxAttempts: 10, InitialIntervalMs: c.initial, Backoff: c.backoff, MaxIntervalMs: c.maxMs}, c.attempt)
		require.Equal(t, c.want, got, "%+v", c)
	}
}

func TestClassify(t *testing.T) {
	require.Equal(t, failure{typ: "X", message: "m", retryable: true},
		classify(temporal.NewApplicationError("m", "X")))
	require.Equal(t, failure{typ: "X", message: "m"},
		classify(temporal.NewNonRetryableApplicationError("m", "X", nil)))
	require.False(t, classify(temporal.NewApplicationError("m", execution.ErrPermissionDenied)).retryable)
	f := classify(temporal.NewTimeoutError(0, nil))
	require.Equal(t, errTypeTimeout, f.typ)
	require.True(t, f.retryable)
	require.True(t, classify(errors.New("boom")).retryable)
	require.False(t, classify(temporal.NewCanceledError()).retryable)
}

func requireAppError(t *testing.T, err error, typ string) {
	t.Helper()
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, typ, app.Type())
	require.True(t, app.NonRetryable())
}

func requireContinued(t *testing.T, err error) execution.RunParams {
	t.Helper()
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, err, &can)
	require.Equal(t, execution.WorkflowName, can.WorkflowType.Name)
	var next execution.RunParams
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	return next
}

func keys(m map[string]execution.Value) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func stateField(states []execution.NodeState, f func(execution.NodeState) string) []string {
	out := make([]string, len(states))
	for k, s := range states {
		out[k] = f(s)
	}
	return out
}
