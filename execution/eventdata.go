package execution

import (
	"encoding/json"
	"time"

	"github.com/weftworks/weft/graph"
)

// Node skip reasons (node.skipped data.reason and NodeState.Reason).
const (
	// SkipDeadInput: an incoming edge is dead (a merge: all of them are).
	SkipDeadInput = "DEAD_INPUT"
	// SkipSettled: the run settled on an output before this node could run.
	SkipSettled = "SETTLED"
	// SkipCancelled: the run was cancelled or failed before this node could run.
	SkipCancelled = "CANCELLED"
)

// Reasons carried by other interpreter events in EventData.Reason.
const (
	// ReasonRetryWait (node.cancel.acknowledged): the node was between
	// attempts, so dropping its backoff timer was the whole cancellation.
	ReasonRetryWait = "RETRY_WAIT"
	// ReasonRedispatchWait (node.cancel.acknowledged): the node's attempt
	// was lost to an infrastructure fault and waited to be re-dispatched.
	ReasonRedispatchWait = "REDISPATCH_WAIT"
	// ReasonApprovalWait (node.cancel.acknowledged): the node waited for
	// an approval decision; ending the wait was the whole cancellation.
	ReasonApprovalWait = "APPROVAL_WAIT"
	// ReasonContinueSuggested and ReasonContinueForced (run.continued): why
	// the run continued as new.
	ReasonContinueSuggested = "SUGGESTED"
	ReasonContinueForced    = "FORCED"
)

// MaxEventValueBytes bounds an inline value copied into event data; a larger
// one is left out and the event says Truncated with OutputSize (the value
// itself is still routed and, for run.succeeded, stored on the run row).
const MaxEventValueBytes = 6 * 1024

// MaxEventMessageBytes bounds an error message copied into event data.
const MaxEventMessageBytes = 1024

// EventData is the data of every event the interpreter appends. One flat
// shape for all interpreter event types: each type fills the fields listed
// next to them and leaves the rest empty (omitted from the JSON).
type EventData struct {
	// run.started.
	Mode     Mode   `json:"mode,omitempty"`
	Checksum string `json:"checksum,omitempty"`
	Revision int    `json:"revision,omitempty"`

	// node.started: the node kind.
	Kind graph.Kind `json:"kind,omitempty"`

	// node.completed, node.late.result, run.succeeded: the port that fired
	// (empty for output nodes) and the value, inline JSON or a claim-check
	// reference. A large inline value is left out: Truncated and OutputSize.
	Port       string          `json:"port,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	OutputRef  *ValueRef       `json:"outputRef,omitempty"`
	OutputSize int             `json:"outputSize,omitempty"`

	// node.skipped (DEAD_INPUT, SETTLED, CANCELLED), node.cancel.acknowledged
	// (RETRY_WAIT when the node was between attempts), run.continued
	// (SUGGESTED, FORCED).
	Reason string `json:"reason,omitempty"`

	// edge.taken, edge.dead: "node.port" of both ends.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`

	// node.attempt.failed: the attempt, its error and whether the error
	// allows another attempt. node.failed: Error and Attempts.
	// node.cancel.acknowledged: Error when the activity stopped with an
	// error other than a cancellation.
	Attempt   int         `json:"attempt,omitempty"`
	Attempts  int         `json:"attempts,omitempty"`
	Error     *EventError `json:"error,omitempty"`
	Retryable *bool       `json:"retryable,omitempty"`

	// node.retry.scheduled: the computed backoff and the next attempt number.
	DelayMs     *int64 `json:"delayMs,omitempty"`
	NextAttempt int    `json:"nextAttempt,omitempty"`

	// node.attempt.lease_lost, node.attempt.infra_retry: the fault's code,
	// how many re-dispatches the node has had with this one, and (DelayMs)
	// the wait before it; Attempt and Error say which attempt and why.
	Code       string `json:"code,omitempty"`
	Redispatch int    `json:"redispatch,omitempty"`

	// node.cancel.unacknowledged: how long the interpreter waited.
	WaitedMs int64 `json:"waitedMs,omitempty"`

	// node.approval.requested: the request number, how long it waits,
	// when it times out (live runs) and, for a tool approval, the call.
	// node.approval.decided: Request, Decision (approve or reject),
	// Actor, Comment and, for an operator's decision, the update's id.
	// node.approval.timed_out: Request and TimeoutMs.
	Request    int           `json:"request,omitempty"`
	TimeoutMs  int64         `json:"timeoutMs,omitempty"`
	DeadlineAt *time.Time    `json:"deadlineAt,omitempty"`
	Call       *ApprovalCall `json:"call,omitempty"`
	Decision   string        `json:"decision,omitempty"`
	Actor      *Actor        `json:"actor,omitempty"`
	Comment    string        `json:"comment,omitempty"`
	UpdateID   string        `json:"updateId,omitempty"`

	// run.succeeded: the output node that settled the run.
	NodeID string `json:"nodeId,omitempty"`
	// run.failed (and run.cancelled): the run's terminal error.
	RunError *RunError `json:"runError,omitempty"`

	// Truncated says a value or message was shortened to keep data small.
	Truncated bool `json:"truncated,omitempty"`

	// VirtualAt is the simulation clock when the event happened (simulation only).
	VirtualAt *time.Time `json:"virtualAt,omitempty"`
}

// EventError is a node error in event data.
type EventError struct {
	// Type is the ApplicationError type (e.g. ACTION_FAILED), or TIMEOUT,
	// CANCELLED, PANIC, ERROR for errors that are not application errors.
	Type    string `json:"type"`
	Message string `json:"message"`
}

// FailureDetails may be attached as the first detail of a node activity's
// ApplicationError. In simulation, DurationMs advances the virtual clock for
// the failed attempt, like NodeResult.DurationMs does for a successful one.
type FailureDetails struct {
	DurationMs int64 `json:"durationMs,omitempty"`
}
