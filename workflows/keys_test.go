package workflows

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
)

// Interpreter version 4's keys name the event: the same event gets the
// same key at whatever ordinal a workflow task records it, and each type
// one node attempt records more than once has a discriminator.
func TestIdentityKeys(t *testing.T) {
	l := eventLog{runID: "r"}
	key := func(typ, node string, attempt int, d execution.EventData, generation int) string {
		return l.identityKey(node, attempt, typ, eventDiscriminator(typ, &d, generation))
	}
	for _, c := range []struct {
		name, typ, node string
		attempt         int
		data            execution.EventData
		generation      int
		want            string
	}{
		{"run-level", execution.EventRunStarted, "", 0, execution.EventData{}, 0, "r/-/0/run.started"},
		{"node attempt", execution.EventNodeStarted, "a", 2, execution.EventData{}, 0, "r/a/2/node.started"},
		{"attempt failed", execution.EventNodeAttemptFailed, "a", 1, execution.EventData{Attempt: 1}, 0, "r/a/1/node.attempt.failed"},
		{"edge taken: its ends", execution.EventEdgeTaken, "a", 1, execution.EventData{From: "a.out", To: "b.in"}, 0, "r/a/1/edge.taken/a.out>b.in"},
		{"edge dead: its ends", execution.EventEdgeDead, "g", 1, execution.EventData{From: "g.fail", To: "h.in"}, 0, "r/g/1/edge.dead/g.fail>h.in"},
		{"lease lost: the re-dispatch", execution.EventNodeAttemptLeaseLost, "a", 1, execution.EventData{Redispatch: 3}, 0, "r/a/1/node.attempt.lease_lost/r3"},
		{"infra retry: the re-dispatch", execution.EventNodeAttemptInfraRetry, "a", 1, execution.EventData{Redispatch: 1}, 0, "r/a/1/node.attempt.infra_retry/r1"},
		{"approval requested: the request", execution.EventNodeApprovalRequested, "ag", 1, execution.EventData{Request: 2}, 0, "r/ag/1/node.approval.requested/q2"},
		{"approval decided: the request", execution.EventNodeApprovalDecided, "ag", 1, execution.EventData{Request: 2}, 0, "r/ag/1/node.approval.decided/q2"},
		{"approval timed out: the request", execution.EventNodeApprovalTimedOut, "ag", 1, execution.EventData{Request: 1}, 0, "r/ag/1/node.approval.timed_out/q1"},
		{"run continued: the execution", execution.EventRunContinued, "", 0, execution.EventData{Reason: execution.ReasonContinueForced}, 4, "r/-/0/run.continued/g4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l.ordinal = 7
			got := key(c.typ, c.node, c.attempt, c.data, c.generation)
			require.Equal(t, c.want, got)
			l.ordinal = 19 // recorded later by a task that saw more history
			require.Equal(t, got, key(c.typ, c.node, c.attempt, c.data, c.generation), "the key depends on the ordinal")
			require.NotRegexp(t, regexp.MustCompile(`/[0-9]+$`), got, "could be a version 3 key")
		})
	}
	// Distinct events of one node attempt and type get distinct keys.
	require.NotEqual(t,
		key(execution.EventEdgeTaken, "in", 1, execution.EventData{From: "in.out", To: "a.in"}, 0),
		key(execution.EventEdgeTaken, "in", 1, execution.EventData{From: "in.out", To: "b.in"}, 0))
	require.NotEqual(t,
		key(execution.EventNodeAttemptInfraRetry, "a", 1, execution.EventData{Redispatch: 1}, 0),
		key(execution.EventNodeAttemptInfraRetry, "a", 1, execution.EventData{Redispatch: 2}, 0))
	require.NotEqual(t,
		key(execution.EventRunContinued, "", 0, execution.EventData{}, 0),
		key(execution.EventRunContinued, "", 0, execution.EventData{}, 1))
}

