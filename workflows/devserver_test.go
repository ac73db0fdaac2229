package workflows

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/internal/testinfra"
)

var record = flag.Bool("record", false, "write the dev-server histories to testdata/ for TestReplay")

func TestMain(m *testing.M) {
	flag.Parse()
	testinfra.Main(m)
}

// devScenario is one representative graph run against the real dev server.
type devScenario struct {
	name    string
	desc    string
	steps   map[string][]step
	mode    execution.Mode
	force   int // ForceContinueAsNewAfterEvents
	durable *execution.Durability
	cancel  []string // cancel the run once these nodes' attempts have begun
	// cancelWaiting cancels the run once this node waits for a decision.
	cancelWaiting string
	// releaseWhen lets hanging fakes return once this event is in the log.
	releaseWhen *devEvent
	// decide sends these approve updates, each once its node waits (and
	// its after event, when set, is in the log).
	decide []devDecision
	status string
	want   []string // event descriptions in order (nil: checked by check)
	check  func(t *testing.T, events []string)
	fakes  func(t *testing.T, f *fakes) // what the activities saw, if it matters
	setup  func(f *fakes)               // how the activities behave, beyond steps
}

var devScenarios = []devScenario{
	{
		// Interpreter version 7: attempts answer before their appends
		// commit (read actions), and each carries only the events no
		// carrier was given (NodeInput.Suffix).
		name: "carry-once", desc: chain5, status: execution.StatusSucceeded,
		setup: func(f *fakes) { f.answerEarly = true },
		fakes: func(t *testing.T, f *fakes) {
			require.Equal(t, []string{"compact", "suffix", "suffix", "suffix", "suffix"}, f.forms)
			carried, distinct := carriedCounts(f)
			require.Equal(t, distinct, carried)
		},
	},
	{
		// b's append is lost after b answered: c's suffix is refused, d
		// carries the whole unconfirmed prefix again.
		name: "carry-once-lost", desc: chain5, status: execution.StatusSucceeded,
		setup: func(f *fakes) { f.answerEarly, f.loseAppendOf = true, "b" },
		fakes: func(t *testing.T, f *fakes) {
			f.mu.Lock()
			defer f.mu.Unlock()
			require.Equal(t, []string{"compact", "suffix", "suffix", "compact", "suffix"}, f.forms)
			require.Equal(t, 1, f.refused)
			require.Equal(t, []string{"b attempt 1 began before its node.started was appended",
				"c attempt 1 began before its node.started was appended"}, f.problems)
			f.problems = nil
		},
	},
	{
		// Interpreter version 8: read actions' attempts start carrying
		// nothing while fewer than maxUnsentEvents events are unsent; r5
		// carries the twelve, the run's end flushes the rest. A long
		// EventDeferMs keeps the deferral's timer out of the shape.
		name: "read-defer", desc: readChain(5), status: execution.StatusSucceeded,
		durable: &execution.Durability{EventDeferMs: 60000},
		fakes: func(t *testing.T, f *fakes) {
			require.Equal(t, []string{"carried", "carried", "flush"}, f.appendSources())
		},
	},
	{
		// Interpreter version 9: r2 carries its events lazily and hangs
		// until its node.started is in the log: only its own lazy append,
		// deferMaxAge on, can bring it there (r2 is released once it is;
		// version 8's deferral timer flushed it instead).
		name: "read-defer-long", desc: readChain(2), status: execution.StatusSucceeded,
		steps:       map[string][]step{"r2": {{hang: true}}},
		releaseWhen: &devEvent{typ: execution.EventNodeStarted, node: "r2"},
		fakes: func(t *testing.T, f *fakes) {
			require.Equal(t, []string{"carried", "lazy", "flush"}, f.appendSources(), "r1's carrier, r2's lazy append and the run's last flush")
		},
	},
	{
		name: "diamond", desc: diamond, status: execution.StatusSucceeded,
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>g.in", "node.started g",
			"node.completed g", "edge.dead g.fail>c.in", "edge.taken g.pass>b.in",
			"node.skipped c DEAD_INPUT", "edge.dead c.out>m.right", "node.started b",
			"node.completed b", "edge.taken b.out>m.left", "node.started m",
			"node.completed m", "edge.taken m.out>out.in", "node.started out", "node.completed out", "run.succeeded",
		},
	},
	{
		name: "retry", status: execution.StatusSucceeded,
		desc: `
in  input
a   action in=in.out retry=3,100,2,0
out output in=a.out
`,
		steps: map[string][]step{"a": {{fail: execution.ErrActionFailed}, {fail: execution.ErrActionFailed}, {}}},
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
			"node.attempt.failed a", "node.retry.scheduled a", "node.started a#2",
			"node.attempt.failed a#2", "node.retry.scheduled a#2", "node.started a#3",
			"node.completed a#3", "edge.taken a.out>out.in", "node.started out", "node.completed out", "run.succeeded",
		},
	},
	{
		name: "node-failed", status: execution.StatusFailed,
		desc: `
in  input
a   action in=in.out retry=2,50,2,0
b   action in=in.out
m   merge  x=a.out y=b.out
out output in=m.out
`,
		steps: map[string][]step{"a": {{fail: execution.ErrActionFailed}}, "b": {{block: true}}},
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "edge.taken in.out>b.in",
			"node.started a", "node.started b", "node.attempt.failed a", "node.retry.scheduled a", "node.started a#2",
			"node.attempt.failed a#2", "node.failed a#2", "node.skipped m CANCELLED", "node.skipped out CANCELLED",
			"node.cancel.acknowledged b", "run.failed",
		},
	},
	{
		// Interpreter version 5: a's completion arrives while c still
		// runs; its workflow task starts nothing and flushes nothing (the
		// fakes see the fan-out's flush and the run's last only).
		name: "fanout-collect", status: execution.StatusSucceeded,
		desc: `
in  input
a   action in=in.out
c   action in=in.out
m   merge  x=a.out z=c.out
out output in=m.out
`,
		steps: map[string][]step{"c": {{wait: 600 * time.Millisecond}}},
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "edge.taken in.out>c.in",
			"node.started a", "node.started c", "node.completed a", "edge.taken a.out>m.x",
			"node.completed c", "edge.taken c.out>m.z", "node.started m", "node.completed m", "edge.taken m.out>out.in",
			"node.started out", "node.completed out", "run.succeeded",
		},
		fakes: func(t *testing.T, f *fakes) {
			require.Equal(t, []string{"flush", "flush"}, f.appendSources(), "the fan-out's flush and the run's last")
		},
	},
	{
		// Interpreter version 5: a's completion is deferred while c runs,
		// and c hangs until a's completion is in the log: only the
		// deferral's timer can flush it (c is released once it is).
		name: "fanout-collect-long", status: execution.StatusSucceeded,
		desc: `
in  input
a   action in=in.out
c   action in=in.out
m   merge  x=a.out z=c.out
out output in=m.out
`,
		steps:       map[string][]step{"c": {{hang: true}}},
		releaseWhen: &devEvent{typ: execution.EventNodeCompleted, node: "a"},
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "edge.taken in.out>c.in",
			"node.started a", "node.started c", "node.completed a", "edge.taken a.out>m.x",
			"node.completed c", "edge.taken c.out>m.z", "node.started m", "node.completed m", "edge.taken m.out>out.in",
			"node.started out", "node.completed out", "run.succeeded",
		},
		fakes: func(t *testing.T, f *fakes) {
			require.Equal(t, []string{"flush", "flush", "flush"}, f.appendSources(), "the fan-out's flush, the deferral's and the run's last")
		},
	},
	{
		// Interpreter version 10: a fan-out of read actions starts
		// without a flush, a carrying the run's start, its update and
		// both node.started; c ends first, and its workflow task defers
		// its events and the update a still holds (the fakes see a's
		// append and the run's last only).
		name: "fanout-carry", status: execution.StatusSucceeded,
		desc: `
in  input
a   action in=in.out risk=read
c   action in=in.out risk=read
m   merge  x=a.out z=c.out
out output in=m.out
`,
		steps: map[string][]step{"a": {{wait: 600 * time.Millisecond}}},
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "edge.taken in.out>c.in",
			"node.started a", "node.started c", "node.completed c", "edge.taken c.out>m.z",
			"node.completed a", "edge.taken a.out>m.x", "node.started m", "node.completed m", "edge.taken m.out>out.in",
			"node.started out", "node.completed out", "run.succeeded",
		},
		fakes: func(t *testing.T, f *fakes) {
			require.Equal(t, []string{"carried", "flush"}, f.appendSources(), "a's append and the run's last")
			require.Equal(t, []string{"a"}, f.carriers)
		},
	},
	{
		name: "first-output-wins", status: execution.StatusSucceeded,
		desc: `
in      input
fast    action in=in.out
slow    action in=in.out
aSlow   output in=slow.out
bFast   output in=fast.out
`,
		steps: map[string][]step{"slow": {{block: true}}},
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>fast.in", "edge.taken in.out>slow.in",
			"node.started fast", "node.started slow", "node.completed fast", "edge.taken fast.out>bFast.in",
			"node.started bFast", "node.completed bFast", "node.skipped aSlow SETTLED", "node.cancel.acknowledged slow",
			"run.succeeded",
		},
	},
	{
		name: "continue-as-new", desc: linear, force: 5, status: execution.StatusSucceeded,
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
			"node.completed a", "edge.taken a.out>b.in", "run.continued",
			"node.started b", "node.completed b", "edge.taken b.out>out.in", "node.started out", "node.completed out",
			"run.succeeded",
		},
	},
	{
		name: "simulation", mode: execution.ModeSimulation, status: execution.StatusSucceeded,
		desc: `
in  input
a   action in=in.out retry=3,120000,2,0
out output in=a.out
`,
		steps: map[string][]step{"a": {{fail: execution.ErrActionFailed}, {fail: execution.ErrActionFailed}, {durationMs: 5000}}},
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
			"node.attempt.failed a", "node.retry.scheduled a", "node.started a#2",
			"node.attempt.failed a#2", "node.retry.scheduled a#2", "node.started a#3",
			"node.completed a#3", "edge.taken a.out>out.in", "node.started out", "node.completed out", "run.succeeded",
		},
	},
	{
		// Real cancellation semantics (the test environment resolves a
		// cancelled activity at once): one attempt acknowledges, one returns
		// a result instead (late, kept as evidence), one ignores the request
		// past the 30 s grace (unacknowledged).
		name: "cancel", status: execution.StatusCancelled, cancel: []string{"ack", "hang", "late"},
		desc: `
in   input
ack  action in=in.out timeout=60000
hang action in=in.out timeout=60000
late action in=in.out timeout=60000
m    merge  a=ack.out b=hang.out c=late.out
out  output in=m.out
`,
		steps: map[string][]step{"ack": {{block: true}}, "hang": {{hang: true}}, "late": {{late: true}}},
		check: func(t *testing.T, events []string) {
			require.Equal(t, []string{
				"run.started", "node.started in", "node.completed in", "edge.taken in.out>ack.in",
				"edge.taken in.out>hang.in", "edge.taken in.out>late.in",
				"node.started ack", "node.started hang", "node.started late",
				"run.cancel.requested", "node.skipped m CANCELLED", "node.skipped out CANCELLED",
			}, events[:12])
			// ack and late settle in whichever order the worker reports them.
			settled := append([]string(nil), events[12:14]...)
			sort.Strings(settled)
			require.Equal(t, []string{"node.cancel.acknowledged ack", "node.late.result late"}, settled)
			require.Equal(t, []string{"node.cancel.unacknowledged hang", "run.cancelled"}, events[14:])
		},
	},
	{
		// An attempt that ignores its cancellation stops reaching Temporal
		// with heartbeats (the SDK has cancelled its context), so Temporal
		// times it out, here after 3 s, well within the 30 s grace: it is
		// unacknowledged, like one still running at the deadline.
		name: "cancel-timeout", status: execution.StatusCancelled, cancel: []string{"hang"},
		desc: `
in   input
hang action in=in.out timeout=3000
out  output in=hang.out
`,
		steps: map[string][]step{"hang": {{hang: true}}},
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>hang.in", "node.started hang",
			"run.cancel.requested", "node.skipped out CANCELLED", "node.cancel.unacknowledged hang", "run.cancelled",
		},
	},
	{
		// The worker running a's only attempt stops heartbeating (killed):
		// Temporal times the attempt out after the 1 s lease and the
		// interpreter dispatches the same attempt again, spending nothing.
		name: "lease-lost", status: execution.StatusSucceeded, durable: &execution.Durability{LeaseTimeoutMs: 1000},
		desc: `
in  input
a   action in=in.out
out output in=a.out
`,
		steps: map[string][]step{"a": {{lose: execution.InfraLeaseLost}}},
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
			"node.attempt.lease_lost a", "node.completed a", "edge.taken a.out>out.in", "node.started out",
			"node.completed out", "run.succeeded",
		},
		fakes: func(t *testing.T, f *fakes) { checkDispatches(t, f, "a", 1, 2) },
	},
	{
		// Infrastructure faults the activity reports itself: a draining
		// worker hands the attempt back, then the store is unavailable.
		name: "infra-retry", status: execution.StatusSucceeded,
		desc: `
in  input
a   action in=in.out
b   action in=a.out
out output in=b.out
`,
		steps: map[string][]step{
			"a": {{lose: execution.ErrWorkerDrained}},
			"b": {{lose: execution.ErrStoreUnavailable, loseTimes: 2}},
		},
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
			"node.attempt.infra_retry a", "node.completed a", "edge.taken a.out>b.in", "node.started b",
			"node.attempt.infra_retry b", "node.attempt.infra_retry b", "node.completed b", "edge.taken b.out>out.in",
			"node.started out", "node.completed out", "run.succeeded",
		},
		fakes: func(t *testing.T, f *fakes) {
			checkDispatches(t, f, "a", 1, 2)
			checkDispatches(t, f, "b", 1, 3)
		},
	},
	{
		// Past the run's limit the node fails with INFRA_UNAVAILABLE.
		name: "infra-exhausted", status: execution.StatusFailed, durable: &execution.Durability{MaxRedispatches: 2},
		desc: `
in  input
a   action in=in.out retry=3,100,2,0
out output in=a.out
`,
		steps: map[string][]step{"a": {{lose: execution.ErrProviderUnavailable, loseTimes: 99}}},
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>a.in", "node.started a",
			"node.attempt.infra_retry a", "node.attempt.infra_retry a", "node.attempt.failed a", "node.failed a",
			"node.skipped out CANCELLED", "run.failed",
		},
		fakes: func(t *testing.T, f *fakes) { checkDispatches(t, f, "a", 1, 3) },
	},
	{
		// Eight 5 KiB values into one action are over the 32 KiB inline
		// budget: the interpreter claim-checks some before scheduling pack
		// (changeNodeInputRefs).
		name: "wide-inputs", desc: wideDesc(false), steps: wideSteps(5 << 10), status: execution.StatusSucceeded,
		check: func(t *testing.T, events []string) {
			require.Equal(t, "run.succeeded", events[len(events)-1])
		},
		fakes: func(t *testing.T, f *fakes) { checkWideInputs(t, f, 5<<10) },
	},
}

