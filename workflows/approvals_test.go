package workflows

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// approvalGraph waits up to a minute for a decision; each outcome settles
// the run on its own output.
const approvalGraph = `
in   input
ok   approval in=in.out timeout=60000
yes  output in=ok.approved
no   output in=ok.rejected
late output in=ok.timedOut
`

var alice = execution.Actor{Kind: execution.ActorUser, Sub: "alice", Name: "Alice"}

// updateOutcome is what happened to one update sent in the test environment.
type updateOutcome struct {
	accepted bool
	rejected error
	done     bool
	err      error
	result   execution.ApprovalResult
}

// decideAt sends an UpdateApprove after d of workflow time.
func (w *wfTest) decideAt(d time.Duration, id string, u execution.ApprovalUpdate) *updateOutcome {
	o := &updateOutcome{}
	w.env.RegisterDelayedCallback(func() {
		w.env.UpdateWorkflow(execution.UpdateApprove, id, &testsuite.TestUpdateCallback{
			OnAccept: func() { o.accepted = true },
			OnReject: func(err error) { o.rejected = err },
			OnComplete: func(res any, err error) {
				o.done, o.err = true, err
				if err == nil {
					raw, _ := json.Marshal(res)
					_ = json.Unmarshal(raw, &o.result)
				}
			},
		}, u)
	}, d)
	return o
}

// stored is a decision weft's API stored (and the update carrying it).
func (w *wfTest) stored(id, node string, request int, decision, comment string) execution.ApprovalUpdate {
	w.f.storeDecision(id, execution.StoredDecision{NodeID: node, Request: request, Decision: decision, Actor: alice, Comment: comment})
	return execution.ApprovalUpdate{NodeID: node, Decision: decision, Comment: comment, Actor: &alice, Request: request, DecisionID: id}
}

func requireRefused(t *testing.T, o *updateOutcome, code string) {
	t.Helper()
	require.False(t, o.accepted, "accepted")
	var app *temporal.ApplicationError
	require.ErrorAs(t, o.rejected, &app)
	require.Equal(t, code, app.Type(), app.Error())
}

func TestApprovalApprovedThroughWeft(t *testing.T) {
	w := newWF(t, approvalGraph, nil)
	o := w.decideAt(10*time.Second, "d-1", w.stored("d-1", "ok", 1, execution.DecisionApprove, "looks right"))
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.JSONEq(t, `{"id":"x"}`, string(w.result().Inline), "approved carries the node's input")
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>ok.in", "node.started ok",
		"node.approval.requested ok",
		"--", "node.approval.decided ok", "node.completed ok", "edge.taken ok.approved>yes.in",
		"edge.dead ok.rejected>no.in", "edge.dead ok.timedOut>late.in", "node.started yes", "node.completed yes",
		"node.skipped no DEAD_INPUT", "node.skipped late DEAD_INPUT", "run.succeeded",
	}, w.f.flushes())
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)

	req := eventData(t, findEvent(t, w.f.events(), execution.EventNodeApprovalRequested, "ok", 1))
	require.Equal(t, 1, req.Request)
	require.EqualValues(t, 60000, req.TimeoutMs)
	require.NotNil(t, req.DeadlineAt)
	d := eventData(t, findEvent(t, w.f.events(), execution.EventNodeApprovalDecided, "ok", 1))
	require.Equal(t, execution.DecisionApprove, d.Decision)
	require.Equal(t, &alice, d.Actor)
	require.Equal(t, "looks right", d.Comment)
	require.Empty(t, d.UpdateID)
	require.Empty(t, w.f.identities, "a decision weft stored needs no identity lookup")

	require.True(t, o.accepted)
	require.True(t, o.done)
	require.NoError(t, o.err)
	require.Equal(t, "ok", o.result.NodeID)
	require.Equal(t, execution.ApprovalApproved, o.result.Status)
	require.Equal(t, "alice", o.result.Actor.Sub)
	require.Equal(t, req.DeadlineAt.Add(-50*time.Second), *o.result.DecidedAt)
}

