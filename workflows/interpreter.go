// Package workflows holds weft's one Temporal workflow: the interpreter that
// runs any compiled revision. It only schedules, routes, waits and cancels;
// everything that computes on data (gates, validators, merges, agents,
// actions, loading the plan, appending events) runs in activities or local
// activities called by name, so this code stays deterministic and small.
//
// One loop iteration is one workflow task's worth of decisions:
// collect completions → route → flush the buffered events (one local
// activity) → schedule activities and timers → wait.
package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// Versions for workflow.GetVersion. Scheduled runs stay open across
// deploys, so a behaviour change must not alter the commands an existing
// history recorded.
//
// changeInterpreterV1 is the interpreter's version, recorded once per
// execution (one marker, one search-attribute upsert). Each GetVersion
// costs history events and a workflow task's time, so behaviour changes
// raise this one version rather than adding change ids:
//
//	1: the interpreter before versions were numbered; the changes of that
//	   era have change ids of their own (below), recorded beside it;
//	2: the buffered events ride along with the next activity instead of a
//	   flush per workflow task (events.go); every earlier change id is
//	   implied and no longer recorded;
//	3: human approval (approvals.go): approval nodes wait for a decision
//	   (the UpdateApprove update) or their timeout, agent attempts that stop
//	   before a tool call needing approval (NodeResult.Approval) wait the
//	   same way and resume with the decision (NodeInput.Approval), a
//	   recorded decision is flushed at once, and the execution lets update
//	   handlers finish before it ends or continues as new;
//	4: event keys name the event (events.go, identityKey):
//	   run/node/attempt/type plus, where one node attempt records a type
//	   more than once, the edge, the re-dispatch, the approval request or
//	   the execution (Carry.Generation), instead of the order of
//	   recording, so a workflow task executed again after its flush
//	   committed logs nothing twice; a flush's input says its last ordinal
//	   (AppendEventsInput.Through); a retried simulated approval counts
//	   its attempts;
//	5: an iteration that starts nothing, arms no timer and waits for no
//	   decision while regular attempts of the run still run (a fan-out's
//	   workflow tasks that only collect a sibling's completion) leaves the
//	   buffered events to the next carrier or flush instead of flushing
//	   them, bounded by carryBudget and by deferMaxAge (Durability's
//	   EventDeferMs), a timer firing when the oldest is that old
//	   (events.go, mayDefer, armDeferTimer);
//	6: an attempt carries the buffered events in the compact form
//	   (NodeInput.Carried, execution.CompactBatch: keys relative to the
//	   run, type/node/attempt read from the key, times as microsecond
//	   offsets from one base) instead of NodeInput.Events; the activities
//	   expand it to the events the store would have kept from the plain
//	   form (events.go, carryIn); and, for a run whose parameters ask for
//	   it (RunParams.LeanInputs), attempts leave the run's constants to
//	   the run's record (NodeInput.Lean, attempts.go leanInputs);
//	7: an attempt carries only the events no earlier carrier was given
//	   (NodeInput.Suffix, with the ordinal they follow), which the store
//	   appends only once every event before them is in the log (migration
//	   00026), instead of every unconfirmed event; the whole unconfirmed
//	   prefix goes again after a failed attempt, a refused suffix
//	   (NodeResult.EventsRefused), or maxSuffixChain carriers in a row
//	   unconfirmed (events.go, carryIn);
//	8: an iteration whose one regular attempt is a read-only action's
//	   (graph.PlanNode.ReadOnly: risk read, no side effects) may start it
//	   carrying no events, leaving the buffer to the next carrier or
//	   flush while fewer than maxUnsentEvents events are unsent (given to
//	   no carrier), within carryBudget and deferMaxAge, bounded by the
//	   version 5 timer (events.go, mayDeferRead); from this version the
//	   deferral's age and that timer count only unsent events
//	   (oldestDeferred), and a fired timer flushes only if the event it
//	   was armed for is still unsent;
//	9: where version 8 would start a read-only action's attempt carrying
//	   nothing and arm the defer timer, the attempt carries the unsent
//	   events lazily instead (NodeInput.CarryLazyUntil: the oldest unsent
//	   event's time plus deferMaxAge) and no timer is armed: its activity
//	   appends them only if it is still running then, and reports it as
//	   any carrier does; an attempt that ends first appends nothing and
//	   its events are unsent again, for the next carrier or flush
//	   (events.go, carryLazily). A lazy carrier joins no carrier chain
//	   (the next carrier carries its events again), and a fan-out's
//	   deferral timer does not wait for the events it holds
//	   (oldestDeferred);
//	10: an iteration that starts several regular attempts, at most one of
//	   them not a read-only action's (a fan-out of read actions), lets one
//	   of them carry the buffered events instead of flushing them first:
//	   the one that is not read-only, else the first in compiled order;
//	   the others carry nothing, so a read may run before its node.started
//	   is in the log, as one may since version 8 (events.go,
//	   fanOutCarrier); and an iteration that starts nothing may defer the
//	   run's first update once a carrier in flight holds it, as it defers
//	   events (mayDefer).
//
// To change the interpreter:
//  1. raise interpreterVersion and document the new version above;
//  2. at the branching point write `if i.version >= N { new } else { old }`;
//  3. move the committed histories of testdata/*.json into a folder named
//     after the change (testdata/before-foo-bar/), then record the new ones
//     (go test ./workflows -run TestDevServer -record): TestReplay replays
//     every history below testdata and must keep passing on every one.
const changeInterpreterV1 = "weft-interpreter-v1"

