package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
)

// From interpreter version 2 a chain of activities needs no flush of its
// own: each attempt carries the buffer and appends it before it runs; only
// the run's end is flushed.
func TestEventsRideAlongWithTheNextActivity(t *testing.T) {
	w := newWF(t, linear, nil)
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
		"--", "node.completed a", "edge.taken a.out>b.in", "node.started b",
		"--", "node.completed b", "edge.taken b.out>out.in", "node.started out", "node.completed out", "run.succeeded",
	}, w.f.flushes())
	require.Equal(t, []string{"carried", "carried", "flush"}, w.f.appendSources())
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
	first := w.f.appends[0]
	require.Equal(t, execution.StatusRunning, first.Run.Status, "the run's start rides along too")
}

// An iteration that arms a timer flushes first: node.retry.scheduled is in
// the log before its timer starts.
func TestRetryScheduledIsFlushedBeforeItsTimer(t *testing.T) {
	w := newWF(t, `
in  input
a   action in=in.out retry=2,5000,2,0
out output in=a.out
`, map[string][]step{"a": {{fail: execution.ErrActionFailed}, {}}})
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
		"--", "node.attempt.failed a", "node.retry.scheduled a",
		"--", "node.started a#2",
		"--", "node.completed a#2", "edge.taken a.out>out.in", "node.started out", "node.completed out", "run.succeeded",
	}, w.f.flushes())
	require.Equal(t, []string{"carried", "flush", "carried", "flush"}, w.f.appendSources())
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
}

// An attempt that fails confirms nothing: the events it carried stay
// buffered and the next append carries them again (keys make it harmless),
// so a carrier that died before appending loses nothing.
func TestUnconfirmedEventsAreCarriedAgain(t *testing.T) {
	w := newWF(t, `
in  input
a   action in=in.out retry=2,0,2,0
out output in=a.out
`, map[string][]step{"a": {{fail: execution.ErrActionFailed}, {}}})
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Len(t, w.f.batches, 2)
	var second []string
	for _, e := range w.f.batches[1].Events {
		second = append(second, describe(e))
	}
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
		"node.attempt.failed a", "node.retry.scheduled a", "node.started a#2",
	}, second, "the failed attempt confirmed nothing, so its batch rides again")
	// The log still holds each event once.
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
		"--", "node.attempt.failed a", "node.retry.scheduled a", "node.started a#2",
		"--", "node.completed a#2", "edge.taken a.out>out.in", "node.started out", "node.completed out", "run.succeeded",
	}, w.f.flushes())
}

// A wide fan-out would copy the buffer into every attempt: above
// carryBudget the iteration flushes instead.
func TestWideFanOutFlushesInsteadOfCarrying(t *testing.T) {
	desc := "in input\n"
	merge := "m merge"
	for k := range 40 {
		desc += "a" + string(rune('A'+k%26)) + string(rune('a'+k/26)) + " action in=in.out\n"
		merge += " p" + string(rune('A'+k%26)) + string(rune('a'+k/26)) + "=a" + string(rune('A'+k%26)) + string(rune('a'+k/26)) + ".out"
	}
	desc += merge + "\nout output in=m.out\n"
	w := newWF(t, desc, nil)
	w.env.SetTestTimeout(time.Minute)
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, "flush", w.f.appendSources()[0], "40 copies of the buffer are over the budget")
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
}

func TestConfirmDropsThroughAnOrdinal(t *testing.T) {
	l := eventLog{runID: "r"}
	l.setUpdate(&execution.RunUpdate{Status: execution.StatusRunning})
	for _, typ := range []string{"a", "b", "c"} {
		l.ordinal++
		l.pending = append(l.pending, execution.EventDraft{Key: l.eventKey("", 0, typ), Type: typ})
	}
	b := l.batch()
	require.Equal(t, 3, b.Through)
	require.NotNil(t, b.Run)
	l.confirm(2)
	require.Len(t, l.pending, 1)
	require.Equal(t, "c", l.pending[0].Type)
	require.Nil(t, l.update, "the update rode with the first batch")
	l.confirm(1) // an older carrier's report changes nothing
	require.Len(t, l.pending, 1)
	l.confirm(3)
	require.Empty(t, l.pending)
}