func TestApprovalFromAnOperatorIsRecordedAsSuch(t *testing.T) {
	w := newWF(t, approvalGraph, nil)
	w.f.identity = "ops-carol@bastion"
	// The sender claims to be alice, and names no decision weft stored.
	o := w.decideAt(time.Second, "op-1", execution.ApprovalUpdate{NodeID: "ok", Decision: execution.DecisionReject,
		Comment: "not today", Actor: &alice})
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.True(t, o.done)
	d := eventData(t, findEvent(t, w.f.events(), execution.EventNodeApprovalDecided, "ok", 1))
	require.Equal(t, execution.DecisionReject, d.Decision)
	require.Equal(t, &execution.Actor{Kind: execution.ActorOperator, Identity: "ops-carol@bastion"}, d.Actor)
	require.Equal(t, "not today", d.Comment)
	require.Equal(t, "op-1", d.UpdateID)
	require.Len(t, w.f.identities, 1)
	require.Equal(t, "op-1", w.f.identities[0].UpdateID)
	findEvent(t, w.f.events(), execution.EventEdgeTaken, "ok", 1)
	require.Contains(t, w.f.flushes(), "edge.taken ok.rejected>no.in")

	// A decision id that does not match what was stored is no proof either.
	w = newWF(t, approvalGraph, nil)
	u := w.stored("d-2", "ok", 1, execution.DecisionReject, "")
	u.Decision = execution.DecisionApprove
	w.decideAt(time.Second, "d-2", u)
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	d = eventData(t, findEvent(t, w.f.events(), execution.EventNodeApprovalDecided, "ok", 1))
	require.Equal(t, execution.ActorOperator, d.Actor.Kind)
	require.Equal(t, execution.DecisionApprove, d.Decision)
}

func TestApprovalTimesOut(t *testing.T) {
	w := newWF(t, approvalGraph, nil)
	var timers []time.Duration
	w.env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { timers = append(timers, d) })
	late := w.decideAt(61*time.Second, "d-late", w.stored("d-late", "ok", 1, execution.DecisionApprove, ""))
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, []time.Duration{time.Minute}, timers)
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>ok.in", "node.started ok",
		"node.approval.requested ok",
		"--", "node.approval.timed_out ok", "node.completed ok", "edge.dead ok.approved>yes.in",
		"edge.dead ok.rejected>no.in", "edge.taken ok.timedOut>late.in", "node.skipped yes DEAD_INPUT",
		"node.skipped no DEAD_INPUT", "node.started late", "node.completed late", "run.succeeded",
	}, w.f.flushes())
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
	require.False(t, late.accepted, "the run ended before the late decision")
}