// devDecision is an approve update a scenario sends: as weft's API does
// (a decision stored first) or as an operator would (none stored).
type devDecision struct {
	node, decision, after string
	operator              bool
}

// approvalScenarios are the human approval cases (interpreter version 3).
var approvalScenarios = []devScenario{
	{
		name: "approval-approved", desc: approvalGraph, status: execution.StatusSucceeded,
		decide: []devDecision{{node: "ok", decision: execution.DecisionApprove}},
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>ok.in", "node.started ok",
			"node.approval.requested ok", "node.approval.decided ok", "node.completed ok", "edge.taken ok.approved>yes.in",
			"edge.dead ok.rejected>no.in", "edge.dead ok.timedOut>late.in", "node.started yes", "node.completed yes",
			"node.skipped no DEAD_INPUT", "node.skipped late DEAD_INPUT", "run.succeeded",
		},
		fakes: func(t *testing.T, f *fakes) { checkDecider(t, f, "ok", execution.ActorUser) },
	},
	{
		name: "approval-rejected-by-operator", desc: approvalGraph, status: execution.StatusSucceeded,
		decide: []devDecision{{node: "ok", decision: execution.DecisionReject, operator: true}},
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>ok.in", "node.started ok",
			"node.approval.requested ok", "node.approval.decided ok", "node.completed ok", "edge.dead ok.approved>yes.in",
			"edge.taken ok.rejected>no.in", "edge.dead ok.timedOut>late.in", "node.skipped yes DEAD_INPUT",
			"node.started no", "node.completed no", "node.skipped late DEAD_INPUT", "run.succeeded",
		},
		fakes: func(t *testing.T, f *fakes) { checkDecider(t, f, "ok", execution.ActorOperator) },
	},
	{
		name: "approval-timed-out", status: execution.StatusSucceeded,
		desc: strings.Replace(approvalGraph, "timeout=60000", "timeout=1000", 1),
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>ok.in", "node.started ok",
			"node.approval.requested ok", "node.approval.timed_out ok", "node.completed ok", "edge.dead ok.approved>yes.in",
			"edge.dead ok.rejected>no.in", "edge.taken ok.timedOut>late.in", "node.skipped yes DEAD_INPUT",
			"node.skipped no DEAD_INPUT", "node.started late", "node.completed late", "run.succeeded",
		},
	},
	{
		name: "approval-cancelled", desc: approvalGraph, status: execution.StatusCancelled, cancelWaiting: "ok",
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>ok.in", "node.started ok",
			"node.approval.requested ok", "run.cancel.requested", "node.cancel.acknowledged ok", "node.skipped yes CANCELLED",
			"node.skipped no CANCELLED", "node.skipped late CANCELLED", "run.cancelled",
		},
	},
	{
		name: "approval-continue-as-new", desc: approvalGraph, force: 6, status: execution.StatusSucceeded,
		decide: []devDecision{{node: "ok", decision: execution.DecisionApprove, after: execution.EventRunContinued}},
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>ok.in", "node.started ok",
			"node.approval.requested ok", "run.continued", "node.approval.decided ok", "node.completed ok",
			"edge.taken ok.approved>yes.in", "edge.dead ok.rejected>no.in", "edge.dead ok.timedOut>late.in",
			"node.started yes", "node.completed yes", "node.skipped no DEAD_INPUT", "node.skipped late DEAD_INPUT", "run.succeeded",
		},
	},
	{
		name: "tool-approval", desc: toolGraph, status: execution.StatusSucceeded,
		steps:  map[string][]step{"ag": {{ask: 1}}},
		decide: []devDecision{{node: "ag", decision: execution.DecisionApprove}},
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>ag.in", "node.started ag",
			"node.approval.requested ag", "node.approval.decided ag", "node.completed ag", "edge.taken ag.out>out.in",
			"node.started out", "node.completed out", "run.succeeded",
		},
		fakes: func(t *testing.T, f *fakes) {
			in := f.nodeInputs("ag")
			require.Len(t, in, 2, "the attempt, then its resumption")
			require.Equal(t, []int{1, 1}, []int{in[0].Attempt, in[1].Attempt})
			require.Len(t, f.toolDecisions, 1)
			require.Equal(t, execution.ApprovalApproved, f.toolDecisions[0].Status)
		},
	},
	{
		name: "approval-simulation", desc: approvalGraph, mode: execution.ModeSimulation, status: execution.StatusSucceeded,
		steps: map[string][]step{"ok": {{port: graph.PortTimedOut, durationMs: 60000}}},
		want: []string{
			"run.started", "node.started in", "node.completed in", "edge.taken in.out>ok.in", "node.started ok",
			"node.approval.requested ok", "node.approval.timed_out ok", "node.completed ok", "edge.dead ok.approved>yes.in",
			"edge.dead ok.rejected>no.in", "edge.taken ok.timedOut>late.in", "node.skipped yes DEAD_INPUT",
			"node.skipped no DEAD_INPUT", "node.started late", "node.completed late", "run.succeeded",
		},
	},
}