// interpreterVersion is the version new executions record.
const interpreterVersion = 10

// changeActivityPerKind: node attempts run as their kind's activity type
// (execution.NodeActivity, e.g. weft.Action, weft.Gate) instead of the
// shared weft.RunNode / weft.RunLocalNode. Decided once per execution.
const changeActivityPerKind = "weft-activity-per-kind"

// Change ids of version 1's era, declared beside the code they branch
// (changed reports them):
// changeCarryRefs and changeCarryAllRefs (carryrefs.go),
// changeNodeInputRefs (inputrefs.go), changeInfraRedispatch (durability.go).

// cancelGrace is how long in-flight activities get to acknowledge a
// cancellation before they are recorded as unacknowledged (SPEC §5).
const cancelGrace = 30 * time.Second

// Register registers the interpreter under execution.WorkflowName. A worker,
// a replayer and the test environment all satisfy worker.WorkflowRegistry.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(Run, workflow.RegisterOptions{Name: execution.WorkflowName})
	r.RegisterWorkflowWithOptions(ScheduledEnqueue, workflow.RegisterOptions{Name: execution.ScheduledEnqueueWorkflow})
}

// Run is the interpreter workflow: it runs the compiled revision named by
// p.Checksum and returns the value of the output node that settled the run.
// A failed run returns a non-retryable ApplicationError whose type is the run
// error code; a cancelled run returns a CanceledError.
func Run(ctx workflow.Context, p execution.RunParams) (execution.Value, error) {
	in := newInterpreter(ctx, p)
	if err := in.setup(); err != nil {
		return execution.Value{}, err
	}
	return in.run()
}

// outcome is how the run ends, decided once.
type outcome int

const (
	outcomeNone outcome = iota
	outcomeSucceeded
	outcomeFailed
	outcomeCancelled
)