func TestApprovalUpdatesRefused(t *testing.T) {
	// After the approval, a retry wait keeps the run open for later updates.
	w := newWF(t, `
in   input
ok   approval in=in.out timeout=60000
a    action in=ok.approved retry=2,60000,2,0
yes  output in=a.out
`, map[string][]step{"a": {{fail: execution.ErrActionFailed}, {}}})
	early := w.decideAt(time.Millisecond, "early", execution.ApprovalUpdate{NodeID: "a", Decision: execution.DecisionApprove})
	ghost := w.decideAt(time.Second, "ghost", execution.ApprovalUpdate{NodeID: "ghost", Decision: execution.DecisionApprove})
	bad := w.decideAt(time.Second, "bad", execution.ApprovalUpdate{NodeID: "ok", Decision: "maybe"})
	long := w.decideAt(time.Second, "long", execution.ApprovalUpdate{NodeID: "ok", Decision: execution.DecisionReject,
		Comment: strings.Repeat("é", execution.MaxApprovalCommentChars+1)})
	stale := w.decideAt(time.Second, "stale", execution.ApprovalUpdate{NodeID: "ok", Decision: execution.DecisionReject, Request: 2})
	first := w.decideAt(2*time.Second, "first", w.stored("first", "ok", 1, execution.DecisionApprove, ""))
	// Right behind the first, while it is being recorded.
	racing := w.decideAt(2*time.Second, "racing", execution.ApprovalUpdate{NodeID: "ok", Decision: execution.DecisionReject})
	second := w.decideAt(30*time.Second, "second", w.stored("second", "ok", 1, execution.DecisionReject, ""))
	other := w.decideAt(30*time.Second, "other", execution.ApprovalUpdate{NodeID: "a", Decision: execution.DecisionApprove})
	require.NoError(t, w.run(testParams(execution.ModeLive)))

	requireRefused(t, early, execution.ErrApprovalNotWaiting)
	requireRefused(t, ghost, execution.ErrApprovalNotWaiting)
	requireRefused(t, bad, execution.ErrInvalidDecision)
	requireRefused(t, long, execution.ErrInvalidDecision)
	requireRefused(t, stale, execution.ErrApprovalNotWaiting)
	require.True(t, first.done)
	require.NoError(t, first.err)
	requireRefused(t, racing, execution.ErrApprovalAlreadyDecided)
	requireRefused(t, second, execution.ErrApprovalAlreadyDecided)
	requireRefused(t, other, execution.ErrApprovalNotWaiting)

	// Refused updates recorded nothing: one decision, one log.
	var decided int
	for _, e := range w.f.events() {
		if e.Type == execution.EventNodeApprovalDecided {
			decided++
		}
	}
	require.Equal(t, 1, decided)
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
}

func TestApprovalWaitEndsWithTheRun(t *testing.T) {
	w := newWF(t, approvalGraph, nil)
	w.env.RegisterDelayedCallback(w.env.CancelWorkflow, 10*time.Second)
	late := w.decideAt(20*time.Second, "late", w.stored("late", "ok", 1, execution.DecisionApprove, ""))
	var canceled *temporal.CanceledError
	require.ErrorAs(t, w.run(testParams(execution.ModeLive)), &canceled)
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>ok.in", "node.started ok",
		"node.approval.requested ok",
		"--", "run.cancel.requested", "node.cancel.acknowledged ok", "node.skipped yes CANCELLED",
		"node.skipped no CANCELLED", "node.skipped late CANCELLED", "run.cancelled",
	}, w.f.flushes())
	ack := eventData(t, findEvent(t, w.f.events(), execution.EventNodeCancelAcknowledged, "ok", 1))
	require.Equal(t, execution.ReasonApprovalWait, ack.Reason)
	checkLog(t, w.f, "run-1", 1, execution.StatusCancelled)
	require.False(t, late.accepted)
}

func TestApprovalWaitIsCarriedAcrossContinueAsNew(t *testing.T) {
	p := testParams(execution.ModeLive)
	p.ForceContinueAsNewAfterEvents = 6
	w1 := newWF(t, approvalGraph, nil)
	next := requireContinued(t, w1.run(p))
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>ok.in", "node.started ok",
		"node.approval.requested ok", "run.continued",
	}, w1.f.flushes())
	waiting := next.Carry.Nodes[1]
	require.Equal(t, execution.NodeAwaitingApproval, waiting.Status)
	require.Equal(t, execution.ApprovalPending, waiting.Approval.Status)
	deadline := *waiting.Approval.DeadlineAt

	w2 := newWF(t, approvalGraph, nil)
	w2.env.SetStartTime(deadline.Add(-20 * time.Second))
	var timers []time.Duration
	w2.env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { timers = append(timers, d) })
	o := w2.decideAt(5*time.Second, "d-1", w2.stored("d-1", "ok", 1, execution.DecisionApprove, ""))
	require.NoError(t, w2.run(next))
	require.Equal(t, []time.Duration{20 * time.Second}, timers, "the time left, not the whole wait again")
	require.True(t, o.done)
	require.Equal(t, []string{
		"node.approval.decided ok", "node.completed ok", "edge.taken ok.approved>yes.in",
		"edge.dead ok.rejected>no.in", "edge.dead ok.timedOut>late.in", "node.started yes", "node.completed yes",
		"node.skipped no DEAD_INPUT", "node.skipped late DEAD_INPUT", "run.succeeded",
	}, w2.f.flushes())
	checkLog(t, w2.f, "run-1", next.Carry.EventOrdinal+1, execution.StatusSucceeded)
}

