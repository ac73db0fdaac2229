package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

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

// fanOutCall is what the fakes saw of a run's fan-out iteration: whether an
// AppendEvents local activity ran in it (a flush of the buffer as the
// iteration left it, ending with the last fan-out member's node.started),
// and which attempts carried a batch holding every member's node.started.
func fanOutCall(t *testing.T, f *fakes, members ...string) (flushed bool, carriers []string) {
	t.Helper()
	last := "node.started " + members[len(members)-1]
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, events := range f.flushCalls {
		flushed = flushed || describe(events[len(events)-1]) == last
	}
	for k, b := range f.batches {
		started := map[string]bool{}
		for _, e := range b.Events {
			if e.Type == execution.EventNodeStarted {
				started[e.NodeID] = true
			}
		}
		all := true
		for _, m := range members {
			all = all && started[m]
		}
		if all {
			carriers = append(carriers, f.carriers[k])
		}
	}
	return flushed, carriers
}

// From interpreter version 4 a fan-out of read actions schedules no
// flush: exactly one attempt, the first in compiled order, carries the
// buffer with every member's node.started, and the others carry nothing.
func TestFanOutOfReadActionsCarriesInOneAttempt(t *testing.T) {
	w := newWF(t, `
in  input
a   action in=in.out read
b   action in=in.out read
c   action in=in.out read
m   merge  x=a.out y=b.out z=c.out
out output in=m.out
`, nil)
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	flushed, carriers := fanOutCall(t, w.f, "a", "b", "c")
	require.False(t, flushed, "the fan-out flushed before starting its attempts")
	require.Equal(t, []string{"a"}, carriers)
	require.Equal(t, []string{"a"}, w.f.carriedBy(), "no other attempt carried anything")
	for _, id := range []string{"a", "b", "c"} {
		require.Len(t, w.f.nodeInputs(id), 1)
	}
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
}

// The one fan-out member that may act outside its attempt (here a
// workspace-write-like action, not first in compiled order) carries the
// buffer: it waits for the append before it acts, so its node.started is
// in the log first; the read-only members need not.
func TestFanOutCarriedByItsOneEffectfulMember(t *testing.T) {
	w := newWF(t, `
in  input
a   action in=in.out read
w   action in=in.out
z   action in=in.out read
m   merge  x=a.out y=w.out z=z.out
out output in=m.out
`, nil)
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	flushed, carriers := fanOutCall(t, w.f, "a", "w", "z")
	require.False(t, flushed)
	require.Equal(t, []string{"w"}, carriers)
	require.Equal(t, []string{"w"}, w.f.carriedBy())
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
}

// A fan-out of two or more members that may act outside their attempts
// flushes first: each must find its node.started in the log before it
// acts, and only a carrier waits for its own append.
func TestFanOutWithTwoEffectfulMembersFlushes(t *testing.T) {
	for name, desc := range map[string]string{
		"two": `
in  input
a   action in=in.out
b   action in=in.out
m   merge  x=a.out y=b.out
out output in=m.out
`,
		"two and a read": `
in  input
r   action in=in.out read
a   action in=in.out
b   action in=in.out
m   merge  r=r.out x=a.out y=b.out
out output in=m.out
`,
		"agents": `
in  input
a   agent  in=in.out
b   agent  in=in.out
m   merge  x=a.out y=b.out
out output in=m.out
`,
	} {
		t.Run(name, func(t *testing.T) {
			w := newWF(t, desc, nil)
			require.NoError(t, w.run(testParams(execution.ModeLive)))
			require.Equal(t, "flush", w.f.appendSources()[0])
			require.Empty(t, w.f.batches, "nothing rides along with this fan-out")
			checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
		})
	}
}

// A simulated attempt only reads its fixture: a simulated fan-out is
// carried by its first member whatever the nodes would do live.
func TestSimulatedFanOutCarriesInOneAttempt(t *testing.T) {
	w := newWF(t, `
in  input
a   action in=in.out
b   agent  in=in.out
m   merge  x=a.out y=b.out
out output in=m.out
`, nil)
	require.NoError(t, w.run(testParams(execution.ModeSimulation)))
	flushed, carriers := fanOutCall(t, w.f, "a", "b")
	require.False(t, flushed)
	require.Equal(t, []string{"a"}, carriers)
	require.Equal(t, []string{"a"}, w.f.carriedBy())
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
}

// A fan-out carrier whose attempt fails confirms nothing: its events stay
// buffered, the next append holds them again, and the log ends with every
// event once, in order.
func TestFailedFanOutCarrierLosesNoEvent(t *testing.T) {
	w := newWF(t, `
in  input
a   action in=in.out read retry=2,0,2,0
b   action in=in.out read
m   merge  x=a.out y=b.out
out output in=m.out
`, map[string][]step{"a": {{fail: execution.ErrActionFailed}, {}}})
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	flushed, carriers := fanOutCall(t, w.f, "a", "b")
	require.False(t, flushed)
	// a#2 carries the unconfirmed prefix again when it starts before b's
	// completion is flushed; b never carries.
	require.NotEmpty(t, carriers)
	require.Equal(t, "a", carriers[0])
	require.NotContains(t, w.f.carriedBy(), "b")
	events := w.f.events()
	findEvent(t, events, execution.EventNodeStarted, "b", 1)
	findEvent(t, events, execution.EventNodeAttemptFailed, "a", 1)
	findEvent(t, events, execution.EventNodeCompleted, "a", 2)
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
}

// A fan-out's buffer above carryBudget is flushed, not copied into the
// carrier's input.
func TestLargeFanOutBufferIsFlushed(t *testing.T) {
	w := newWF(t, `
in  input
g1  gate   in=in.out
g2  gate   in=g1.pass
g3  gate   in=g2.pass
g4  gate   in=g3.pass
g5  gate   in=g4.pass
g6  gate   in=g5.pass
g7  gate   in=g6.pass
g8  gate   in=g7.pass
a   action in=g8.pass read
b   action in=g8.pass read
m   merge  x=a.out y=b.out
out output in=m.out
`, nil)
	p := testParams(execution.ModeLive)
	p.Input = execution.Value{Inline: json.RawMessage(`"` + strings.Repeat("x", 5<<10) + `"`)}
	require.NoError(t, w.run(p))
	flushed, _ := fanOutCall(t, w.f, "a", "b")
	require.True(t, flushed)
	require.Empty(t, w.f.batches)
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
}

// A buffer above carryBudget is flushed rather than copied into the next
// attempt's input: here eight gates (local, so their events wait in the
// buffer) pass a 5 KiB value along before the action.
func TestLargeBufferIsFlushed(t *testing.T) {
	desc := "in input\n"
	prev := "in.out"
	for k := 1; k <= 8; k++ {
		desc += fmt.Sprintf("g%d gate in=%s\n", k, prev)
		prev = fmt.Sprintf("g%d.pass", k)
	}
	desc += "a action in=" + prev + "\nout output in=a.out\n"
	w := newWF(t, desc, nil)
	p := testParams(execution.ModeLive)
	p.Input = execution.Value{Inline: json.RawMessage(`"` + strings.Repeat("x", 5<<10) + `"`)}
	require.NoError(t, w.run(p))
	require.Equal(t, []string{"flush", "flush"}, w.f.appendSources(), "the buffer before a was too large to carry")
	require.Empty(t, w.f.batches)
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
