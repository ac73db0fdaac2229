package workflows

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
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

// An iteration that starts several activities with side effects flushes
// instead: each would append the same batch, contending for the run's row
// lock (a fan-out of read actions carries with one attempt from
// interpreter version 10: fanoutcarry_test.go).
func TestFanOutFlushesInsteadOfCarrying(t *testing.T) {
	w := newWF(t, `
in  input
a   action in=in.out
b   action in=in.out
m   merge  x=a.out y=b.out
out output in=m.out
`, nil)
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, "flush", w.f.appendSources()[0])
	require.Empty(t, w.f.batches, "nothing rides along with a fan-out")
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
		l.pending = append(l.pending, execution.EventDraft{Key: l.identityKey("", 0, typ, ""), Type: typ})
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

// From interpreter version 5 a fan-out's workflow tasks that only collect
// a sibling's completion append nothing: the events wait for the run's
// final flush (or the next carrier). b and c end after a, so the run has
// a workflow task for a's completion and one for b's, each with a sibling
// still running; version 4 flushed in each.
func TestFanOutCollectsWithoutFlushing(t *testing.T) {
	w := newWF(t, `
in  input
a   action in=in.out
b   action in=in.out
c   action in=in.out
m   merge  x=a.out y=b.out z=c.out
out output in=m.out
`, map[string][]step{"b": {{wait: 300 * time.Millisecond}}, "c": {{wait: 600 * time.Millisecond}}})
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, []string{"flush", "flush"}, w.f.appendSources(), "the fan-out's flush and the run's last")
	flushes := w.f.flushes()
	last := flushes[slices.Index(flushes, "--")+1:]
	for _, want := range []string{"node.completed a", "node.completed b", "node.completed c", "run.succeeded"} {
		require.Contains(t, last, want)
	}
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
}

// stubFuture stands for an attempt in flight in mayDefer's tests.
type stubFuture struct{}

func (stubFuture) Get(workflow.Context, any) error { return nil }
func (stubFuture) IsReady() bool                   { return false }

// mayDefer leaves the buffer only while regular attempts run and nothing
// else is in play, and only within carryBudget and deferMaxAge.
func TestMayDeferBounds(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	setup := func(kinds ...graph.Kind) *interpreter {
		i := &interpreter{version: 5, events: eventLog{runID: "r"}}
		for k, kind := range kinds {
			i.nodes = append(i.nodes, &node{plan: &graph.PlanNode{ID: fmt.Sprintf("n%d", k), Kind: kind}})
		}
		i.events.ordinal = 1
		i.events.pending = []execution.EventDraft{{Key: "r/n0/1/node.completed", Type: "node.completed", NodeID: "n0", Attempt: 1, At: t0}}
		return i
	}
	i := setup(graph.KindAction, graph.KindAction)
	require.False(t, i.mayDefer(t0), "no attempt in flight: flush")
	i.nodes[1].future = stubFuture{}
	require.True(t, i.mayDefer(t0), "a sibling still runs")
	require.True(t, i.mayDefer(t0.Add(time.Second-time.Millisecond)))
	require.False(t, i.mayDefer(t0.Add(time.Second)), "the oldest event is deferMaxAge (1 s by default) old")
	i.durability.EventDeferMs = 5000
	require.True(t, i.mayDefer(t0.Add(time.Second)), "the run's Durability sets deferMaxAge")
	require.False(t, i.mayDefer(t0.Add(5*time.Second)))

	i.events.pending[0].Data = json.RawMessage(`"` + strings.Repeat("x", carryBudget) + `"`)
	require.False(t, i.mayDefer(t0), "above carryBudget")

	i = setup(graph.KindAction, graph.KindAction)
	i.nodes[1].future = stubFuture{}
	i.events.setUpdate(&execution.RunUpdate{Status: execution.StatusRunning})
	require.False(t, i.mayDefer(t0), "a run update goes out at once")

	i = setup(graph.KindAction, graph.KindAction, graph.KindAction)
	i.nodes[1].future = stubFuture{}
	i.nodes[2].timer = stubFuture{}
	require.False(t, i.mayDefer(t0), "a timer is armed")

	i = setup(graph.KindAction, graph.KindAction, graph.KindApproval)
	i.nodes[1].future = stubFuture{}
	i.nodes[2].state.Status = execution.NodeAwaitingApproval
	require.False(t, i.mayDefer(t0), "a decision is awaited")

	i = setup(graph.KindAction, graph.KindGate)
	i.nodes[1].future = stubFuture{}
	require.False(t, i.mayDefer(t0), "only a local attempt in flight")
}

