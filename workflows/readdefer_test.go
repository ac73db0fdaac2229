package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// readChain is n read actions in a row (risk=read: PlanNode.ReadOnly).
func readChain(n int) string {
	desc, prev := "in input\n", "in.out"
	for k := 1; k <= n; k++ {
		desc += fmt.Sprintf("r%d action in=%s risk=read\n", k, prev)
		prev = fmt.Sprintf("r%d.out", k)
	}
	return desc + "out output in=" + prev + "\n"
}

// countTimers counts the timers the workflow starts.
func countTimers(w *wfTest) *atomic.Int32 {
	var n atomic.Int32
	w.env.SetOnTimerScheduledListener(func(string, time.Duration) { n.Add(1) })
	return &n
}

// From interpreter version 8 a chain of read actions appends about once
// per four nodes: r1 carries the run's start (the run update goes out at
// once), r2-r4 start without their events carried eagerly, r5 carries the
// twelve events no carrier was given (maxUnsentEvents), r6-r8 nothing,
// r9 the next twelve, r10 nothing, and the run's end flushes the rest.
// Version 7 appended with every attempt. Version 8 armed a deferral timer
// for r2-r4, r6-r8 and r10; from version 9 those attempts carry the
// unsent events lazily instead, end before their time and append
// nothing, and no timer starts. The log is the same every way: every
// event once, in order.
func TestReadChainAppendsFewerTimes(t *testing.T) {
	// A lazy attempt of the fakes appends once deferMaxAge of wall time
	// has passed (runLazily): a minute, so that no quick attempt of a
	// loaded machine's test reaches it.
	params := testParams(execution.ModeLive)
	params.Durability = &execution.Durability{EventDeferMs: time.Minute.Milliseconds()}
	for _, early := range []bool{false, true} {
		t.Run(fmt.Sprintf("answerEarly=%v", early), func(t *testing.T) {
			w := newWF(t, readChain(10), nil)
			timers := countTimers(w)
			w.f.answerEarly = early // as a read action's attempt answers before its append commits
			require.NoError(t, w.run(params))
			require.Equal(t, []string{"carried", "carried", "carried", "flush"}, w.f.appendSources())
			w.f.mu.Lock()
			sizes := []int{}
			for _, b := range w.f.batches {
				sizes = append(sizes, len(b.Events))
			}
			w.f.mu.Unlock()
			require.Equal(t, []int{5, maxUnsentEvents, maxUnsentEvents}, sizes)
			require.Equal(t, 7, w.f.lazyAnswered, "r2-r4, r6-r8 and r10 carried lazily and ended first")
			require.Zero(t, w.f.lazyAppends)
			require.Zero(t, timers.Load(), "no deferral timer")
			require.Zero(t, w.f.refused)
			checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
			require.Len(t, loggedEvents(w.f), 1+3+3*10+2+1)

			v8 := newWF(t, readChain(10), nil)
			v8timers := countTimers(v8)
			v8.f.answerEarly = early
			v8.env.OnGetVersion(changeInterpreterV1, workflow.DefaultVersion, interpreterVersion).Return(workflow.Version(8))
			require.NoError(t, v8.run(params))
			require.Equal(t, []string{"carried", "carried", "carried", "flush"}, v8.f.appendSources())
			if early {
				require.Equal(t, []string{"compact", "suffix", "suffix"}, v8.f.forms)
			} else {
				require.Equal(t, []string{"compact", "compact", "compact"}, v8.f.forms)
			}
			require.Positive(t, v8timers.Load(), "version 8: a deferral timer")
			require.Equal(t, loggedEvents(v8.f), loggedEvents(w.f), "the same events, in the same order")

			old := newWF(t, readChain(10), nil)
			old.f.answerEarly = early
			old.env.OnGetVersion(changeInterpreterV1, workflow.DefaultVersion, interpreterVersion).Return(workflow.Version(7))
			require.NoError(t, old.run(params))
			require.Len(t, old.f.appendSources(), 11, "version 7: every attempt carried, then the run's end")
			checkLog(t, old.f, "run-1", 1, execution.StatusSucceeded)
			require.Equal(t, loggedEvents(old.f), loggedEvents(w.f), "the same events, in the same order")
		})
	}
}

