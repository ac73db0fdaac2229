package starter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/store"
)

// Codes of a decision that cannot be made (409 and 503 on the API).
const (
	// CodeApprovalNotWaiting: the node is not waiting for a decision (it
	// never asked, its wait timed out or was cancelled, or the run ended).
	CodeApprovalNotWaiting = execution.ErrApprovalNotWaiting
	// CodeApprovalAlreadyDecided: the waiting request was decided already
	// (details: the decision, who made it and when).
	CodeApprovalAlreadyDecided = execution.ErrApprovalAlreadyDecided
	// CodeApprovalNotDelivered: no worker took the decision within
	// DecisionTimeout. It may still be applied when one does: read the
	// approval before deciding again.
	CodeApprovalNotDelivered = "APPROVAL_NOT_DELIVERED"
)

// DecisionTimeout bounds how long Decide waits for the run's worker to
// take a decision (validate, record and flush it).
const DecisionTimeout = 10 * time.Second

// Decision is a person's decision on a waiting approval.
type Decision struct {
	// Decision is execution.DecisionApprove or DecisionReject.
	Decision string
	Comment  string
	// Actor is the authorized caller, from their token.
	Actor execution.Actor
}

// Decide decides the approval node nodeID of run runID is waiting for, on
// behalf of an authorized caller (the API checked the scope; the tenant is
// checked here: another tenant's run is NOT_FOUND). The decision is stored
// first and the approve update names it, so the interpreter records it
// with the caller as actor; the update is bounded by DecisionTimeout. A
// node not waiting is 409 APPROVAL_NOT_WAITING, a request decided already
// 409 APPROVAL_ALREADY_DECIDED, a worker that does not answer in time 503
// APPROVAL_NOT_DELIVERED. Refusals leave nothing behind.
func (s *Starter) Decide(ctx context.Context, tenantID, runID, nodeID string, d Decision) (execution.ApprovalResult, error) {
	if d.Decision != execution.DecisionApprove && d.Decision != execution.DecisionReject {
		return execution.ApprovalResult{}, failure.New(failure.CodeInvalidRequest, "decision must be %q or %q",
			execution.DecisionApprove, execution.DecisionReject).WithDetails(map[string]any{"field": "decision"})
	}
	if n := utf8.RuneCountInString(d.Comment); n > execution.MaxApprovalCommentChars || !utf8.ValidString(d.Comment) {
		return execution.ApprovalResult{}, failure.New(failure.CodeInvalidRequest, "comment must be valid UTF-8 of at most %d characters",
			execution.MaxApprovalCommentChars).WithDetails(map[string]any{"field": "comment"})
	}
	run, err := s.store.GetRun(ctx, tenantID, runID)
	if errors.Is(err, failure.ErrNotFound) {
		return execution.ApprovalResult{}, failure.New(failure.CodeNotFound, "run %q not found", runID)
	}
	if err != nil {
		return execution.ApprovalResult{}, fmt.Errorf("starter: get run: %w", err)
	}
	compiled, err := s.store.GetCompiled(ctx, tenantID, run.Checksum)
	if err != nil {
		return execution.ApprovalResult{}, fmt.Errorf("starter: get revision: %w", err)
	}
	if _, ok := compiled.NodeBody(nodeID); !ok {
		return execution.ApprovalResult{}, failure.New(failure.CodeNotFound, "run %s has no node %q", runID, nodeID)
	}
	latest, err := s.store.LatestApproval(ctx, tenantID, runID, nodeID)
	switch {
	case errors.Is(err, failure.ErrNotFound):
		return execution.ApprovalResult{}, notWaiting(runID, nodeID, "it has not asked for a decision")
	case err != nil:
		return execution.ApprovalResult{}, fmt.Errorf("starter: latest approval: %w", err)
	case latest.Status != execution.ApprovalPending:
		return execution.ApprovalResult{}, settled(latest)
	}

	id := uuid.NewString()
	if err := s.store.PutApprovalDecision(ctx, store.ApprovalDecision{DecisionID: id, TenantID: tenantID, RunID: runID,
		NodeID: nodeID, Request: latest.Request, Decision: d.Decision, Actor: d.Actor, Comment: d.Comment}); err != nil {
		return execution.ApprovalResult{}, fmt.Errorf("starter: store decision: %w", err)
	}
	actor := d.Actor
	u := execution.ApprovalUpdate{NodeID: nodeID, Decision: d.Decision, Comment: d.Comment, Actor: &actor,
		Request: latest.Request, DecisionID: id}
	res, err := s.sendDecision(ctx, run.WorkflowID, id, u)
	if err == nil {
		s.log.Info("approval decided", "run", runID, "node", nodeID, "request", latest.Request, "decision", d.Decision,
			"by", d.Actor.Sub)
		return res, nil
	}
	var refused *temporal.ApplicationError
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &refused):
		_ = s.store.DeleteApprovalDecision(context.WithoutCancel(ctx), tenantID, id)
		if refused.Type() == execution.ErrApprovalAlreadyDecided {
			if now, lerr := s.store.LatestApproval(ctx, tenantID, runID, nodeID); lerr == nil && now.Status != execution.ApprovalPending {
				return execution.ApprovalResult{}, settled(now)
			}
			return execution.ApprovalResult{}, failure.New(CodeApprovalAlreadyDecided, "%s", refused.Message())
		}
		return execution.ApprovalResult{}, failure.New(CodeApprovalNotWaiting, "%s", refused.Message())
	case errors.As(err, &nf) || isClosed(err):
		_ = s.store.DeleteApprovalDecision(context.WithoutCancel(ctx), tenantID, id)
		return execution.ApprovalResult{}, notWaiting(runID, nodeID, "the run has ended")
	case timedOut(ctx, err):
		s.log.Warn("approval decision not delivered", "run", runID, "node", nodeID, "err", err)
		return execution.ApprovalResult{}, failure.New(CodeApprovalNotDelivered,
			"no worker took the decision within %s; it may still be applied when one does: check the approval before deciding again",
			DecisionTimeout).WithDetails(map[string]any{"decisionId": id})
	}
	return execution.ApprovalResult{}, failure.Wrap(err, failure.CodeUnavailable, "the decision for run %s could not be sent", runID)
}