// checkDecider: node's one decision was recorded with an actor of kind.
func checkDecider(t *testing.T, f *fakes, node, kind string) {
	t.Helper()
	d := eventData(t, findEvent(t, f.events(), execution.EventNodeApprovalDecided, node, 1))
	require.Equal(t, kind, d.Actor.Kind)
	if kind == execution.ActorOperator {
		require.Equal(t, "ops@devserver", d.Actor.Identity)
		require.NotEmpty(t, d.UpdateID)
	} else {
		require.Equal(t, "alice", d.Actor.Sub)
	}
}

// TestDevServer runs representative graphs on the real dev server with an
// in-process worker and fake activities, checks their events, replays each
// fresh history, and with -record writes the histories to testdata/.
func TestDevServer(t *testing.T) {
	srv, err := testinfra.SharedTemporal()
	require.NoError(t, err)
	// Errors only: the hanging fake's heartbeats after the run closed warn by design.
	quiet := log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	c, err := client.Dial(client.Options{HostPort: srv.HostPort, Namespace: "default", Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(c.Close)

	for _, sc := range append(append([]devScenario{}, devScenarios...), approvalScenarios...) {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			histories := runOnDevServer(t, c, sc)
			for k, h := range histories {
				replayer := worker.NewWorkflowReplayer()
				Register(replayer)
				require.NoError(t, replayer.ReplayWorkflowHistory(nil, h), "replay %s run %d", sc.name, k+1)
				if *record {
					writeHistory(t, sc.name, k, len(histories), h)
				}
			}
		})
	}
}