// From interpreter version 6 the attempts carry the buffer in the compact
// form (NodeInput.Carried), which the activities expand to the same events.
func TestEventsRideAlongInTheCompactForm(t *testing.T) {
	w := newWF(t, linear, nil)
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, []string{"compact", "compact"}, w.f.forms)
	require.Equal(t, []string{"carried", "carried", "flush"}, w.f.appendSources())
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
}

// A rolling deploy: the attempts of a version 6 or 7 run land on workers
// of the release before, which do not know NodeInput.Carried (nor, for a
// version 7 run on a version 6 worker, NodeInput.Suffix: a worker that
// appended a suffix unchecked and confirmed it could confirm events the
// log lacks, hence a member of its own). They append nothing and confirm
// nothing, so the events stay buffered, and the run's flushes append
// every one of them, once and in order. What such an attempt does
// not give: its node.started in the log before it runs (the price of the
// deploy window, docs/benchmarks.md session 10).
func TestCompactFormOnAPreviousReleaseWorker(t *testing.T) {
	w := newWF(t, linear, nil)
	w.f.previousRelease = true
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Empty(t, w.f.batches, "no worker saw a carried batch")
	w.f.mu.Lock()
	require.Equal(t, []string{"a attempt 1 began before its node.started was appended",
		"b attempt 1 began before its node.started was appended"}, w.f.problems)
	w.f.problems = nil
	w.f.mu.Unlock()
	require.Equal(t, []string{"flush"}, w.f.appendSources(), "the final flush appended what no attempt confirmed")
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
		"node.completed a", "edge.taken a.out>b.in", "node.started b",
		"node.completed b", "edge.taken b.out>out.in", "node.started out", "node.completed out", "run.succeeded",
	}, w.f.flushes())
}

// carryIn sends the compact form from version 6 only, and the plain form
// for a buffer the compact form cannot hold exactly.
func TestCarryInForms(t *testing.T) {
	at := time.Date(2026, 12, 2, 8, 0, 0, 123456789, time.UTC)
	started := execution.EventDraft{Key: "r/a/1/node.started", Type: execution.EventNodeStarted, NodeID: "a", Attempt: 1, At: at}
	for _, c := range []struct {
		version workflow.Version
		event   execution.EventDraft
		compact bool
	}{
		{6, started, true},
		{5, started, false},
		{6, execution.EventDraft{Key: "other/a/1/node.started", Type: execution.EventNodeStarted, NodeID: "a", Attempt: 1, At: at}, false},
	} {
		i := &interpreter{version: c.version, events: eventLog{runID: "r", pending: []execution.EventDraft{c.event}, ordinal: 3}}
		var in execution.NodeInput
		i.carryIn(&in)
		require.Equal(t, c.compact, in.Carried != nil, "version %d, key %s", c.version, c.event.Key)
		require.Equal(t, !c.compact, in.Events != nil, "version %d, key %s", c.version, c.event.Key)
		in.RunID = "r"
		got, err := in.CarriedEvents()
		require.NoError(t, err)
		require.Equal(t, 3, got.Through)
		require.Equal(t, c.event.Key, got.Events[0].Key)
	}
}

// chain5 is five actions in a row: each attempt carries what the one
// before it recorded.
const chain5 = `
in  input
a   action in=in.out
b   action in=a.out
c   action in=b.out
d   action in=c.out
e   action in=d.out
out output in=e.out
`

// carriedCounts is how many events the attempts carried in all, and how
// many distinct ones.
func carriedCounts(f *fakes) (carried, distinct int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[string]bool{}
	for _, b := range f.batches {
		for _, e := range b.Events {
			carried++
			seen[e.Key] = true
		}
	}
	return carried, len(seen)
}