// A write action's attempt still carries: its node.started, and every
// event the read attempts before it left buffered, are in the log before
// it runs (the fakes check it).
func TestWriteActionCarriesDeferredEvents(t *testing.T) {
	w := newWF(t, `
in  input
a   action in=in.out risk=read
b   action in=a.out  risk=read
save action in=b.out
c   action in=save.out risk=read
out output in=c.out
`, nil)
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, []string{"carried", "carried", "flush"}, w.f.appendSources())
	require.Equal(t, []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
		"--", "node.completed a", "edge.taken a.out>b.in", "node.started b",
		"node.completed b", "edge.taken b.out>save.in", "node.started save",
		"--", "node.completed save", "edge.taken save.out>c.in", "node.started c",
		"node.completed c", "edge.taken c.out>out.in", "node.started out", "node.completed out", "run.succeeded",
	}, w.f.flushes(), "save carried b's start; c's waited for the run's end")
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
}

// A slow read appends the events it carries lazily itself (version 9):
// r2 runs for three times deferMaxAge (1 s), so its activity appends its
// node.started, and what came before it, while it runs, with no timer,
// and the interpreter counts them confirmed (the run's end flushes only
// what came after). Version 8's deferral timer flushed them instead.
func TestSlowReadAppendsLazilyCarriedEvents(t *testing.T) {
	want := []string{
		"run.started", "node.started in", "node.completed in", "edge.taken in.out>r1.in", "node.started r1",
		"--", "node.completed r1", "edge.taken r1.out>r2.in", "node.started r2",
		"--", "node.completed r2", "edge.taken r2.out>out.in", "node.started out", "node.completed out", "run.succeeded",
	}
	w := newWF(t, readChain(2), map[string][]step{"r2": {{wait: 3 * time.Second}}})
	timers := countTimers(w)
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, []string{"carried", "lazy", "flush"}, w.f.appendSources())
	require.Equal(t, want, w.f.flushes())
	require.Equal(t, 1, w.f.lazyAppends)
	require.Zero(t, timers.Load())
	w.f.mu.Lock()
	last := w.f.appends[len(w.f.appends)-1]
	w.f.mu.Unlock()
	require.Equal(t, "node.completed", last.Events[0].Type, "the run's last flush holds nothing r2 appended: confirmed")
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)

	v8 := newWF(t, readChain(2), map[string][]step{"r2": {{wait: 3 * time.Second}}})
	v8.env.OnGetVersion(changeInterpreterV1, workflow.DefaultVersion, interpreterVersion).Return(workflow.Version(8))
	require.NoError(t, v8.run(testParams(execution.ModeLive)))
	require.Equal(t, []string{"carried", "flush", "flush"}, v8.f.appendSources(), "version 8: the deferral timer's flush")
	require.Equal(t, want, v8.f.flushes())
	checkLog(t, v8.f, "run-1", 1, execution.StatusSucceeded)
}

