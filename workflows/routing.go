package workflows

import (
	"fmt"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// readiness of a pending node given its resolved inputs (SPEC §2).
type readiness int

const (
	notReady readiness = iota
	ready
	deadInput
)

// route makes every decision the resolved ports allow, in one pass in
// compiled order: sources precede targets (checkPlan), so a skip or a fired
// input node propagates as far as it can within the pass. Attempts are begun
// only after the pass, once it is known that the run is not ending (an
// output later in the pass may settle it).
func (i *interpreter) route() {
	var startable []*node
	for _, n := range i.nodes {
		switch n.state.Status {
		case execution.NodePending:
			if i.routePending(n) {
				startable = append(startable, n)
			}
		case execution.NodeWaiting:
			if n.due {
				startable = append(startable, n)
			}
		case execution.NodeRunning:
			if n.state.Redispatch && n.due {
				startable = append(startable, n)
			}
		}
	}
	if i.outcome == outcomeNone && !i.outputOpen() {
		i.fail(&execution.RunError{Code: execution.RunErrNoOutput, Message: "no output node can receive a value"})
	}
	if !i.canStart() {
		return
	}
	for _, n := range startable {
		if n.state.Redispatch {
			i.redispatch(n) // durability.go
			continue
		}
		if n.plan.Kind == graph.KindApproval && i.version >= 3 {
			i.requestApproval(n) // approvals.go
			continue
		}
		i.beginAttempt(n, n.state.Attempt+1)
	}
}

// routePending decides a pending node and reports whether it is ready for
// an attempt.
func (i *interpreter) routePending(n *node) bool {
	switch i.readiness(n) {
	case deadInput:
		i.skip(n, execution.SkipDeadInput)
	case ready:
		switch n.plan.Kind {
		case graph.KindInput:
			i.fireInput(n)
		case graph.KindOutput:
			// The first output to receive a value settles the run; in one
			// pass that is the lowest index. Later ones stay pending and are
			// skipped SETTLED by finish.
			if i.outcome == outcomeNone {
				i.settle(n)
			}
		default:
			return true
		}
	}
	return false
}

// readiness: a non-merge node needs every input fired and is dead as soon as
// one is dead; a merge waits for all inputs and is dead only if all are.
func (i *interpreter) readiness(n *node) readiness {
	fired, dead := 0, 0
	for _, in := range n.plan.Inputs {
		slot, ok := i.ports[portName(in.FromNode, in.FromPort)]
		switch {
		case !ok:
		case slot.Fired:
			fired++
		default:
			dead++
		}
	}
	if n.plan.Kind == graph.KindMerge {
		switch {
		case fired+dead < len(n.plan.Inputs):
			return notReady
		case fired == 0:
			return deadInput
		default:
			return ready
		}
	}
	switch {
	case dead > 0:
		return deadInput
	case fired < len(n.plan.Inputs):
		return notReady
	default:
		return ready
	}
}

// canStart: no new attempt once the run is ending or draining for continue-as-new.
func (i *interpreter) canStart() bool { return i.outcome == outcomeNone && i.continueReason == "" }

// outputOpen reports whether an output node can still receive a value. With
// routing done in compiled order, an output is pending only while something
// upstream is still alive.
func (i *interpreter) outputOpen() bool {
	for _, n := range i.nodes {
		if n.plan.Kind == graph.KindOutput && n.state.Status == execution.NodePending {
			return true
		}
	}
	return false
}

// inputValues are the values on a node's fired inputs, by input port. A
// merge's dead ports are absent.
func (i *interpreter) inputValues(n *node) map[string]execution.Value {
	out := make(map[string]execution.Value, len(n.plan.Inputs))
	for _, in := range n.plan.Inputs {
		if slot, ok := i.ports[portName(in.FromNode, in.FromPort)]; ok && slot.Fired {
			out[in.Port] = slot.Value
		}
	}
	return out
}

// fireInput: the input node fires `out` with the run input, no activity.
func (i *interpreter) fireInput(n *node) {
	n.state.Status, n.state.Attempt = execution.NodeRunning, 1
	i.record(execution.EventNodeStarted, n, execution.EventData{Kind: n.plan.Kind})
	i.succeed(n, execution.NodeResult{Port: "out", Value: i.p.Input})
}

// settle: an output node received a value; the run succeeds with it.
func (i *interpreter) settle(n *node) {
	var v execution.Value
	if len(n.plan.Inputs) > 0 {
		// Outputs have one input port; with several, the first by name wins.
		in := n.plan.Inputs[0]
		v = i.ports[portName(in.FromNode, in.FromPort)].Value
	}
	n.state.Status, n.state.Attempt = execution.NodeSucceeded, 1
	i.record(execution.EventNodeStarted, n, execution.EventData{Kind: n.plan.Kind})
	d := execution.EventData{}
	valueData(&d, v)
	i.record(execution.EventNodeCompleted, n, d)
	i.outcome, i.output, i.settledBy = outcomeSucceeded, v, n.plan.ID
}

// completed handles a successful attempt.
func (i *interpreter) completed(n *node, res execution.NodeResult) {
	if i.simulation {
		i.virtualMs += max(res.DurationMs, 0)
	}
	if i.version >= 3 {
		switch {
		case n.plan.Kind == graph.KindApproval:
			i.simulatedApproval(n, res) // approvals.go
			return
		case res.Approval != nil && !i.simulation && (n.plan.Kind == graph.KindAgent || n.plan.Kind == graph.KindAgentDecision):
			i.toolApprovalRequested(n, res.Approval)
			return
		}
	}
	if !hasOutput(n.plan, res.Port) {
		i.attemptFailed(n, errUnknownPort(n, res.Port))
		return
	}
	i.succeed(n, res)
}

// succeed records a node's result and resolves all its output ports: the
// fired one carries the value, the others are dead.
func (i *interpreter) succeed(n *node, res execution.NodeResult) {
	n.state.Status, n.state.Port = execution.NodeSucceeded, res.Port
	n.state.RetryAt = nil
	d := execution.EventData{Port: res.Port}
	valueData(&d, res.Value)
	i.record(execution.EventNodeCompleted, n, d)
	for _, out := range n.plan.Outputs {
		i.resolvePort(n, out, out.Port == res.Port, res.Value)
	}
}

// skip records a node that can never run because of its inputs, and kills
// its outgoing edges so the skip propagates.
func (i *interpreter) skip(n *node, reason string) {
	n.state.Status, n.state.Reason = execution.NodeSkipped, reason
	i.record(execution.EventNodeSkipped, n, execution.EventData{Reason: reason})
	for _, out := range n.plan.Outputs {
		i.resolvePort(n, out, false, execution.Value{})
	}
}

// resolvePort stores a port's resolution and records one edge event per target.
func (i *interpreter) resolvePort(n *node, out graph.PlanOutput, fired bool, v execution.Value) {
	from := portName(n.plan.ID, out.Port)
	slot := execution.PortSlot{Fired: fired}
	typ := execution.EventEdgeDead
	if fired {
		slot.Value, typ = v, execution.EventEdgeTaken
	}
	i.ports[from] = slot
	for _, to := range out.To {
		i.record(typ, n, execution.EventData{From: from, To: portName(to.Node, to.Port)})
	}
}

// fail decides a failed run; the first failure in compiled order names it.
func (i *interpreter) fail(runErr *execution.RunError) {
	if i.outcome == outcomeNone {
		i.outcome, i.runErr = outcomeFailed, runErr
	}
}

func hasOutput(p *graph.PlanNode, port string) bool {
	for _, out := range p.Outputs {
		if out.Port == port {
			return true
		}
	}
	return false
}

func errUnknownPort(n *node, port string) error {
	return nonRetryable(errTypeUnknownPort, fmt.Sprintf("node %s returned port %q, which it does not declare", n.plan.ID, port))
}