// sendDecision sends the approve update and waits, bounded, for its outcome.
func (s *Starter) sendDecision(ctx context.Context, workflowID, updateID string, u execution.ApprovalUpdate) (execution.ApprovalResult, error) {
	cctx, cancel := context.WithTimeout(ctx, DecisionTimeout)
	defer cancel()
	h, err := s.temporal.UpdateWorkflow(cctx, client.UpdateWorkflowOptions{
		WorkflowID: workflowID, UpdateID: updateID, UpdateName: execution.UpdateApprove,
		Args: []any{u}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return execution.ApprovalResult{}, err
	}
	var res execution.ApprovalResult
	err = h.Get(cctx, &res)
	return res, err
}

// timedOut: the bounded wait for a worker ended (not the caller's own
// cancellation, which is reported as such).
func timedOut(ctx context.Context, err error) bool {
	var svc *client.WorkflowUpdateServiceTimeoutOrCanceledError
	var dl *serviceerror.DeadlineExceeded
	return ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &svc) || errors.As(err, &dl))
}

// isClosed: the update reached a workflow that had completed meanwhile.
func isClosed(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "workflow execution already completed") || strings.Contains(msg, "workflow completed before the update")
}

func notWaiting(runID, nodeID, why string) error {
	return failure.New(CodeApprovalNotWaiting, "node %s of run %s is not waiting for a decision: %s", nodeID, runID, why)
}

// settled is the refusal of a decision on a request that has an outcome.
func settled(a store.Approval) error {
	details := map[string]any{"request": a.Request, "status": a.Status}
	if a.DecidedAt != nil {
		details["decidedAt"] = a.DecidedAt
	}
	if a.Status != execution.ApprovalApproved && a.Status != execution.ApprovalRejected {
		return failure.New(CodeApprovalNotWaiting, "node %s of run %s is not waiting for a decision: request %d %s",
			a.NodeID, a.RunID, a.Request, strings.ReplaceAll(a.Status, "_", " ")).WithDetails(details)
	}
	details["decision"] = a.Decision
	if a.Actor != nil {
		details["actor"] = a.Actor
	}
	return failure.New(CodeApprovalAlreadyDecided, "request %d of node %s was already %s", a.Request, a.NodeID, a.Status).
		WithDetails(details)
}
