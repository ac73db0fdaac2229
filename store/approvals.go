package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
)

// Approval is one approval request of a run, as projected from its events
// (migration 00016: node.approval.requested, .decided, .timed_out and the
// end of the wait).
type Approval struct {
	TenantID string
	RunID    string
	NodeID   string
	// Request numbers the node's requests from 1.
	Request int
	// Status is pending, approved, rejected, timed_out or cancelled.
	Status string
	// Attempt is the node attempt that asked (tool approvals).
	Attempt     int
	TimeoutMs   int64
	Call        *execution.ApprovalCall
	RequestedAt time.Time
	DeadlineAt  *time.Time
	DecidedAt   *time.Time
	// Decision (approve, reject), Actor and Comment of a decided request.
	Decision string
	Actor    *execution.Actor
	Comment  string
	// WorkflowKey is the run's workflow.
	WorkflowKey string
}

// ApprovalCursor is a keyset position in the approvals list, ordered by
// (RequestedAt, RunID, NodeID, Request) descending.
type ApprovalCursor struct {
	RequestedAt time.Time
	RunID       string
	NodeID      string
	Request     int
}

// ApprovalFilter narrows ListApprovals.
type ApprovalFilter struct {
	// Status keeps one status ("" keeps all).
	Status string
	// RunID keeps one run's requests ("" keeps all).
	RunID  string
	Limit  int
	Before *ApprovalCursor
}

// MaxApprovalPageSize bounds a ListApprovals page.
const MaxApprovalPageSize = 500

const approvalColumns = `a.tenant_id, a.run_id, a.node_id, a.request, a.status, COALESCE(a.attempt, 0), a.timeout_ms, a.call,
	a.requested_at, a.deadline_at, a.decided_at, COALESCE(a.decision, ''), a.actor, COALESCE(a.comment, ''), r.workflow_key`

// ListApprovals lists tenant's approval requests, newest first.
func (s *Store) ListApprovals(ctx context.Context, tenantID string, f ApprovalFilter) ([]Approval, error) {
	limit := f.Limit
	if limit <= 0 || limit > MaxApprovalPageSize {
		limit = MaxApprovalPageSize
	}
	var at *time.Time
	var runID, nodeID *string
	var request *int
	if b := f.Before; b != nil {
		at, runID, nodeID, request = &b.RequestedAt, &b.RunID, &b.NodeID, &b.Request
	}
	rows, err := s.Pool.Query(ctx, `SELECT `+approvalColumns+`
		FROM approvals a JOIN runs r ON r.run_id = a.run_id
		WHERE a.tenant_id = $1 AND ($2 = '' OR a.status = $2) AND ($3 = '' OR a.run_id = $3)
		  AND ($4::timestamptz IS NULL OR (a.requested_at, a.run_id, a.node_id, a.request) < ($4, $5::text, $6::text, $7::integer))
		ORDER BY a.requested_at DESC, a.run_id DESC, a.node_id DESC, a.request DESC
		LIMIT $8`, tenantID, f.Status, f.RunID, at, runID, nodeID, request, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list approvals: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanApproval)
	if err != nil {
		return nil, fmt.Errorf("store: list approvals: %w", err)
	}
	return out, nil
}

// LatestApproval returns the latest approval request of a run's node,
// failure.ErrNotFound when it never asked (or the run is another tenant's).
func (s *Store) LatestApproval(ctx context.Context, tenantID, runID, nodeID string) (Approval, error) {
	rows, err := s.Pool.Query(ctx, `SELECT `+approvalColumns+`
		FROM approvals a JOIN runs r ON r.run_id = a.run_id
		WHERE a.tenant_id = $1 AND a.run_id = $2 AND a.node_id = $3
		ORDER BY a.request DESC LIMIT 1`, tenantID, runID, nodeID)
	if err != nil {
		return Approval{}, fmt.Errorf("store: latest approval: %w", err)
	}
	a, err := pgx.CollectExactlyOneRow(rows, scanApproval)
	if errors.Is(err, pgx.ErrNoRows) {
		return Approval{}, failure.ErrNotFound
	}
	if err != nil {
		return Approval{}, fmt.Errorf("store: latest approval: %w", err)
	}
	return a, nil
}