// mayDeferRead's bounds: a read-only action only, fewer than
// maxUnsentEvents unsent events, the run update given to a carrier,
// carryBudget, deferMaxAge counted from the oldest unsent event, and no
// timer or approval in play.
func TestMayDeferReadBounds(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	setup := func(unsent int) *interpreter {
		i := &interpreter{version: 8, events: eventLog{runID: "r"}}
		i.nodes = []*node{
			{plan: &graph.PlanNode{ID: "read", Kind: graph.KindAction, ReadOnly: true}},
			{plan: &graph.PlanNode{ID: "write", Kind: graph.KindAction}},
			{plan: &graph.PlanNode{ID: "ask", Kind: graph.KindApproval}},
		}
		for range unsent {
			i.events.ordinal++
			i.events.pending = append(i.events.pending, execution.EventDraft{
				Key: fmt.Sprintf("r/read/1/e%d", i.events.ordinal), Type: "e", NodeID: "read", Attempt: 1, At: t0})
		}
		return i
	}
	read, write := 0, 1

	i := setup(maxUnsentEvents - 1)
	require.True(t, i.mayDeferRead(i.nodes[read], t0))
	require.False(t, i.mayDeferRead(i.nodes[write], t0), "a workspace-write action carries")
	require.False(t, i.mayDeferRead(nil, t0))
	i.nodes[read].plan.Kind = graph.KindAgent
	require.False(t, i.mayDeferRead(i.nodes[read], t0), "only action nodes")
	i.nodes[read].plan.Kind = graph.KindAction

	i = setup(maxUnsentEvents)
	require.False(t, i.mayDeferRead(i.nodes[read], t0), "maxUnsentEvents unsent")
	i.events.carriers = []int{3} // the first three were given to a carrier still in flight
	require.True(t, i.mayDeferRead(i.nodes[read], t0), "only unsent events count")
	i.events.unsent() // that carrier failed: they are unsent again
	require.False(t, i.mayDeferRead(i.nodes[read], t0))

	i = setup(2)
	require.True(t, i.mayDeferRead(i.nodes[read], t0.Add(time.Second-time.Millisecond)))
	require.False(t, i.mayDeferRead(i.nodes[read], t0.Add(time.Second)), "the oldest unsent event is deferMaxAge old")
	i.events.pending[1].At = t0.Add(900 * time.Millisecond)
	i.events.carriers = []int{1} // the old one went to a carrier
	require.True(t, i.mayDeferRead(i.nodes[read], t0.Add(time.Second)), "age counts from the oldest unsent event")
	i.durability.EventDeferMs = 50
	require.False(t, i.mayDeferRead(i.nodes[read], t0.Add(time.Second)), "the run's Durability sets deferMaxAge")

	i = setup(2)
	i.events.setUpdate(&execution.RunUpdate{Status: execution.StatusRunning})
	i.events.updateAfter = 0
	require.False(t, i.mayDeferRead(i.nodes[read], t0), "a run update no carrier was given goes out at once")
	i.events.carriers = []int{1}
	require.True(t, i.mayDeferRead(i.nodes[read], t0), "a carrier in flight took the update")

	i = setup(2)
	i.events.pending[0].Data = json.RawMessage(`"` + strings.Repeat("x", carryBudget) + `"`)
	require.False(t, i.mayDeferRead(i.nodes[read], t0), "above carryBudget")

	i = setup(2)
	i.nodes[write].timer = stubFuture{}
	require.False(t, i.mayDeferRead(i.nodes[read], t0), "a timer is armed")
	i = setup(2)
	i.nodes[2].state.Status = execution.NodeAwaitingApproval
	require.False(t, i.mayDeferRead(i.nodes[read], t0), "a decision is awaited")
}

// readyFuture is a fired deferral timer in collectDeferTimer's tests.
type readyFuture struct{}

func (readyFuture) Get(workflow.Context, any) error { return nil }
func (readyFuture) IsReady() bool                   { return true }

