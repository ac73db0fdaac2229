package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
)

// Approval list page sizes.
const (
	defaultApprovalsLimit = 50
	maxApprovalsLimit     = 200
	// maxDecisionBody bounds POST /v1/runs/{id}/approvals/{nodeId}.
	maxDecisionBody = 16 << 10
)

// registerApprovalRoutes adds human approval (issue 18): deciding a
// waiting approval and listing the tenant's approvals.
func (s *Server) registerApprovalRoutes(g *echo.Group) {
	g.POST("/runs/:id/approvals/:nodeId", s.decideApproval, requireScope(auth.ScopeRunsApprove))
	g.GET("/approvals", s.listApprovals, requireScope(auth.ScopeRunsRead))
}

// decisionBody is the body of POST /v1/runs/{id}/approvals/{nodeId}.
type decisionBody struct {
	Decision string `json:"decision"`
	Comment  string `json:"comment"`
}

// approvalBody is one approval request as the API shows it.
type approvalBody struct {
	RunID       string `json:"runId"`
	WorkflowKey string `json:"workflowKey,omitempty"`
	NodeID      string `json:"nodeId"`
	Request     int    `json:"request"`
	// Status is pending, approved, rejected, timed_out or cancelled.
	Status string `json:"status"`
	// Kind is "node" (an approval node) or "tool" (an agent's call of a
	// tool whose toolset requires approval; Call says which).
	Kind        string                  `json:"kind"`
	Call        *execution.ApprovalCall `json:"call,omitempty"`
	TimeoutMs   int64                   `json:"timeoutMs"`
	RequestedAt time.Time               `json:"requestedAt"`
	DeadlineAt  *time.Time              `json:"deadlineAt,omitempty"`
	DecidedAt   *time.Time              `json:"decidedAt,omitempty"`
	Decision    string                  `json:"decision,omitempty"`
	Actor       *execution.Actor        `json:"actor,omitempty"`
	Comment     string                  `json:"comment,omitempty"`
}

func approvalKind(call *execution.ApprovalCall) string {
	if call != nil {
		return "tool"
	}
	return "node"
}

func approvalJSON(a store.Approval) approvalBody {
	return approvalBody{RunID: a.RunID, WorkflowKey: a.WorkflowKey, NodeID: a.NodeID, Request: a.Request, Status: a.Status,
		Kind: approvalKind(a.Call), Call: a.Call, TimeoutMs: a.TimeoutMs, RequestedAt: a.RequestedAt, DeadlineAt: a.DeadlineAt,
		DecidedAt: a.DecidedAt, Decision: a.Decision, Actor: a.Actor, Comment: a.Comment}
}

// decideApproval approves or rejects what node {nodeId} of run {id} waits
// for, as the caller (scope runs.approve; another tenant's run is 404).
// 200 with the decided request; 409 APPROVAL_NOT_WAITING or
// APPROVAL_ALREADY_DECIDED; 503 APPROVAL_NOT_DELIVERED when no worker took
// it in time.
func (s *Server) decideApproval(c echo.Context) error {
	if s.deps.Starter == nil {
		return errNoStarter
	}
	var body decisionBody
	if err := decodeBody(c, maxDecisionBody, &body); err != nil {
		return err
	}
	p := principal(c)
	runID, nodeID := c.Param("id"), c.Param("nodeId")
	res, err := s.deps.Starter.Decide(c.Request().Context(), p.Tenant, runID, nodeID, starter.Decision{
		Decision: body.Decision, Comment: body.Comment,
		Actor: execution.Actor{Kind: execution.ActorUser, Sub: p.Sub, Name: p.Name, Email: p.Email},
	})
	if err != nil {
		return err
	}
	st := res.ApprovalState
	out := approvalBody{RunID: runID, NodeID: res.NodeID, Request: st.Request, Status: st.Status, Kind: approvalKind(st.Call),
		Call: st.Call, TimeoutMs: st.TimeoutMs, RequestedAt: st.RequestedAt, DeadlineAt: st.DeadlineAt, DecidedAt: st.DecidedAt,
		Decision: body.Decision, Actor: st.Actor, Comment: st.Comment}
	if r, err := s.deps.Store.GetRun(c.Request().Context(), p.Tenant, runID); err == nil {
		out.WorkflowKey = r.WorkflowKey
	}
	return c.JSON(http.StatusOK, out)
}

// approvalsCursor is the position an approvals page ends at.
type approvalsCursor struct {
	RequestedAt time.Time `json:"t"`
	RunID       string    `json:"r"`
	NodeID      string    `json:"n"`
	Request     int       `json:"q"`
}

// listApprovals lists the tenant's approval requests, newest first,
// filtered by status (pending: what waits for a decision now) and runId.
func (s *Server) listApprovals(c echo.Context) error {
	p := principal(c)
	limit, err := pageLimit(c, defaultApprovalsLimit, maxApprovalsLimit)
	if err != nil {
		return err
	}
	f := store.ApprovalFilter{Status: c.QueryParam("status"), RunID: c.QueryParam("runId"), Limit: limit + 1}
	switch f.Status {
	case "", execution.ApprovalPending, execution.ApprovalApproved, execution.ApprovalRejected, execution.ApprovalTimedOut,
		execution.ApprovalCancelled:
	default:
		return failure.New(failure.CodeInvalidRequest, "status must be one of pending, approved, rejected, timed_out, cancelled").
			WithDetails(map[string]any{"field": "status"})
	}
	scope := cursorScope("approvals", p.Tenant, f.Status, f.RunID)
	ac, err := openJSONCursor(s, scope, c.QueryParam("cursor"), func(approvalsCursor) bool { return true })
	if err != nil {
		return err
	}
	if ac != nil {
		f.Before = &store.ApprovalCursor{RequestedAt: ac.RequestedAt, RunID: ac.RunID, NodeID: ac.NodeID, Request: ac.Request}
	}
	rows, err := s.deps.Store.ListApprovals(c.Request().Context(), p.Tenant, f)
	if err != nil {
		return err
	}
	rows, next := trimPage(s, scope, rows, limit, func(a store.Approval) approvalsCursor {
		return approvalsCursor{RequestedAt: a.RequestedAt, RunID: a.RunID, NodeID: a.NodeID, Request: a.Request}
	})
	items := make([]approvalBody, 0, len(rows))
	for _, a := range rows {
		items = append(items, approvalJSON(a))
	}
	return list(c, "approvals", items, next)
}
