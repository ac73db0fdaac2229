package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// defaultNodeTimeout applies when a plan leaves TimeoutMs unset (the
// compiler normally fills it in).
const defaultNodeTimeout = 60 * time.Second

// maxHeartbeatTimeout: a crashed worker's attempt is noticed within this (SPEC §5).
const maxHeartbeatTimeout = 30 * time.Second

// beginAttempt marks an attempt decided and records it; the activity is
// started by schedule, after the flush.
func (i *interpreter) beginAttempt(n *node, attempt int) {
	n.state.Status, n.state.Attempt = execution.NodeRunning, attempt
	n.state.RetryAt = nil
	n.due, n.start = false, true
	i.record(execution.EventNodeStarted, n, execution.EventData{Kind: n.plan.Kind})
}

// isLocal: gates, validators and merges are cheap and deterministic in
// their inputs, so they run as local activities (one marker, no task
// round trip); agents and actions are real work with heartbeats. An
// approval node makes an attempt only in a simulation, where a local
// activity reads its fixture.
func isLocal(k graph.Kind) bool {
	return k == graph.KindGate || k == graph.KindValidator || k == graph.KindMerge || k == graph.KindApproval
}

// startAttempt starts one attempt as an activity on its own cancellable
// context, so siblings can be cancelled one by one.
func (i *interpreter) startAttempt(n *node) {
	inputs, err := i.attemptInputs(n) // inputrefs.go
	if err != nil {
		// The values could not be claim-checked: the attempt fails with
		// that error, through the same path as any other failed attempt.
		f, set := workflow.NewFuture(i.work)
		set.SetError(err)
		_, cancel := workflow.WithCancel(i.work)
		n.future, n.cancel, n.cancelRequested = f, cancel, false
		return
	}
	in := execution.NodeInput{
		TenantID: i.p.TenantID,
		RunID:    i.p.RunID,
		NodeID:   n.plan.ID,
		Kind:     n.plan.Kind,
		Attempt:  n.state.Attempt,
		Inputs:   inputs,
		// The run's origin, stable across attempts and continue-as-new.
		RunStartedAt: i.runStart,
		Redispatch:   n.state.Redispatches,
	}
	if i.leanInputs() {
		in.Lean = true // the activity reads the constants from the run's record
	} else {
		in = in.WithConstants(i.p.RunConstants())
	}
	if i.simulation {
		in.VirtualNow = i.virtualNow()
	}
	if st := n.state.Approval; i.version >= 3 && st.Decided() && st.Call != nil {
		decided := *st
		in.Approval = &decided // the harness applies it to that call, if still pending
	}
	if i.events.carry && !isLocal(n.plan.Kind) && (i.events.carrier == nil || i.events.carrier == n) {
		i.carryIn(&in) // events.go
		if !in.CarryLazyUntil.IsZero() {
			n.lazyThrough = i.events.lazy
		}
	}
	timeout := time.Duration(n.plan.TimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = defaultNodeTimeout
	}
	// Temporal never retries an attempt: the interpreter does (retry.go).
	once := &temporal.RetryPolicy{MaximumAttempts: 1}

	ctx, cancel := workflow.WithCancel(i.work)
	if isLocal(n.plan.Kind) {
		ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: timeout,
			RetryPolicy:         once,
			Summary:             n.plan.Summary,
		})
		n.future = workflow.ExecuteLocalActivity(ctx, i.activityName(n, execution.ActivityRunLocalNode), in)
	} else {
		startToClose, heartbeat := i.activityTimeouts(timeout) // durability.go
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: startToClose,
			HeartbeatTimeout:    heartbeat,
			RetryPolicy:         once,
			WaitForCancellation: true,
			Summary:             n.plan.Summary,
		})
		n.future = workflow.ExecuteActivity(ctx, i.activityName(n, execution.ActivityRunNode), in)
	}
	n.cancel, n.cancelRequested = cancel, false
}

// leanInputs says whether attempts leave the run's constants out
// (execution.NodeInput.Lean): from interpreter version 6, for a run whose
// parameters ask for it. The parameters decide, not the worker's
// configuration, so a replay sends what the original execution sent. An
// execution begun by an earlier release's interpreter records an earlier
// version and sends full inputs to its end; one that recorded 6 cannot be
// run by an earlier release at all, so neither can its local attempts.
func (i *interpreter) leanInputs() bool {
	return i.version >= 6 && i.p.LeanInputs
}

// activityName is the activity type of n's attempts: its kind's
// (execution.NodeActivity) since changeActivityPerKind, else shared, the
// name the execution's history recorded.
func (i *interpreter) activityName(n *node, shared string) string {
	if !i.activityPerKind {
		return shared
	}
	if name, ok := execution.NodeActivity(n.plan.Kind); ok {
		return name
	}
	return shared
}