func scanApproval(r pgx.CollectableRow) (Approval, error) {
	var a Approval
	var call, actor []byte
	if err := r.Scan(&a.TenantID, &a.RunID, &a.NodeID, &a.Request, &a.Status, &a.Attempt, &a.TimeoutMs, &call,
		&a.RequestedAt, &a.DeadlineAt, &a.DecidedAt, &a.Decision, &actor, &a.Comment, &a.WorkflowKey); err != nil {
		return a, err
	}
	if len(call) > 0 && string(call) != "null" {
		a.Call = &execution.ApprovalCall{}
		if err := json.Unmarshal(call, a.Call); err != nil {
			return a, fmt.Errorf("approval %s/%s/%d call: %w", a.RunID, a.NodeID, a.Request, err)
		}
	}
	if len(actor) > 0 && string(actor) != "null" {
		a.Actor = &execution.Actor{}
		if err := json.Unmarshal(actor, a.Actor); err != nil {
			return a, fmt.Errorf("approval %s/%s/%d actor: %w", a.RunID, a.NodeID, a.Request, err)
		}
	}
	return a, nil
}

// ApprovalDecision is a decision weft's API made for an authorized caller,
// stored before the approve update carrying its id is sent.
type ApprovalDecision struct {
	DecisionID string
	TenantID   string
	RunID      string
	NodeID     string
	Request    int
	Decision   string
	Actor      execution.Actor
	Comment    string
	CreatedAt  time.Time
}

// PutApprovalDecision stores d; its id must be new. A run of another
// tenant is failure.ErrNotFound.
func (s *Store) PutApprovalDecision(ctx context.Context, d ApprovalDecision) error {
	actor, err := json.Marshal(d.Actor)
	if err != nil {
		return fmt.Errorf("store: approval decision actor: %w", err)
	}
	tag, err := s.Pool.Exec(ctx, `INSERT INTO approval_decisions (decision_id, tenant_id, run_id, node_id, request, decision, actor, comment)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8 FROM runs WHERE run_id = $3 AND tenant_id = $2`,
		d.DecisionID, d.TenantID, d.RunID, d.NodeID, d.Request, d.Decision, actor, d.Comment)
	if err != nil {
		return fmt.Errorf("store: put approval decision: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return failure.ErrNotFound
	}
	return nil
}

// GetApprovalDecision reads a stored decision back by id, within its run.
func (s *Store) GetApprovalDecision(ctx context.Context, tenantID, runID, decisionID string) (ApprovalDecision, error) {
	d := ApprovalDecision{DecisionID: decisionID}
	var actor []byte
	err := s.Pool.QueryRow(ctx, `SELECT tenant_id, run_id, node_id, request, decision, actor, comment, created_at
		FROM approval_decisions WHERE decision_id = $1 AND tenant_id = $2 AND run_id = $3`, decisionID, tenantID, runID).
		Scan(&d.TenantID, &d.RunID, &d.NodeID, &d.Request, &d.Decision, &actor, &d.Comment, &d.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return ApprovalDecision{}, failure.ErrNotFound
	}
	if err != nil {
		return ApprovalDecision{}, fmt.Errorf("store: get approval decision: %w", err)
	}
	if err := json.Unmarshal(actor, &d.Actor); err != nil {
		return ApprovalDecision{}, fmt.Errorf("store: approval decision %s actor: %w", decisionID, err)
	}
	return d, nil
}

// DeleteApprovalDecision removes a decision the run refused, so the id
// proves nothing later.
func (s *Store) DeleteApprovalDecision(ctx context.Context, tenantID, decisionID string) error {
	if _, err := s.Pool.Exec(ctx, `DELETE FROM approval_decisions WHERE decision_id = $1 AND tenant_id = $2`, decisionID, tenantID); err != nil {
		return fmt.Errorf("store: delete approval decision: %w", err)
	}
	return nil
}