// From version 8 the deferral's timer counts only unsent events: when it
// fires it flushes only if the event it was armed for, or an older one,
// is still unsent; before, whatever was buffered.
func TestDeferTimerCountsUnsentEvents(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	setup := func(v workflow.Version) *interpreter {
		i := &interpreter{version: v, events: eventLog{runID: "r", ordinal: 2}}
		i.events.pending = []execution.EventDraft{
			{Key: "r/a/1/e1", Type: "e1", NodeID: "a", Attempt: 1, At: t0},
			{Key: "r/a/1/e2", Type: "e2", NodeID: "a", Attempt: 1, At: t0.Add(500 * time.Millisecond)},
		}
		i.deferTimer, i.deferFor = readyFuture{}, t0
		return i
	}
	i := setup(8)
	at, ok := i.oldestDeferred()
	require.True(t, ok)
	require.Equal(t, t0, at)
	i.collectDeferTimer()
	require.True(t, i.events.flushNow, "the event the timer was armed for is unsent")
	require.Nil(t, i.deferTimer)

	i = setup(8)
	i.events.carriers = []int{1} // e1 went to a carrier in flight; e2 is younger
	at, _ = i.oldestDeferred()
	require.Equal(t, t0.Add(500*time.Millisecond), at)
	i.collectDeferTimer()
	require.False(t, i.events.flushNow, "only younger events are unsent: deferred again, not flushed")

	i = setup(8)
	i.events.carriers = []int{2}
	_, ok = i.oldestDeferred()
	require.False(t, ok, "every event went to a carrier")
	i.collectDeferTimer()
	require.False(t, i.events.flushNow)

	i = setup(7)
	i.events.carriers = []int{2}
	at, _ = i.oldestDeferred()
	require.Equal(t, t0, at, "before version 8: the oldest buffered event")
	i.collectDeferTimer()
	require.True(t, i.events.flushNow)
}

// loggedEvents describes the appended events in order, whichever appends
// they came in.
func loggedEvents(f *fakes) []string {
	var out []string
	for _, e := range f.flushes() {
		if e != "--" {
			out = append(out, e)
		}
	}
	return out
}

// From version 9 a lazy carrier is given the events no carrier was given
// (a suffix after the last carrier in flight), with the time its activity
// appends them from (the oldest of them plus deferMaxAge), and joins no
// carrier chain; a fan-out's deferral timer does not wait for the events
// it holds, while the next read attempt carries them again; once it ended
// they are unsent again.
func TestLazyCarrier(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	i := &interpreter{version: 9, events: eventLog{runID: "r", ordinal: 4}}
	for k := 1; k <= 4; k++ {
		i.events.pending = append(i.events.pending, execution.EventDraft{
			Key: fmt.Sprintf("r/a/1/e%d", k), Type: fmt.Sprintf("e%d", k), NodeID: "a", Attempt: 1, At: t0.Add(time.Duration(k) * 100 * time.Millisecond)})
	}
	i.nodes = []*node{{plan: &graph.PlanNode{ID: "read", Kind: graph.KindAction, ReadOnly: true}}}
	i.events.carriers = []int{2} // 1-2 went to a carrier still in flight
	i.events.carryLazy = true
	var in execution.NodeInput
	i.carryIn(&in)
	require.NotNil(t, in.Suffix)
	require.Equal(t, 2, in.Suffix.After)
	require.Equal(t, 4, in.Suffix.Through)
	require.Equal(t, t0.Add(300*time.Millisecond+time.Second), in.CarryLazyUntil, "the oldest unsent event's time plus deferMaxAge")
	require.Equal(t, []int{2}, i.events.carriers, "in no carrier chain")
	require.Equal(t, 4, i.events.lazy)

	_, ok := i.oldestDeferred()
	require.False(t, ok, "the lazy carrier bounds 3-4: no deferral timer waits for them")
	require.True(t, i.mayDeferRead(i.nodes[0], t0.Add(1200*time.Millisecond)))
	require.False(t, i.mayDeferRead(i.nodes[0], t0.Add(1300*time.Millisecond)), "the age of what the lazy carrier holds counts for the next read")

	i.events.lazyEnded(3)
	require.Equal(t, 4, i.events.lazy, "a later lazy carrier holds them")
	i.events.lazyEnded(4)
	at, ok := i.oldestDeferred()
	require.True(t, ok)
	require.Equal(t, t0.Add(300*time.Millisecond), at, "unsent again once it ended")

	i.events.carriers = nil // the prefix when no carrier is in flight
	in = execution.NodeInput{}
	i.carryIn(&in)
	require.NotNil(t, in.Carried)
	require.Equal(t, t0.Add(100*time.Millisecond+time.Second), in.CarryLazyUntil)
	require.Empty(t, i.events.carriers)
}