func runOnDevServer(t *testing.T, c client.Client, sc devScenario) []*historypb.History {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	unique := fmt.Sprintf("%s-%d", sc.name, time.Now().UnixNano())
	queue := "weft-test-" + unique

	f := newFakes(t, parsePlan(t, sc.desc), sc.steps)
	f.identity = "ops@devserver"
	if sc.setup != nil {
		sc.setup(f)
	}
	w := worker.New(c, queue, worker.Options{
		// Deliver cancellations to heartbeating fakes promptly.
		MaxHeartbeatThrottleInterval:     200 * time.Millisecond,
		DefaultHeartbeatThrottleInterval: 200 * time.Millisecond,
	})
	Register(w)
	f.register(w)
	require.NoError(t, w.Start())
	defer w.Stop()
	defer f.releaseAll() // let a hanging fake return before the worker stops

	p := testParams(sc.mode)
	if p.Mode == "" {
		p.Mode = execution.ModeLive
	}
	p.RunID = "run-" + sc.name
	p.ForceContinueAsNewAfterEvents = sc.force
	p.Durability = sc.durable
	// As `weft dev` starts runs: attempts' inputs leave the run's constants
	// to its record (the fakes check they do).
	p.LeanInputs = true
	f.mu.Lock()
	f.params = &p
	f.mu.Unlock()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "weft-test-" + unique, TaskQueue: queue},
		execution.WorkflowName, p)
	require.NoError(t, err)
	firstRunID := run.GetRunID() // Get follows continue-as-new and moves GetRunID along

	if len(sc.cancel) > 0 {
		require.Eventually(t, func() bool {
			for _, id := range sc.cancel {
				if len(f.nodeInputs(id)) == 0 {
					return false
				}
			}
			return true
		}, 10*time.Second, 20*time.Millisecond)
		require.NoError(t, c.CancelWorkflow(ctx, run.GetID(), ""))
	}
	if e := sc.releaseWhen; e != nil {
		waitForEvent(t, f, e.typ, e.node)
		f.releaseAll()
	}
	if sc.cancelWaiting != "" {
		waitForEvent(t, f, execution.EventNodeApprovalRequested, sc.cancelWaiting)
		require.NoError(t, c.CancelWorkflow(ctx, run.GetID(), ""))
	}
	for k, d := range sc.decide {
		waitForEvent(t, f, execution.EventNodeApprovalRequested, d.node)
		if d.after != "" {
			waitForEvent(t, f, d.after, "")
		}
		u := execution.ApprovalUpdate{NodeID: d.node, Decision: d.decision, Actor: &alice}
		id := fmt.Sprintf("decision-%d", k)
		if !d.operator {
			f.storeDecision(id, execution.StoredDecision{NodeID: d.node, Request: 1, Decision: d.decision, Actor: alice})
			u.Request, u.DecisionID = 1, id
		}
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: run.GetID(), UpdateID: id,
			UpdateName: execution.UpdateApprove, Args: []any{u}, WaitForStage: client.WorkflowUpdateStageCompleted})
		require.NoError(t, err)
		var res execution.ApprovalResult
		require.NoError(t, h.Get(ctx, &res))
		require.Equal(t, d.node, res.NodeID)
		// The decision is in the log when the update returns.
		findEvent(t, f.events(), execution.EventNodeApprovalDecided, d.node, 1)
	}

	var out execution.Value
	err = run.Get(ctx, &out)
	switch sc.status {
	case execution.StatusSucceeded:
		require.NoError(t, err)
	case execution.StatusCancelled:
		var canceled *temporal.CanceledError
		require.ErrorAs(t, err, &canceled)
	default:
		requireAppError(t, err, execution.RunErrNodeFailed)
	}

	var events []string
	for _, e := range f.events() {
		events = append(events, describe(e))
	}
	if sc.want != nil {
		require.Equal(t, sc.want, events)
	}
	if sc.check != nil {
		sc.check(t, events)
	}
	if sc.fakes != nil {
		sc.fakes(t, f)
	}
	checkLog(t, f, p.RunID, 1, sc.status)
	f.mu.Lock()
	require.Equal(t, len(f.inputs), f.lean, "every attempt's input is lean")
	f.mu.Unlock()

	// Follow the continue-as-new chain: one history per execution.
	var histories []*historypb.History
	runID := firstRunID
	for runID != "" {
		h := fetchHistory(ctx, t, c, run.GetID(), runID)
		histories = append(histories, h)
		runID = ""
		if last := h.Events[len(h.Events)-1]; last.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW {
			runID = last.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		}
	}
	if sc.force > 0 {
		require.Len(t, histories, 2)
	}
	return histories
}