// From version 7 attempts that answer before their append commits (read
// actions) no longer make the next carrier send their events again: each
// carries only what no carrier was given (NodeInput.Suffix), and the log
// still holds every event once, in order. Version 6 sent the whole
// unconfirmed prefix each time.
func TestEachEventCarriedOnce(t *testing.T) {
	w := newWF(t, chain5, nil)
	w.f.answerEarly = true
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, []string{"compact", "suffix", "suffix", "suffix", "suffix"}, w.f.forms)
	carried, distinct := carriedCounts(w.f)
	require.Equal(t, distinct, carried, "each event carried once")
	require.Zero(t, w.f.refused)
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)

	old := newWF(t, chain5, nil)
	old.f.answerEarly = true
	old.env.OnGetVersion(changeInterpreterV1, workflow.DefaultVersion, interpreterVersion).Return(workflow.Version(6))
	require.NoError(t, old.run(testParams(execution.ModeLive)))
	c6, d6 := carriedCounts(old.f)
	require.Equal(t, distinct, d6)
	require.Greater(t, c6, d6, "version 6 carried events again")
	checkLog(t, old.f, "run-1", 1, execution.StatusSucceeded)
}

// A carrier's append is lost after its attempt answered: the next suffix
// is refused (it follows events the log does not hold) and appends
// nothing; the attempt after that carries the whole unconfirmed prefix
// again, and the log ends complete, each event once, in order.
func TestRefusedSuffixCarriesThePrefixAgain(t *testing.T) {
	w := newWF(t, chain5, nil)
	w.f.answerEarly = true
	w.f.loseAppendOf = "b"
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, []string{"compact", "suffix", "suffix", "compact", "suffix"}, w.f.forms)
	require.Equal(t, 1, w.f.refused, "c's suffix follows b's lost events")
	w.f.mu.Lock()
	require.Equal(t, []string{"b attempt 1 began before its node.started was appended",
		"c attempt 1 began before its node.started was appended"}, w.f.problems,
		"read actions do not wait for their appends (a write action's attempt would fail with EVENTS_GAP and go out again)")
	w.f.problems = nil
	w.f.mu.Unlock()
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
}

// carryIn's choice from version 7: a suffix while the last carrier's
// events are unconfirmed, fewer than maxSuffixChain carriers in a row are,
// and there is something new; the whole unconfirmed prefix otherwise.
func TestCarryInSuffixRules(t *testing.T) {
	at := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	i := &interpreter{version: 7, events: eventLog{runID: "r"}}
	l := &i.events
	rec := func(n int) {
		for range n {
			l.ordinal++
			l.pending = append(l.pending, execution.EventDraft{Key: fmt.Sprintf("r/a/1/e%d", l.ordinal), Type: fmt.Sprintf("e%d", l.ordinal),
				NodeID: "a", Attempt: 1, At: at})
		}
	}
	carry := func() *execution.EventBatch {
		var in execution.NodeInput
		i.carryIn(&in)
		in.RunID = "r"
		b, err := in.CarriedEvents()
		require.NoError(t, err)
		require.Equal(t, in.Suffix != nil, b.After > 0)
		return b
	}
	rec(3)
	b := carry()
	require.Zero(t, b.After, "nothing was sent: the prefix")
	require.Len(t, b.Events, 3)
	for k := 1; k < maxSuffixChain; k++ {
		rec(2)
		b = carry()
		require.Equal(t, 3+2*(k-1), b.After, "carrier %d: only what is new", k+1)
		require.Len(t, b.Events, 2)
	}
	rec(1)
	b = carry()
	require.Zero(t, b.After, "maxSuffixChain carriers unconfirmed: the prefix again")
	require.Len(t, b.Events, len(l.pending))
	l.confirm(5)
	rec(1)
	b = carry()
	require.Equal(t, l.ordinal-1, b.After, "the last carrier unconfirmed, the earlier ones confirmed")
	require.Len(t, b.Events, 1)
	l.unsent() // that attempt failed or reported its suffix refused
	rec(1)
	b = carry()
	require.Zero(t, b.After)
	require.Len(t, b.Events, l.ordinal-5, "everything unconfirmed")
	b = carry()
	require.Zero(t, b.After, "nothing new since the last carrier: the prefix")
	// A flush confirms everything: the next carrier starts a new chain.
	l.pending, l.durable = nil, l.ordinal
	rec(1)
	b = carry()
	require.Zero(t, b.After)
	require.Len(t, b.Events, 1)

	i.version = 6
	rec(1)
	var in execution.NodeInput
	i.carryIn(&in)
	require.Nil(t, in.Suffix)
	require.NotNil(t, in.Carried)
}