// interpreter is the state of one workflow execution of a run.
type interpreter struct {
	root workflow.Context // cancelled by Temporal when the run is cancelled
	// work is disconnected from root: activities, timers and flushes live on
	// it so that a cancellation is carried out by the interpreter (recorded,
	// bounded by cancelGrace) rather than by the SDK behind its back.
	work workflow.Context
	p    execution.RunParams

	nodes []*node // compiled order
	// deferTimer (version 5) fires deferMaxAge after the oldest event an
	// iteration left buffered (mayDefer), so that a collect-only workflow
	// task's events reach the log within about that much wall time even
	// while a sibling runs for long; nil when none is armed.
	deferTimer workflow.Future
	// deferFor (version 8) is the time of the oldest unsent event when
	// deferTimer was armed: if it, or an older one, is still unsent when
	// the timer fires, the iteration flushes (collectDeferTimer).
	deferFor time.Time
	// ports holds every resolved output port by "node.port": fired with a
	// value, or dead. Absent means unresolved. Lookups only, never iterated.
	ports map[string]execution.PortSlot

	events eventLog

	// runStart is the run's origin: RunParams.EnqueuedAt, else the first
	// execution's start. The simulation clock counts virtualMs from it.
	runStart   time.Time
	simulation bool
	virtualMs  int64

	outcome   outcome
	output    execution.Value
	settledBy string
	runErr    *execution.RunError

	// version is the interpreter version this execution recorded
	// (changeInterpreterV1).
	version workflow.Version
	// activityPerKind: attempts use their kind's activity type (see
	// changeActivityPerKind).
	activityPerKind bool
	// infra: infrastructure faults re-dispatch attempts instead of spending
	// them (changeInfraRedispatch), within durability's limits.
	infra      bool
	durability execution.Durability

	// continueReason is set once continue-as-new is due (SUGGESTED or
	// FORCED): start nothing, let in-flight attempts finish, then continue.
	continueReason string

	// ready: setup loaded the plan and restored any carried state.
	ready bool
}

// node is the runtime state of one plan node.
type node struct {
	plan  *graph.PlanNode
	state execution.NodeState

	start  bool                // an attempt was decided; schedule it after the flush
	future workflow.Future     // the running attempt
	cancel workflow.CancelFunc // cancels the running attempt only
	// lazyThrough (version 9) is the last ordinal of the events the
	// running attempt carries lazily (NodeInput.CarryLazyUntil), 0 if none.
	lazyThrough     int
	cancelRequested bool // cancelled by the interpreter; a result is a late one

	backoff     time.Duration   // the wait before the next attempt (live mode), or an approval's time left
	timer       workflow.Future // that wait, once armed
	timerCancel workflow.CancelFunc
	due         bool // waiting and the next attempt may start

	// An approval wait (approvals.go): decided is settled by the
	// UpdateApprove handler once decision holds a verified decision;
	// deciding says an accepted update is being verified; timedOut that
	// the wait's timer fired while it was.
	decided  workflow.Future
	decide   workflow.Settable
	decision *pendingDecision
	deciding bool
	timedOut bool
}

func newInterpreter(ctx workflow.Context, p execution.RunParams) *interpreter {
	work, _ := workflow.NewDisconnectedContext(ctx)
	return &interpreter{
		root:       ctx,
		work:       work,
		p:          p,
		ports:      map[string]execution.PortSlot{},
		events:     eventLog{runID: p.RunID},
		simulation: p.Mode == execution.ModeSimulation,
	}
}

// setup loads the plan, restores carried state and answers the state query.
func (i *interpreter) setup() error {
	// Recorded once per execution: see changeInterpreterV1.
	i.version = workflow.GetVersion(i.root, changeInterpreterV1, workflow.DefaultVersion, interpreterVersion)
	i.activityPerKind = i.changed(changeActivityPerKind)
	i.infra = i.changed(changeInfraRedispatch)
	i.events.rideAlong = i.version >= 2
	// Before anything blocks: the SDK refuses an update that finds no
	// handler once the workflow blocks (here on LoadPlan), and one may
	// arrive with the first task of an execution that carries a wait.
	if err := i.registerApprovals(); err != nil { // approvals.go
		return err
	}
	i.durability = execution.DefaultDurability
	if i.p.Durability != nil {
		i.durability = i.p.Durability.WithDefaults()
	}

	i.runStart = i.p.EnqueuedAt
	if i.runStart.IsZero() {
		i.runStart = workflow.GetInfo(i.root).WorkflowStartTime
	}

	plan, err := i.loadPlan()
	if err == nil {
		err = checkPlan(plan)
	}
	if err != nil {
		return i.failSetup(err)
	}
	for idx := range plan.Nodes {
		pn := &plan.Nodes[idx]
		n := &node{plan: pn, state: execution.NodeState{ID: pn.ID, Kind: string(pn.Kind), Status: execution.NodePending}}
		i.nodes = append(i.nodes, n)
	}

	if c := i.p.Carry; c != nil {
		i.restore(c)
	} else {
		i.events.setUpdate(&execution.RunUpdate{Status: execution.StatusRunning})
		if i.version >= 2 { // the row learns the run id here, not from the starter
			i.events.update.TemporalRunID = workflow.GetInfo(i.root).WorkflowExecution.RunID
		}
		i.record(execution.EventRunStarted, nil, execution.EventData{
			Mode: i.p.Mode, Checksum: i.p.Checksum, Revision: i.p.Revision,
		})
	}

	i.ready = true
	return workflow.SetQueryHandler(i.root, execution.QueryState, func() ([]execution.NodeState, error) {
		return i.states(), nil
	})
}

