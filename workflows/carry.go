package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/execution"
)

// continueAsNewDue says why the run should continue as new, or "". The
// first loop iteration of an execution always begins the attempts it can
// (continueReason is only set after route), so a chain of executions progresses.
func (i *interpreter) continueAsNewDue() string {
	if k := i.p.ForceContinueAsNewAfterEvents; k > 0 && i.events.recorded >= k {
		return execution.ReasonContinueForced
	}
	if workflow.GetInfo(i.root).GetContinueAsNewSuggested() {
		return execution.ReasonContinueSuggested
	}
	return ""
}

// continueAsNew hands the run to a fresh execution: the same logical run,
// with node states, resolved ports (values or claim-check references), the
// event ordinal and the virtual clock. No attempt is in flight here; a node
// waiting between attempts keeps its RetryAt and the next execution re-arms
// its timer, and a node waiting for an approval decision keeps its request
// and deadline and waits on in the next execution.
func (i *interpreter) continueAsNew() error {
	i.record(execution.EventRunContinued, nil, execution.EventData{Reason: i.continueReason})
	if err := i.flush(); err != nil {
		return err
	}
	next := i.p
	next.EnqueuedAt = i.runStart // keeps the simulation clock's origin
	if err := i.claimCheckCarry(&next); err != nil {
		return err
	}
	next.Carry = &execution.Carry{
		Nodes:        i.states(),
		Ports:        i.ports,
		EventOrdinal: i.events.ordinal,
		VirtualMs:    i.virtualMs,
	}
	if i.version >= 4 {
		next.Carry.Generation = i.events.generation + 1
	}
	i.awaitHandlers() // approvals.go
	return workflow.NewContinueAsNewError(i.root, execution.WorkflowName, next)
}

// restore loads the state a previous execution carried.
func (i *interpreter) restore(c *execution.Carry) {
	carried := make(map[string]execution.NodeState, len(c.Nodes))
	for _, s := range c.Nodes {
		carried[s.ID] = s
	}
	for _, n := range i.nodes {
		s, ok := carried[n.plan.ID]
		if !ok {
			continue
		}
		n.state = s
		switch s.Status {
		case execution.NodeRunning:
			if s.Redispatch {
				// Lost to an infrastructure fault, waiting to go out again
				// with the same attempt number.
				n.due = i.simulation || s.RetryAt == nil
				if !n.due {
					n.backoff = max(s.RetryAt.Sub(i.now()), 0)
				}
				break
			}
			// Never carried (continue-as-new drains attempts first); if it
			// ever is, the interrupted attempt runs again with its number.
			n.state.Status, n.state.Attempt, n.due = execution.NodeWaiting, s.Attempt-1, true
		case execution.NodeWaiting:
			n.due = i.simulation || s.RetryAt == nil
			if !n.due {
				n.backoff = max(s.RetryAt.Sub(i.now()), 0) // what is left of it
			}
		case execution.NodeAwaitingApproval:
			// Waiting for a decision: the same request waits on, for what
			// is left of its timeout (schedule re-arms the timer).
			if a := s.Approval; a != nil && a.DeadlineAt != nil {
				n.backoff = max(a.DeadlineAt.Sub(i.now()), 0)
			}
			n.decided, n.decide = workflow.NewFuture(i.work)
		}
	}
	if c.Ports != nil {
		i.ports = c.Ports
	}
	i.events.ordinal = c.EventOrdinal
	i.events.generation = c.Generation
	i.virtualMs = c.VirtualMs
}
