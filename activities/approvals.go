package activities

import (
	"context"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/fixtures"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
)

// decisionSource reads back the decisions weft's API stored (store.Store).
type decisionSource interface {
	GetApprovalDecision(ctx context.Context, tenantID, runID, decisionID string) (store.ApprovalDecision, error)
}

var _ decisionSource = (*store.Store)(nil)

// ApprovalActivities serve the interpreter's approval decisions: reading
// back a decision the API stored (LoadDecision) and the Temporal client
// identity of an operator's update (UpdateIdentity).
type ApprovalActivities struct {
	decisions decisionSource
}

// LoadDecision (execution.ActivityLoadDecision, local) returns the decision
// weft's API stored under in.DecisionID for the run, Found false when there
// is none (the update then counts as an operator's).
func (a *ApprovalActivities) LoadDecision(ctx context.Context, in execution.LoadDecisionInput) (execution.StoredDecision, error) {
	if a.decisions == nil || in.DecisionID == "" {
		return execution.StoredDecision{}, nil
	}
	d, err := a.decisions.GetApprovalDecision(ctx, in.TenantID, in.RunID, in.DecisionID)
	switch {
	case errors.Is(err, failure.ErrNotFound):
		return execution.StoredDecision{}, nil
	case err != nil:
		return execution.StoredDecision{}, err // retried: the decision waits for the database
	}
	return execution.StoredDecision{Found: true, NodeID: d.NodeID, Request: d.Request, Decision: d.Decision,
		Actor: d.Actor, Comment: d.Comment}, nil
}

// UpdateIdentity (execution.ActivityUpdateIdentity) returns the Temporal
// client identity an update was sent with, as the run's history recorded
// it when the update was accepted (the workflow itself cannot see it). It
// reads the history backwards from its end, where the acceptance is.
func (a *ApprovalActivities) UpdateIdentity(ctx context.Context, in execution.UpdateIdentityInput) (string, error) {
	info := activity.GetInfo(ctx)
	svc := activity.GetClient(ctx).WorkflowService()
	req := &workflowservice.GetWorkflowExecutionHistoryReverseRequest{
		Namespace: info.Namespace,
		Execution: &commonpb.WorkflowExecution{WorkflowId: in.WorkflowID, RunId: in.RunID},
	}
	for {
		res, err := svc.GetWorkflowExecutionHistoryReverse(ctx, req)
		if err != nil {
			return "", fmt.Errorf("read the history of %s: %w", in.WorkflowID, err)
		}
		for _, e := range res.GetHistory().GetEvents() {
			if e.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED {
				continue
			}
			acc := e.GetWorkflowExecutionUpdateAcceptedEventAttributes()
			if meta := acc.GetAcceptedRequest().GetMeta(); meta.GetUpdateId() == in.UpdateID || acc.GetProtocolInstanceId() == in.UpdateID {
				return meta.GetIdentity(), nil
			}
		}
		if len(res.GetNextPageToken()) == 0 {
			return "", nil // not found: recorded without an identity
		}
		req.NextPageToken = res.GetNextPageToken()
	}
}

// approval (execution.NodeActivity of approval nodes, local) decides a
// simulated approval from the run's fixture for the node (SPEC §4: nothing
// waits): the fixture's decision after its durationMs of virtual time, or
// a timeout after the node's timeoutMs when it says "timeout" or decides no
// sooner than that; without a fixture the approval is approved at once.
// The port carries no value: the interpreter routes the node's input.
func (a *NodeActivities) approval(ctx context.Context, in execution.NodeInput) (execution.NodeResult, error) {
	if in.Mode != execution.ModeSimulation {
		return execution.NodeResult{}, permanent(execution.ErrNodeNotFound, nil,
			"node %q: a live approval waits in the interpreter and runs no activity", in.NodeID)
	}
	_, n, err := a.revisions.node(ctx, in)
	if err != nil {
		return execution.NodeResult{}, err
	}
	if n.Kind != graph.KindApproval {
		return execution.NodeResult{}, permanent(execution.ErrNodeNotFound, nil, "node %q is a %s, not an approval", n.ID, n.Kind)
	}
	set, err := a.fixtures.get(ctx, in.TenantID, in.RunID)
	if err != nil {
		return execution.NodeResult{}, err
	}
	fx, _ := set.For(n.ID, in.Attempt)
	timeout := int64(n.TimeoutMs)
	switch {
	case fx.Decision == fixtures.DecisionTimeout, fx.DurationMs >= timeout:
		return execution.NodeResult{Port: graph.PortTimedOut, DurationMs: timeout}, nil
	case fx.Decision == fixtures.DecisionReject:
		return execution.NodeResult{Port: graph.PortRejected, DurationMs: fx.DurationMs}, nil
	}
	return execution.NodeResult{Port: graph.PortApproved, DurationMs: fx.DurationMs}, nil
}