// The harness's guard: a key that names two events (different ordinals)
// is a problem checkLog reports; one event sent twice is not.
func TestHarnessReportsAKeyNamingTwoEvents(t *testing.T) {
	f := newFakes(t, parsePlan(t, linear), nil)
	ev := func(key string) execution.EventDraft {
		return execution.EventDraft{Key: key, Type: execution.EventNodeStarted, NodeID: "a", Attempt: 1, Data: []byte(`{}`)}
	}
	f.appendFrom("carried", execution.AppendEventsInput{RunID: "run-1", Events: []execution.EventDraft{ev("k1"), ev("k2")}, Through: 2})
	f.appendFrom("flush", execution.AppendEventsInput{RunID: "run-1", Events: []execution.EventDraft{ev("k1"), ev("k2"), ev("k3")}, Through: 3})
	require.Empty(t, f.problems, "the same events sent again")
	f.appendFrom("flush", execution.AppendEventsInput{RunID: "run-1", Events: []execution.EventDraft{ev("k2")}, Through: 4})
	require.Len(t, f.problems, 1)
	require.Contains(t, f.problems[0], "key k2 names events 2 and 4")
	f.appendFrom("flush", execution.AppendEventsInput{RunID: "run-1", Events: []execution.EventDraft{ev("k5"), ev("k6")}, Through: 1})
	require.Len(t, f.problems, 2, "an append whose ordinals cannot be placed")
}

// run.continued names its execution: a chain of executions records one
// per execution, g0, g1, ..., and carries the count on.
func TestRunContinuedKeyNamesTheExecution(t *testing.T) {
	desc := `
in  input
a   action in=in.out
b   action in=a.out
c   action in=b.out
d   action in=c.out
out output in=d.out
`
	p := testParams(execution.ModeLive)
	p.ForceContinueAsNewAfterEvents = 3
	var keys []string
	for gen := 0; ; gen++ {
		require.Less(t, gen, 10, "the chain does not end")
		w := newWF(t, desc, nil)
		err := w.run(p)
		if err == nil {
			break
		}
		next := requireContinued(t, err)
		events := w.f.events()
		last := events[len(events)-1]
		require.Equal(t, execution.EventRunContinued, last.Type)
		keys = append(keys, last.Key)
		require.Equal(t, gen+1, next.Carry.Generation)
		checkLog(t, w.f, "run-1", next.Carry.EventOrdinal-len(events)+1, "")
		p = next
	}
	require.GreaterOrEqual(t, len(keys), 2, "the chain continued once only")
	for gen, k := range keys {
		require.Equal(t, fmt.Sprintf("run-1/-/0/run.continued/g%d", gen), k)
	}
}

// An agent attempt that stops before two calls needing approval records
// two requests of the same attempt: q1 and q2.
func TestTwoApprovalRequestsOfOneAttempt(t *testing.T) {
	w := newWF(t, toolGraph, map[string][]step{"ag": {{ask: 1, thenAsk: 2}}})
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	var keys []string
	for _, e := range w.f.events() {
		if e.NodeID == "ag" && e.Type != execution.EventNodeStarted && e.Type != execution.EventNodeCompleted && e.Type != execution.EventEdgeTaken {
			keys = append(keys, e.Key)
		}
	}
	require.Equal(t, []string{
		"run-1/ag/1/node.approval.requested/q1", "run-1/ag/1/node.approval.timed_out/q1",
		"run-1/ag/1/node.approval.requested/q2", "run-1/ag/1/node.approval.timed_out/q2",
	}, keys)
	require.Len(t, w.f.nodeInputs("ag"), 3, "asked, resumed and asked again, resumed")
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
}

// A simulated approval whose attempt fails is retried as the next attempt
// (version 4): before, every retry was attempt 1 again, so its
// node.started and node.attempt.failed repeated one node attempt's events.
func TestSimulatedApprovalRetryCountsAttempts(t *testing.T) {
	desc := `
in   input
ok   approval in=in.out timeout=60000 retry=3,0,2,0
yes  output in=ok.approved
no   output in=ok.rejected
late output in=ok.timedOut
`
	w := newWF(t, desc, map[string][]step{"ok": {{fail: execution.ErrActionFailed}, {port: "approved"}}})
	require.NoError(t, w.run(testParams(execution.ModeSimulation)))
	var got []string
	for _, e := range w.f.events() {
		if e.NodeID == "ok" {
			got = append(got, e.Key)
		}
	}
	require.Equal(t, []string{
		"run-1/ok/1/node.started", "run-1/ok/1/node.approval.requested/q1",
		"run-1/ok/1/node.attempt.failed", "run-1/ok/1/node.retry.scheduled",
		"run-1/ok/2/node.started", "run-1/ok/2/node.approval.requested/q2", "run-1/ok/2/node.approval.decided/q2",
		"run-1/ok/2/node.completed", "run-1/ok/2/edge.taken/ok.approved>yes.in",
		"run-1/ok/2/edge.dead/ok.rejected>no.in", "run-1/ok/2/edge.dead/ok.timedOut>late.in",
	}, got)
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
}