// loadPlan runs the LoadPlan local activity.
func (i *interpreter) loadPlan() (graph.Plan, error) {
	ctx := workflow.WithLocalActivityOptions(i.work, infraActivityOptions("load plan"))
	var plan graph.Plan
	err := workflow.ExecuteLocalActivity(ctx, execution.ActivityLoadPlan,
		execution.LoadPlanInput{TenantID: i.p.TenantID, Checksum: i.p.Checksum}).Get(ctx, &plan)
	return plan, err
}

// failSetup records a run that cannot start and ends it. If even the
// append fails, the original error is what the workflow reports.
func (i *interpreter) failSetup(cause error) error {
	runErr := &execution.RunError{Code: execution.RunErrPlanUnavailable, Message: cause.Error()}
	i.events.setUpdate(&execution.RunUpdate{Status: execution.StatusFailed, Error: runErr})
	i.record(execution.EventRunFailed, nil, execution.EventData{RunError: runErr})
	_ = i.flush()
	return temporal.NewNonRetryableApplicationError(runErr.Message, runErr.Code, cause)
}

// checkPlan verifies what routing relies on: unique ids, and every input fed
// by a node earlier in compiled order, so one pass in order sees every
// source resolved before its targets.
func checkPlan(plan graph.Plan) error {
	if len(plan.Nodes) == 0 {
		return fmt.Errorf("plan %s has no nodes", plan.Checksum)
	}
	seen := map[string]bool{}
	for _, n := range plan.Nodes {
		if seen[n.ID] {
			return fmt.Errorf("plan %s: duplicate node %q", plan.Checksum, n.ID)
		}
		for _, in := range n.Inputs {
			if !seen[in.FromNode] {
				return fmt.Errorf("plan %s: node %q input %q is fed by %q, which is not earlier in compiled order",
					plan.Checksum, n.ID, in.Port, in.FromNode)
			}
		}
		seen[n.ID] = true
	}
	return nil
}

// run is the main loop.
func (i *interpreter) run() (execution.Value, error) {
	for {
		i.collect()
		if i.outcome == outcomeNone && i.root.Err() != nil {
			i.cancelRun()
		}
		i.route()
		if i.outcome != outcomeNone {
			v, err := i.finish()
			i.awaitHandlers()
			return v, err
		}
		if i.continueReason == "" {
			i.continueReason = i.continueAsNewDue()
		}
		if i.continueReason != "" && !i.activityInFlight() && !i.decisionInFlight() {
			return execution.Value{}, i.continueAsNew()
		}
		if err := i.flushOrCarry(); err != nil { // events.go
			return execution.Value{}, err
		}
		i.schedule()
		i.wait()
	}
}