const toolGraph = `
in  input
ag  agent in=in.out
out output in=ag.out
`

func TestToolApproval(t *testing.T) {
	t.Run("approved: the attempt resumes with the decision", func(t *testing.T) {
		w := newWF(t, toolGraph, map[string][]step{"ag": {{ask: 1}}})
		o := w.decideAt(time.Second, "d-1", w.stored("d-1", "ag", 1, execution.DecisionApprove, "go"))
		require.NoError(t, w.run(testParams(execution.ModeLive)))
		require.True(t, o.done)
		require.Equal(t, []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>ag.in", "node.started ag",
			"--", "node.approval.requested ag",
			"--", "node.approval.decided ag",
			"--", "node.completed ag", "edge.taken ag.out>out.in", "node.started out", "node.completed out", "run.succeeded",
		}, w.f.flushes())
		checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
		in := w.f.nodeInputs("ag")
		require.Len(t, in, 2)
		require.Equal(t, 1, in[0].Attempt)
		require.Nil(t, in[0].Approval)
		require.Equal(t, 1, in[1].Attempt, "a resumption, not a new attempt")
		require.Equal(t, execution.ApprovalApproved, in[1].Approval.Status)
		require.Equal(t, 1, in[1].Approval.Call.Ordinal)
		require.Equal(t, "go", in[1].Approval.Comment)
		req := eventData(t, findEvent(t, w.f.events(), execution.EventNodeApprovalRequested, "ag", 1))
		require.Equal(t, "workspace.notes.write@1", req.Call.Tool)
		require.EqualValues(t, 5000, req.TimeoutMs)
	})
	t.Run("timed out: the attempt resumes to deny the call", func(t *testing.T) {
		w := newWF(t, toolGraph, map[string][]step{"ag": {{ask: 1}}})
		require.NoError(t, w.run(testParams(execution.ModeLive)))
		in := w.f.nodeInputs("ag")
		require.Len(t, in, 2)
		require.Equal(t, execution.ApprovalTimedOut, in[1].Approval.Status)
		findEvent(t, w.f.events(), execution.EventNodeApprovalTimedOut, "ag", 1)
		checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
	})
}

func TestSimulatedApproval(t *testing.T) {
	for _, c := range []struct {
		port, event, output string
		durationMs          int64
	}{
		{graph.PortRejected, execution.EventNodeApprovalDecided, "no", 5000},
		{graph.PortTimedOut, execution.EventNodeApprovalTimedOut, "late", 60000},
		{graph.PortApproved, execution.EventNodeApprovalDecided, "yes", 0},
	} {
		t.Run(c.port, func(t *testing.T) {
			w := newWF(t, approvalGraph, map[string][]step{"ok": {{port: c.port, durationMs: c.durationMs}}})
			require.NoError(t, w.run(testParams(execution.ModeSimulation)))
			ev := findEvent(t, w.f.events(), c.event, "ok", 1)
			d := eventData(t, ev)
			if c.event == execution.EventNodeApprovalDecided {
				require.Equal(t, execution.ActorSimulation, d.Actor.Kind)
			}
			p := testParams(execution.ModeSimulation)
			require.Equal(t, p.EnqueuedAt.Add(time.Duration(c.durationMs)*time.Millisecond), *d.VirtualAt)
			findEvent(t, w.f.events(), execution.EventNodeCompleted, c.output, 1)
			checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
		})
	}
}
