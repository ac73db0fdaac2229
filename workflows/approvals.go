package workflows

import (
	"fmt"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// Human approval (interpreter version 3). A node waits for a decision in
// the workflow itself: an approval node when it is reached, an agent node
// when its attempt stops before a tool call that needs approval
// (NodeResult.Approval). The wait is a timer (the timeout) and a future
// the UpdateApprove handler settles; it holds no activity and no worker
// slot, is carried across continue-as-new with the time left, and ends
// with the run's cancellation. node.approval.requested is flushed before
// the wait begins; the decision (node.approval.decided) or the timeout
// (node.approval.timed_out) is recorded when the loop collects it.
//
// Deciding: the update's validator refuses, recording nothing, a node that
// is not waiting or whose request is decided or being decided. An accepted
// update is verified by its handler: a decision weft's API stored before
// sending it (ApprovalUpdate.DecisionID, read back by the LoadDecision
// local activity) is recorded with the user who made it; any other is an
// operator's (ActorOperator), recorded with the Temporal client identity
// the update came with (the UpdateIdentity activity reads it from the
// history). Once accepted a decision wins over a timeout that fires while
// it is verified. The handler returns once the decision is in the event log.

// identityTimeout bounds the operator identity lookup; past it the
// decision is recorded with an unknown identity rather than held.
const identityTimeout = 30 * time.Second

// pendingDecision is a verified decision handed from the update handler to
// the loop; ordinal is set once the loop has recorded it.
type pendingDecision struct {
	request  int
	decision string
	actor    execution.Actor
	comment  string
	updateID string
	// set by the loop
	ordinal int
	result  execution.ApprovalResult
}

// awaitingApproval: a live node waiting for a decision (simulated
// approvals are local attempts, never waits).
func awaitingApproval(n *node) bool {
	return n.state.Status == execution.NodeAwaitingApproval
}

// requestApproval begins an approval node: node.started and
// node.approval.requested. Live runs wait (schedule arms the timeout);
// simulations ask the node's fixture in a local attempt.
func (i *interpreter) requestApproval(n *node) {
	if i.version >= 4 {
		// A simulated approval whose attempt failed is retried through
		// here: the next attempt number, so its events are that attempt's
		// and its retries end at the node's maximum (before version 4
		// every retry was attempt 1 again).
		n.state.Attempt++
	} else {
		n.state.Attempt = 1
	}
	i.record(execution.EventNodeStarted, n, execution.EventData{Kind: n.plan.Kind})
	i.askApproval(n, int64(n.plan.TimeoutMs), nil)
	if i.simulation {
		n.state.Status = execution.NodeRunning
		n.start = true
	}
}

// askApproval opens the node's next approval request.
func (i *interpreter) askApproval(n *node, timeoutMs int64, call *execution.ApprovalCall) {
	req := 1
	if prev := n.state.Approval; prev != nil {
		req = prev.Request + 1
	}
	st := &execution.ApprovalState{Request: req, Status: execution.ApprovalPending, TimeoutMs: timeoutMs,
		RequestedAt: i.now(), Call: call}
	d := execution.EventData{Request: req, TimeoutMs: timeoutMs, Call: call}
	if i.simulation {
		st.RequestedAt = i.virtualNow()
	} else {
		wait := time.Duration(timeoutMs) * time.Millisecond
		at := st.RequestedAt.Add(wait)
		st.DeadlineAt, d.DeadlineAt = &at, &at
		n.backoff = wait
		n.decided, n.decide = workflow.NewFuture(i.work)
	}
	n.state.Status, n.state.Approval = execution.NodeAwaitingApproval, st
	i.record(execution.EventNodeApprovalRequested, n, d)
}

// toolApprovalRequested: an agent attempt stopped before a call that
// needs approval; the node waits like an approval node.
func (i *interpreter) toolApprovalRequested(n *node, req *execution.ApprovalRequest) {
	l := graph.DefaultLimits
	ms := min(max(req.TimeoutMs, int64(l.MinApprovalTimeoutMs)), int64(l.MaxApprovalTimeoutMs))
	call := req.Call
	i.askApproval(n, ms, &call)
}

// armApprovalWait starts the wait's timeout, with what is left of it.
func (i *interpreter) armApprovalWait(n *node) {
	ctx, cancel := workflow.WithCancel(i.work)
	n.timer = workflow.NewTimerWithOptions(ctx, max(n.backoff, time.Millisecond), workflow.TimerOptions{
		Summary: fmt.Sprintf("%s · approval %d", n.plan.ID, n.state.Approval.Request),
	})
	n.timerCancel = cancel
}

// settleApproval ends a wait whose decision arrived or whose timer fired
// (collect). A decision being verified holds a fired timeout.
func (i *interpreter) settleApproval(n *node) {
	switch {
	case n.decision != nil:
		i.approvalDecided(n)
	case n.timedOut && !n.deciding:
		i.approvalTimedOut(n)
	}
}

// endWait releases the wait's timer and future.
func (n *node) endWait() {
	if n.timerCancel != nil {
		n.timerCancel()
	}
	n.timer, n.timerCancel, n.timedOut = nil, nil, false
	n.decided, n.decide = nil, nil
}

func (i *interpreter) approvalDecided(n *node) {
	d := n.decision
	n.decision = nil
	n.endWait()
	now := i.now()
	if i.simulation {
		now = i.virtualNow()
	}
	st := n.state.Approval
	st.Status, st.Comment, st.DecidedAt = execution.ApprovalRejected, d.comment, &now
	port := graph.PortRejected
	if d.decision == execution.DecisionApprove {
		st.Status, port = execution.ApprovalApproved, graph.PortApproved
	}
	actor := d.actor
	st.Actor = &actor
	i.record(execution.EventNodeApprovalDecided, n, execution.EventData{Request: st.Request, Decision: d.decision,
		Actor: &actor, Comment: d.comment, UpdateID: d.updateID})
	d.ordinal = i.events.ordinal
	d.result = execution.ApprovalResult{NodeID: n.plan.ID, ApprovalState: *st}
	// The update returns once this is in the log: flush it now rather
	// than let it ride along with whatever starts next.
	i.events.flushNow = true
	i.approvalResolved(n, port)
}

func (i *interpreter) approvalTimedOut(n *node) {
	n.endWait()
	now := i.now()
	if i.simulation {
		now = i.virtualNow()
	}
	st := n.state.Approval
	st.Status, st.DecidedAt = execution.ApprovalTimedOut, &now
	i.record(execution.EventNodeApprovalTimedOut, n, execution.EventData{Request: st.Request, TimeoutMs: st.TimeoutMs})
	i.approvalResolved(n, graph.PortTimedOut)
}

// approvalResolved routes an approval node's outcome (its port carries
// the node's input), or sends a tool approval's agent attempt out again to
// resume from its transcript with the decision (NodeInput.Approval): the
// same attempt number, no new node.started, like a re-dispatch.
func (i *interpreter) approvalResolved(n *node, port string) {
	if n.plan.Kind == graph.KindApproval {
		var v execution.Value
		if len(n.plan.Inputs) > 0 {
			in := n.plan.Inputs[0]
			v = i.ports[portName(in.FromNode, in.FromPort)].Value
		}
		n.state.Status = execution.NodeRunning
		i.succeed(n, execution.NodeResult{Port: port, Value: v})
		return
	}
	n.state.Status, n.state.Redispatch, n.state.RetryAt = execution.NodeRunning, true, nil
	n.due = true
}

// simulatedApproval records a simulated approval's outcome, which its
// fixture gave (the local attempt's port), and routes it.
func (i *interpreter) simulatedApproval(n *node, res execution.NodeResult) {
	switch res.Port {
	case graph.PortApproved, graph.PortRejected:
		decision := execution.DecisionReject
		if res.Port == graph.PortApproved {
			decision = execution.DecisionApprove
		}
		n.decision = &pendingDecision{request: n.state.Approval.Request, decision: decision,
			actor: execution.Actor{Kind: execution.ActorSimulation}}
		i.approvalDecided(n)
		i.events.flushNow = false // no update waits on it
	case graph.PortTimedOut:
		i.approvalTimedOut(n)
	default:
		i.attemptFailed(n, errUnknownPort(n, res.Port))
	}
}

// cancelApproval ends a wait because the run is ending (finish).
func (i *interpreter) cancelApproval(n *node) {
	n.endWait()
	n.decision = nil
	n.state.Status, n.state.Reason = execution.NodeCancelled, execution.SkipCancelled
	if st := n.state.Approval; st != nil {
		st.Status = execution.ApprovalCancelled
	}
	i.record(execution.EventNodeCancelAcknowledged, n, execution.EventData{Reason: execution.ReasonApprovalWait})
}

// decisionInFlight reports whether an accepted update is still being
// verified: continue-as-new waits for it, so no accepted decision is lost.
func (i *interpreter) decisionInFlight() bool {
	for _, n := range i.nodes {
		if n.deciding {
			return true
		}
	}
	return false
}

// registerApprovals installs the UpdateApprove handler and its validator.
func (i *interpreter) registerApprovals() error {
	return workflow.SetUpdateHandlerWithOptions(i.root, execution.UpdateApprove, i.decide, workflow.UpdateHandlerOptions{
		Validator:        i.validateDecision,
		UnfinishedPolicy: workflow.HandlerUnfinishedPolicyAbandon,
		Description:      `decide a waiting approval: {"nodeId", "decision": "approve"|"reject", "comment"?}`,
	})
}

func (i *interpreter) nodeByID(id string) *node {
	for _, n := range i.nodes {
		if n.plan.ID == id {
			return n
		}
	}
	return nil
}

func refusal(typ, format string, args ...any) error {
	return temporal.NewApplicationError(fmt.Sprintf(format, args...), typ)
}

// validateDecision refuses an update that cannot decide anything. It runs
// read-only and only when the update arrives (never on replay), so a
// refused update leaves no trace in the history. Before setup has loaded
// the plan (an update arriving with an execution's first task) it judges
// by the node states the execution was carried with: nothing else can be
// waiting yet.
func (i *interpreter) validateDecision(_ workflow.Context, u execution.ApprovalUpdate) error {
	switch {
	case u.Decision != execution.DecisionApprove && u.Decision != execution.DecisionReject:
		return refusal(execution.ErrInvalidDecision, "decision must be %q or %q", execution.DecisionApprove, execution.DecisionReject)
	case utf8.RuneCountInString(u.Comment) > execution.MaxApprovalCommentChars:
		return refusal(execution.ErrInvalidDecision, "a comment has at most %d characters", execution.MaxApprovalCommentChars)
	case !utf8.ValidString(u.Comment):
		return refusal(execution.ErrInvalidDecision, "a comment must be valid UTF-8")
	}
	if i.ready {
		return i.checkDecision(u)
	}
	if c := i.p.Carry; c != nil {
		for _, s := range c.Nodes {
			if s.ID == u.NodeID {
				return i.judge(u, s, false)
			}
		}
	}
	return refusal(execution.ErrApprovalNotWaiting, "node %s is not waiting for a decision", u.NodeID)
}

// checkDecision judges an update against the node's current state.
func (i *interpreter) checkDecision(u execution.ApprovalUpdate) error {
	n := i.nodeByID(u.NodeID)
	if n == nil {
		return refusal(execution.ErrApprovalNotWaiting, "the run has no node %q", u.NodeID)
	}
	return i.judge(u, n.state, n.deciding || n.decision != nil)
}

func (i *interpreter) judge(u execution.ApprovalUpdate, s execution.NodeState, deciding bool) error {
	st := s.Approval
	waiting := s.Status == execution.NodeAwaitingApproval
	open := i.version >= 3 && i.outcome == outcomeNone && i.root.Err() == nil
	switch {
	case st == nil:
		return refusal(execution.ErrApprovalNotWaiting, "node %s is not waiting for a decision", u.NodeID)
	case u.Request != 0 && u.Request != st.Request:
		return refusal(execution.ErrApprovalNotWaiting, "node %s is not waiting for request %d (its latest is %d)", u.NodeID, u.Request, st.Request)
	case waiting && deciding:
		return refusal(execution.ErrApprovalAlreadyDecided, "request %d of node %s is being decided", st.Request, u.NodeID)
	case waiting && open:
		return nil
	case st.Status == execution.ApprovalApproved || st.Status == execution.ApprovalRejected:
		return refusal(execution.ErrApprovalAlreadyDecided, "request %d of node %s was already %s", st.Request, u.NodeID, st.Status)
	}
	return refusal(execution.ErrApprovalNotWaiting, "node %s is not waiting for a decision (request %d is %s)", u.NodeID, st.Request, st.Status)
}

// decide is the UpdateApprove handler (see the file comment).
func (i *interpreter) decide(ctx workflow.Context, u execution.ApprovalUpdate) (execution.ApprovalResult, error) {
	// The handler's work outlives a cancellation of the run: it is
	// bounded, and its outcome says the wait ended.
	work, _ := workflow.NewDisconnectedContext(ctx)
	if !i.ready {
		// Accepted on the carried state: judge again once it is restored
		// (another update may have been accepted on it meanwhile).
		if err := workflow.Await(work, func() bool { return i.ready }); err != nil {
			return execution.ApprovalResult{}, err
		}
		if err := i.checkDecision(u); err != nil {
			return execution.ApprovalResult{}, err
		}
	}
	n := i.nodeByID(u.NodeID)
	req := n.state.Approval.Request
	n.deciding = true
	d := i.verify(work, u, n, req)
	n.deciding = false
	if !awaitingApproval(n) || n.state.Approval.Request != req || n.decide == nil {
		return execution.ApprovalResult{}, refusal(execution.ErrApprovalNotWaiting,
			"node %s stopped waiting before the decision was recorded", u.NodeID)
	}
	n.decision = d
	n.decide.Set(nil, nil)
	if err := workflow.Await(work, func() bool { return d.ordinal > 0 && i.events.durable >= d.ordinal }); err != nil {
		return execution.ApprovalResult{}, err
	}
	return d.result, nil
}

// verify decides who made the decision: the user weft's API stored it
// for, or an operator with the update's client identity.
func (i *interpreter) verify(ctx workflow.Context, u execution.ApprovalUpdate, n *node, req int) *pendingDecision {
	d := &pendingDecision{request: req, decision: u.Decision, comment: u.Comment}
	if u.DecisionID != "" {
		lctx := workflow.WithLocalActivityOptions(ctx, infraActivityOptions("load decision"))
		var sd execution.StoredDecision
		err := workflow.ExecuteLocalActivity(lctx, execution.ActivityLoadDecision,
			execution.LoadDecisionInput{TenantID: i.p.TenantID, RunID: i.p.RunID, DecisionID: u.DecisionID}).Get(lctx, &sd)
		if err == nil && sd.Found && sd.NodeID == n.plan.ID && sd.Request == req && sd.Decision == u.Decision {
			d.actor, d.comment = sd.Actor, sd.Comment
			return d
		}
	}
	// Not a decision weft authorized, whatever actor it claims.
	info := workflow.GetInfo(ctx)
	d.updateID = workflow.GetCurrentUpdateInfo(ctx).ID
	d.actor = execution.Actor{Kind: execution.ActorOperator}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: identityTimeout,
		StartToCloseTimeout:    10 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 3},
		Summary:                "identity of update " + d.updateID,
	})
	var identity string
	err := workflow.ExecuteActivity(actx, execution.ActivityUpdateIdentity, execution.UpdateIdentityInput{
		WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID, UpdateID: d.updateID,
	}).Get(actx, &identity)
	if err == nil {
		d.actor.Identity = identity
	}
	return d
}

// awaitHandlers lets update handlers finish (their decision flushed)
// before the execution ends or continues as new.
func (i *interpreter) awaitHandlers() {
	if i.version < 3 {
		return
	}
	_ = workflow.Await(i.work, func() bool { return workflow.AllHandlersFinished(i.work) })
}
