package workflows

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// fanOut is input → the given actions side by side → merge → output; each
// action's description follows its id ("risk=read", or "" for one with
// side effects).
func fanOut(actions ...string) string {
	desc, merge := "in input\n", "m merge"
	for k, a := range actions {
		id := fmt.Sprintf("f%d", k+1)
		desc += fmt.Sprintf("%s action in=in.out %s\n", id, a)
		merge += fmt.Sprintf(" p%s=%s.out", id, id)
	}
	return desc + merge + "\nout output in=m.out\n"
}

// carried says which nodes' attempts carried events (any form), in order.
func carried(w *wfTest) []string {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	return slices.Clone(w.f.carriers)
}

// From interpreter version 10 a fan-out of read actions starts without a
// flush: its first attempt carries the run's start, the run update and
// every sibling's node.started, and the others carry nothing. The run
// appends twice, the carrier's batch and the run's end; version 9 flushed
// before starting the fan-out. f1, the carrier, ends last here, so the
// workflow tasks collecting f2 and f3 find the run's update held by a
// carrier in flight and defer it with the events (mayDefer), where
// before version 10 they flushed it.
func TestReadFanOutCarriesWithOneAttempt(t *testing.T) {
	steps := map[string][]step{"f1": {{wait: 400 * time.Millisecond}}, "f3": {{wait: 100 * time.Millisecond}}}
	for _, early := range []bool{false, true} {
		t.Run(fmt.Sprintf("answerEarly=%v", early), func(t *testing.T) {
			w := newWF(t, fanOut("risk=read", "risk=read", "risk=read"), steps)
			w.f.answerEarly = early
			require.NoError(t, w.run(testParams(execution.ModeLive)))
			require.Equal(t, []string{"carried", "flush"}, w.f.appendSources())
			require.Equal(t, []string{"f1"}, carried(w))
			first := w.f.flushes()
			first = first[:slices.Index(first, "--")]
			for _, want := range []string{"run.started", "node.started f1", "node.started f2", "node.started f3"} {
				require.Contains(t, first, want)
			}
			require.Equal(t, execution.StatusRunning, w.f.appends[0].Run.Status, "the run's update rides with the carrier")
			checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)

			v9 := newWF(t, fanOut("risk=read", "risk=read", "risk=read"), steps)
			v9.f.answerEarly = early
			v9.env.OnGetVersion(changeInterpreterV1, workflow.DefaultVersion, interpreterVersion).Return(workflow.Version(9))
			require.NoError(t, v9.run(testParams(execution.ModeLive)))
			require.Equal(t, []string{"flush", "flush"}, v9.f.appendSources(), "version 9 flushed before the fan-out")
			require.Empty(t, carried(v9))
			checkLog(t, v9.f, "run-1", 1, execution.StatusSucceeded)
		})
	}
}

// An action with side effects must find its node.started in the log
// before it acts (the harness fails the run otherwise): in a fan-out with
// one such action it is the carrier; with two, the fan-out flushes first
// (TestFanOutFlushesInsteadOfCarrying).
func TestFanOutCarriesOnItsOneWriteAction(t *testing.T) {
	w := newWF(t, fanOut("risk=read", "", "risk=read"), map[string][]step{"f1": {{wait: 200 * time.Millisecond}}})
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, []string{"carried", "flush"}, w.f.appendSources())
	require.Equal(t, []string{"f2"}, carried(w))
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)

	w = newWF(t, fanOut("risk=read", "", ""), nil)
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, []string{"flush", "flush"}, w.f.appendSources())
	require.Empty(t, carried(w))
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
}

// The carrier's append is lost after its attempt answered (the worker
// died between the two): nothing confirms the batch, the run's end
// flushes every event, and each is logged once, in order.
func TestFanOutCarrierAppendLost(t *testing.T) {
	w := newWF(t, fanOut("risk=read", "risk=read", "risk=read"), map[string][]step{"f2": {{wait: 200 * time.Millisecond}}})
	w.f.loseAppendOf = "f1"
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	require.Equal(t, []string{"flush"}, w.f.appendSources(), "the carrier appended nothing; the run's end appended all")
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
}

