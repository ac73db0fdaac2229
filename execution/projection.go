package execution

import (
	"encoding/json"
	"time"

	"github.com/weftworks/weft/graph"
)

// ReasonRunClosed is the reason a node shows cancelled when its run is
// terminal but its own events leave it open (pending, running or waiting):
// the run was closed without the interpreter settling it, e.g. terminated
// or timed out outside weft and settled by the reconciler. No event says
// so; the log keeps exactly what was recorded.
const ReasonRunClosed = "RUN_CLOSED"

// RecordedEvent is what the node projection reads of one stored event.
type RecordedEvent struct {
	Type    string
	NodeID  string
	Attempt int
	At      time.Time
	Data    json.RawMessage
}

// NodeProjection folds a run's recorded events into its node states. It
// lives beside the event types because it mirrors the interpreter's own
// state (the `state` query): the API and `temporal workflow query` agree.
type NodeProjection struct {
	order []string
	byID  map[string]*NodeState
}

// NewNodeProjection starts every node of the compiled graph pending.
func NewNodeProjection(nodes []graph.Node) *NodeProjection {
	p := &NodeProjection{order: make([]string, 0, len(nodes)), byID: make(map[string]*NodeState, len(nodes))}
	for _, n := range nodes {
		p.order = append(p.order, n.ID)
		p.byID[n.ID] = &NodeState{ID: n.ID, Kind: string(n.Kind), Status: NodePending}
	}
	return p
}

// Apply folds one event (in seq order); run events and events of unknown
// nodes change nothing.
func (p *NodeProjection) Apply(ev RecordedEvent) {
	if st, ok := p.byID[ev.NodeID]; ok && ev.NodeID != "" {
		applyNodeEvent(st, ev)
	}
}

// States returns the node states in compiled order. On a run whose status
// is terminal no node is left pending, running or waiting: such a node
// shows cancelled with reason ReasonRunClosed (its attempt count and error
// stay as the events left them), so nobody is told work runs on a closed
// run.
func (p *NodeProjection) States(runStatus string) []NodeState {
	closed := Terminal(runStatus)
	out := make([]NodeState, 0, len(p.order))
	for _, id := range p.order {
		st := *p.byID[id]
		if closed {
			switch st.Status {
			case NodePending, NodeRunning, NodeWaiting, NodeAwaitingApproval:
				st.Status, st.Reason = NodeCancelled, ReasonRunClosed
				if a := st.Approval; a != nil && a.Status == ApprovalPending {
					cancelled := *a
					cancelled.Status = ApprovalCancelled
					st.Approval = &cancelled
				}
			}
		}
		out = append(out, st)
	}
	return out
}

// applyNodeEvent advances one node's state by one event. Events of other
// writers (tool.*) leave the state as it is.
func applyNodeEvent(st *NodeState, ev RecordedEvent) {
	var d EventData
	_ = json.Unmarshal(ev.Data, &d)
	if ev.Attempt > st.Attempt {
		st.Attempt = ev.Attempt
	}
	errOf := func() (string, string) {
		if d.Error == nil {
			return "", ""
		}
		return d.Error.Type, d.Error.Message
	}
	switch ev.Type {
	case EventNodeStarted:
		st.Status, st.Reason, st.Error = NodeRunning, "", ""
	case EventNodeRetryScheduled:
		st.Status = NodeWaiting
	case EventNodeCompleted:
		st.Status, st.Port, st.Reason, st.Error = NodeSucceeded, d.Port, "", ""
	case EventNodeFailed:
		st.Status = NodeFailed
		st.Reason, st.Error = errOf()
	case EventNodeSkipped:
		st.Status, st.Reason = NodeSkipped, d.Reason
	case EventNodeCancelAcknowledged:
		st.Status, st.Reason = NodeCancelled, SkipCancelled
		if d.Error != nil {
			st.Reason, st.Error = errOf()
		}
		if a := st.Approval; a != nil && a.Status == ApprovalPending {
			a.Status = ApprovalCancelled
		}
	case EventNodeCancelUnacked:
		st.Status, st.Reason = NodeCancelled, "CANCEL_UNACKNOWLEDGED"
	case EventNodeLateResult:
		st.Status, st.Port, st.Reason = NodeCancelled, d.Port, "LATE_RESULT"
	case EventNodeApprovalRequested:
		at := ev.At
		if d.VirtualAt != nil {
			at = *d.VirtualAt
		}
		st.Status = NodeAwaitingApproval
		st.Approval = &ApprovalState{Request: d.Request, Status: ApprovalPending, TimeoutMs: d.TimeoutMs,
			RequestedAt: at, DeadlineAt: d.DeadlineAt, Call: d.Call}
	case EventNodeApprovalDecided, EventNodeApprovalTimedOut:
		if a := st.Approval; a != nil && a.Request == d.Request {
			at := ev.At
			a.DecidedAt, a.Status = &at, ApprovalTimedOut
			if ev.Type == EventNodeApprovalDecided {
				a.Status, a.Actor, a.Comment = ApprovalRejected, d.Actor, d.Comment
				if d.Decision == DecisionApprove {
					a.Status = ApprovalApproved
				}
			}
		}
		// An approval node completes next; an agent resumes its attempt.
		st.Status = NodeRunning
	case EventNodeAttemptLeaseLost, EventNodeAttemptInfraRetry:
		// The same attempt goes out again: the node keeps running, and
		// shows how often it was recovered and from what.
		st.Status, st.Redispatches, st.Infra = NodeRunning, d.Redispatch, d.Code
		if st.InfraSince == nil {
			at := ev.At
			st.InfraSince = &at
		}
	}
}