// schedule starts what route decided, after the events saying so are flushed.
func (i *interpreter) schedule() {
	for _, n := range i.nodes {
		if n.start {
			n.start = false
			i.startAttempt(n)
		}
		if n.state.Status == execution.NodeWaiting && !n.due && n.timer == nil {
			i.armRetryTimer(n)
		}
		if awaitingRedispatch(n) && !n.due && n.timer == nil {
			i.armRedispatchTimer(n)
		}
		if awaitingApproval(n) && n.timer == nil && !n.timedOut {
			i.armApprovalWait(n) // approvals.go
		}
	}
}

// wait blocks until an attempt or a timer completes, or the run is cancelled.
func (i *interpreter) wait() {
	sel := workflow.NewSelector(i.work)
	pending := 0
	for _, n := range i.nodes {
		if n.future != nil {
			sel.AddFuture(n.future, func(workflow.Future) {})
			pending++
		}
		if n.timer != nil {
			sel.AddFuture(n.timer, func(workflow.Future) {})
			pending++
		}
		if n.decided != nil {
			sel.AddFuture(n.decided, func(workflow.Future) {})
			pending++
		}
	}
	if pending == 0 {
		// Unreachable: route fails the run with NO_OUTPUT when nothing is alive.
		panic("weft interpreter: waiting with nothing in flight")
	}
	if i.deferTimer != nil {
		sel.AddFuture(i.deferTimer, func(workflow.Future) {})
	}
	sel.AddReceive(i.root.Done(), func(c workflow.ReceiveChannel, _ bool) { c.Receive(i.work, nil) })
	sel.Select(i.work)
}

// collect handles every attempt and timer that has completed, in compiled
// order, so that what one workflow task delivers is processed identically on
// replay and ties go to the lowest index.
func (i *interpreter) collect() {
	for _, n := range i.nodes {
		if n.future != nil && n.future.IsReady() {
			var res execution.NodeResult
			err := n.future.Get(i.work, &res)
			if n.lazyThrough > 0 {
				// What it did not append is unsent again (version 9).
				i.events.lazyEnded(n.lazyThrough)
				n.lazyThrough = 0
			}
			if err == nil {
				i.events.confirm(res.EventsThrough) // the events it carried are in the log
			}
			if i.version >= 7 && (err != nil || res.EventsRefused) {
				i.events.unsent() // its append may be lost or was refused
			}
			// Releases the attempt's context; a no-op command-wise once the
			// future is ready, so replay-safe.
			n.cancel()
			n.future, n.cancel = nil, nil
			switch {
			case n.cancelRequested:
				i.cancelSettled(n, res, err)
			case err != nil:
				i.attemptFailed(n, err)
			default:
				i.completed(n, res)
			}
		}
		if n.timer != nil && n.timer.IsReady() {
			err := n.timer.Get(i.work, nil)
			n.timerCancel()
			n.timer, n.timerCancel = nil, nil
			switch {
			case err != nil:
			case awaitingApproval(n):
				n.timedOut = true
			default:
				n.due = true
			}
		}
		if awaitingApproval(n) {
			i.settleApproval(n) // approvals.go
		}
	}
	i.collectDeferTimer() // events.go
}

// activityInFlight reports whether any attempt is running or about to start.
func (i *interpreter) activityInFlight() bool {
	for _, n := range i.nodes {
		if n.future != nil || n.start {
			return true
		}
	}
	return false
}

// states is the state query's answer, in compiled order.
func (i *interpreter) states() []execution.NodeState {
	out := make([]execution.NodeState, len(i.nodes))
	for k, n := range i.nodes {
		out[k] = n.state
	}
	return out
}

// changed reports whether a change id of version 1's era applies to this
// execution: always from version 2 on (without recording it), else as the
// execution recorded it, or records it (new executions never get here).
func (i *interpreter) changed(changeID string) bool {
	if i.version >= 2 {
		return true
	}
	return workflow.GetVersion(i.root, changeID, workflow.DefaultVersion, 1) == 1
}

// now is the event clock.
func (i *interpreter) now() time.Time { return workflow.Now(i.root) }

// virtualNow is the simulation clock.
func (i *interpreter) virtualNow() time.Time {
	return i.runStart.Add(time.Duration(i.virtualMs) * time.Millisecond).UTC()
}