// waitForEvent waits until the fakes hold an event of typ (of node, when set).
// devEvent names an event by type and node ("" for any node).
type devEvent struct{ typ, node string }

func waitForEvent(t *testing.T, f *fakes, typ, node string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, e := range f.events() {
			if e.Type == typ && (node == "" || e.NodeID == node) {
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "no %s %s", typ, node)
}

func fetchHistory(ctx context.Context, t *testing.T, c client.Client, workflowID, runID string) *historypb.History {
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, e)
	}
	return h
}

func writeHistory(t *testing.T, name string, k, n int, h *historypb.History) {
	if n > 1 {
		name = fmt.Sprintf("%s-%d", name, k+1)
	}
	raw, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll("testdata", 0o755))
	require.NoError(t, os.WriteFile(filepath.Join("testdata", name+".json"), append(raw, '\n'), 0o644))
}

// checkDispatches: node ran attempt `attempt` `dispatches` times, numbered
// 0, 1, ... in NodeInput.Redispatch, and no other attempt.
func checkDispatches(t *testing.T, f *fakes, node string, attempt, dispatches int) {
	t.Helper()
	in := f.nodeInputs(node)
	require.Len(t, in, dispatches, "dispatches of %s", node)
	for k, d := range in {
		require.Equal(t, attempt, d.Attempt, "%s dispatch %d", node, k)
		require.Equal(t, k, d.Redispatch, "%s dispatch %d", node, k)
	}
}
