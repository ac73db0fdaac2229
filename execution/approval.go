package execution

import (
	"encoding/json"
	"time"
)

// Human approval (issue 18). An approval node, or an agent's call of a tool
// whose toolset requires approval, makes its node wait in the interpreter
// (no activity, no worker slot) for a decision or its timeout. Decisions
// arrive as the Temporal Update UpdateApprove; the API sends it after its
// own authorization, an operator may send it with the temporal CLI.

// UpdateApprove is the name of the interpreter's Update that decides a
// waiting approval (args ApprovalUpdate, result ApprovalResult).
const UpdateApprove = "approve"

// Decisions an ApprovalUpdate carries.
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
)

// Statuses of one approval request (ApprovalState.Status, and the API's
// approval listing).
const (
	ApprovalPending   = "pending"
	ApprovalApproved  = "approved"
	ApprovalRejected  = "rejected"
	ApprovalTimedOut  = "timed_out"
	ApprovalCancelled = "cancelled"
)

// Actor kinds besides a run's own ("user", "service").
const (
	ActorUser    = "user"
	ActorService = "service"
	// ActorOperator decided through Temporal directly (temporal workflow
	// update execute), bypassing weft's authorization; Actor.Identity is
	// the Temporal client identity the update came with.
	ActorOperator = "operator"
	// ActorSimulation decided a simulated approval (a fixture or the default).
	ActorSimulation = "simulation"
)

// MaxApprovalCommentChars bounds a decision's comment.
const MaxApprovalCommentChars = 1000

// MaxApprovalInputBytes bounds the tool input an approval request shows;
// a larger one is left out (ApprovalCall.InputOmitted).
const MaxApprovalInputBytes = 2 << 10

// Update refusals (ApplicationError types of the validator, and of a
// decision that found its node no longer waiting).
const (
	// ErrApprovalNotWaiting: the node is not waiting for a decision (it
	// never asked, its wait timed out or was cancelled, the run ended, or
	// the update names another request than the one waiting).
	ErrApprovalNotWaiting = "APPROVAL_NOT_WAITING"
	// ErrApprovalAlreadyDecided: the request was decided already, or a
	// decision for it is being recorded.
	ErrApprovalAlreadyDecided = "APPROVAL_ALREADY_DECIDED"
	// ErrInvalidDecision: the update is malformed (a decision other than
	// approve or reject, an over-long comment, no node).
	ErrInvalidDecision = "INVALID_DECISION"
)

// ApprovalUpdate is the UpdateApprove argument.
type ApprovalUpdate struct {
	NodeID string `json:"nodeId"`
	// Decision is approve or reject.
	Decision string `json:"decision"`
	Comment  string `json:"comment,omitempty"`
	// Actor is who decides, as the sender claims. It is believed only
	// with a DecisionID naming a decision weft's API stored for this
	// request; anything else is recorded as ActorOperator.
	Actor *Actor `json:"actor,omitempty"`
	// Request is the request decided; 0 decides the one waiting.
	Request int `json:"request,omitempty"`
	// DecisionID names the decision weft's API stored before sending the
	// update (ActivityLoadDecision reads it back).
	DecisionID string `json:"decisionId,omitempty"`
}

// ApprovalCall is the tool call an agent node waits to make.
type ApprovalCall struct {
	// Ordinal numbers the node's tool calls from 1 (the transcript's).
	Ordinal int    `json:"ordinal"`
	Turn    int    `json:"turn,omitempty"`
	Tool    string `json:"tool"`
	// Input is the call's input when at most MaxApprovalInputBytes;
	// InputBytes its size either way.
	Input        json.RawMessage `json:"input,omitempty"`
	InputBytes   int             `json:"inputBytes"`
	InputOmitted bool            `json:"inputOmitted,omitempty"`
}

// ApprovalRequest is what an agent attempt returns (NodeResult.Approval)
// when it stops before a call that needs approval.
type ApprovalRequest struct {
	Call      ApprovalCall `json:"call"`
	TimeoutMs int64        `json:"timeoutMs"`
}

// ApprovalState is a node's latest approval request and its outcome
// (NodeState.Approval). It is carried across continue-as-new and passed to
// the attempts that follow a tool approval (NodeInput.Approval).
type ApprovalState struct {
	// Request numbers the node's approval requests from 1.
	Request     int       `json:"request"`
	Status      string    `json:"status"`
	TimeoutMs   int64     `json:"timeoutMs"`
	RequestedAt time.Time `json:"requestedAt"`
	// DeadlineAt is when the wait times out (live runs, workflow time): a
	// wait carried across continue-as-new re-arms its timer with the time left.
	DeadlineAt *time.Time `json:"deadlineAt,omitempty"`
	// Call is the tool call waiting (agent nodes only).
	Call      *ApprovalCall `json:"call,omitempty"`
	Actor     *Actor        `json:"actor,omitempty"`
	Comment   string        `json:"comment,omitempty"`
	DecidedAt *time.Time    `json:"decidedAt,omitempty"`
}

// Decided reports whether the request has an outcome a resumed attempt acts on.
func (s *ApprovalState) Decided() bool {
	return s != nil && (s.Status == ApprovalApproved || s.Status == ApprovalRejected || s.Status == ApprovalTimedOut)
}

// ApprovalResult is the UpdateApprove result: the decided request.
type ApprovalResult struct {
	NodeID string `json:"nodeId"`
	ApprovalState
}

// LoadDecisionInput is the input of the LoadDecision local activity.
type LoadDecisionInput struct {
	TenantID   string `json:"tenantId"`
	RunID      string `json:"runId"`
	DecisionID string `json:"decisionId"`
}

// StoredDecision is a decision weft's API stored before sending the update
// (Found false when there is none under the id).
type StoredDecision struct {
	Found    bool   `json:"found"`
	NodeID   string `json:"nodeId,omitempty"`
	Request  int    `json:"request,omitempty"`
	Decision string `json:"decision,omitempty"`
	Actor    Actor  `json:"actor"`
	Comment  string `json:"comment,omitempty"`
}

// UpdateIdentityInput is the input of the UpdateIdentity activity: the
// update whose sender's Temporal client identity is wanted.
type UpdateIdentityInput struct {
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
	UpdateID   string `json:"updateId"`
}