// A failed carrier's events are unsent again: the next iteration flushes
// them with the run's update (here the retry's timer is armed, which
// flushes in any case), and the log holds every event once.
func TestFanOutCarrierFails(t *testing.T) {
	w := newWF(t, fanOut("risk=read", "risk=read")+"", map[string][]step{
		"f1": {{fail: "BOOM", permanent: true}},
		"f2": {{wait: 200 * time.Millisecond}},
	})
	err := w.run(testParams(execution.ModeLive))
	require.Error(t, err)
	require.Equal(t, "flush", w.f.appendSources()[len(w.f.appendSources())-1])
	checkLog(t, w.f, "run-1", 1, execution.StatusFailed)
}

// fanOutCarrier picks the one attempt that is not a read's, else the
// first; none with two such, or with a timer or a decision in play.
func TestFanOutCarrierRules(t *testing.T) {
	setup := func(readOnly ...bool) *interpreter {
		i := &interpreter{version: 10, events: eventLog{runID: "r"}}
		i.nodes = append(i.nodes, &node{plan: &graph.PlanNode{ID: "g", Kind: graph.KindGate}, start: true})
		for k, ro := range readOnly {
			i.nodes = append(i.nodes, &node{plan: &graph.PlanNode{ID: fmt.Sprintf("n%d", k), Kind: graph.KindAction, ReadOnly: ro}, start: true})
		}
		return i
	}
	require.Equal(t, "n0", setup(true, true, true).fanOutCarrier().plan.ID, "all reads: the first regular attempt, not the gate")
	require.Equal(t, "n1", setup(true, false, true).fanOutCarrier().plan.ID, "the one write")
	require.Nil(t, setup(false, true, false).fanOutCarrier(), "two writes")

	i := setup(true, true)
	i.nodes[1].start = false
	i.nodes[1].timer = stubFuture{}
	require.Nil(t, i.fanOutCarrier(), "a timer is in play")
	i = setup(true, true)
	i.nodes = append(i.nodes, &node{plan: &graph.PlanNode{ID: "a", Kind: graph.KindApproval}, state: execution.NodeState{Status: execution.NodeAwaitingApproval}})
	require.Nil(t, i.fanOutCarrier(), "a decision is awaited")
	i = setup(true, true)
	i.nodes = append(i.nodes, &node{plan: &graph.PlanNode{ID: "x", Kind: graph.KindAgent}, start: true})
	require.Equal(t, "x", i.fanOutCarrier().plan.ID, "an agent is not a read")
}

// From version 10 mayDefer leaves the run's update buffered once a
// carrier in flight holds it; without one it still goes out at once.
func TestMayDeferTheUpdateACarrierHolds(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, version := range []workflow.Version{9, 10} {
		i := &interpreter{version: version, events: eventLog{runID: "r"}}
		i.nodes = []*node{
			{plan: &graph.PlanNode{ID: "a", Kind: graph.KindAction}, future: stubFuture{}},
			{plan: &graph.PlanNode{ID: "b", Kind: graph.KindAction}},
		}
		i.events.setUpdate(&execution.RunUpdate{Status: execution.StatusRunning})
		i.events.ordinal = 1
		i.events.pending = []execution.EventDraft{{Key: "r/-/0/run.started", Type: "run.started", At: t0}}
		require.False(t, i.mayDefer(t0), "version %d: no carrier holds the update", version)
		i.events.carriers = []int{1} // a carrier in flight was given it
		i.events.ordinal = 2
		i.events.pending = append(i.events.pending, execution.EventDraft{Key: "r/b/1/node.completed", Type: "node.completed", NodeID: "b", Attempt: 1, At: t0})
		require.Equal(t, version >= 10, i.mayDefer(t0), "version %d: a carrier holds the update", version)
	}
}
