// Package execution holds the plain, deterministic types shared by the
// interpreter workflow, the node activities and the starter: the workflow
// parameters, node inputs and results, values (inline or claim-checked),
// buffered events and the activity names that tie them together.
package execution

import (
	"bytes"
	"encoding/json"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/graph"
)

// Temporal names. Changing any of them breaks running workflows.
const (
	// WorkflowName is the one interpreter workflow type.
	WorkflowName = "weft.Run"
	// QueryState is the query returning node states.
	QueryState = "state"

	// Local activities.
	ActivityLoadPlan     = "weft.LoadPlan"
	ActivityAppendEvents = "weft.AppendEvents"
	ActivityRunLocalNode = "weft.RunLocalNode" // gate, validator, merge
	// Activities.
	ActivityRunNode = "weft.RunNode" // agent, agent-decision, action

	// ActivityLoadDecision (local) reads back a decision weft's API stored
	// before sending UpdateApprove (StoredDecision).
	ActivityLoadDecision = "weft.LoadDecision"
	// ActivityUpdateIdentity reads the Temporal client identity an update
	// was sent with from the run's history (an operator's decision).
	ActivityUpdateIdentity = "weft.UpdateIdentity"
)

// Node attempts run as one activity type per node kind, so the Web UI,
// `temporal workflow show` and the SDK's worker metrics tell the kinds
// apart: gates, validators and merges as local activities, actions, agents
// and agent-decisions as activities. Runs that began before this naming
// (interpreter change weft-activity-per-kind) keep using ActivityRunNode and
// ActivityRunLocalNode, which workers still register.
var nodeActivities = map[graph.Kind]string{
	graph.KindGate:          "weft.Gate",
	graph.KindValidator:     "weft.Validator",
	graph.KindMerge:         "weft.Merge",
	graph.KindAction:        "weft.Action",
	graph.KindAgent:         "weft.Agent",
	graph.KindAgentDecision: "weft.AgentDecision",
	// A live approval runs nothing; a simulated one asks its fixture in a
	// local activity of this name.
	graph.KindApproval: "weft.Approval",
}

// NodeActivity returns the activity type of kind's attempts, and false for
// a kind that does not run as an activity (input, output).
func NodeActivity(kind graph.Kind) (string, bool) {
	name, ok := nodeActivities[kind]
	return name, ok
}

// Mode is a run's execution mode.
type Mode string

// Execution modes (dry-run never creates a run).
const (
	ModeLive       Mode = "live"
	ModeSimulation Mode = "simulation"
)

// Run statuses.
const (
	// StatusThrottled: persisted, waiting for a slot under its workflow's
	// or tenant's limits (never started; the dispatcher in package starter
	// admits it, first in first out, when a slot frees).
	StatusThrottled = "throttled"
	// StatusQueued: persisted (and admitted), its start pending.
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// RunStatuses returns every run status in lifecycle order (a fresh slice).
func RunStatuses() []string {
	return []string{StatusThrottled, StatusQueued, StatusRunning, StatusSucceeded, StatusFailed, StatusCancelled}
}

// Terminal reports whether a run status is final: succeeded, failed or
// cancelled.
func Terminal(status string) bool {
	switch status {
	case StatusSucceeded, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// Search attribute names registered on the Temporal namespace.
const (
	SearchAttrTenant      = "WeftTenant"      // Keyword
	SearchAttrWorkflowKey = "WeftWorkflowKey" // Keyword
	SearchAttrMode        = "WeftMode"        // Keyword
	SearchAttrRevision    = "WeftRevision"    // Int
)

// Typed search attribute keys, for StartWorkflowOptions.TypedSearchAttributes
// (runs) and schedules' actions.
var (
	KeyTenant      = temporal.NewSearchAttributeKeyKeyword(SearchAttrTenant)
	KeyWorkflowKey = temporal.NewSearchAttributeKeyKeyword(SearchAttrWorkflowKey)
	KeyMode        = temporal.NewSearchAttributeKeyKeyword(SearchAttrMode)
	KeyRevision    = temporal.NewSearchAttributeKeyInt64(SearchAttrRevision)
)

// Actor is who a run acts for.
type Actor struct {
	// Kind is "user" or "service" for a run's actor; a decision's actor
	// may also be "operator" or "simulation" (approval.go).
	Kind string `json:"kind"`
	Sub  string `json:"sub"`
	// ConfiguredBy is the user who configured a service actor (schedules, webhooks).
	ConfiguredBy string `json:"configuredBy,omitempty"`
	Name         string `json:"name,omitempty"`
	Email        string `json:"email,omitempty"`
	// Identity is the Temporal client identity of an operator's decision.
	Identity string `json:"identity,omitempty"`
}

// RequestedBy is the user behind the actor: a user's own sub, or the user
// who configured a service actor. Revocations are looked up under it, and
// action handlers receive it (catalog.Call.RequestedBy) to record who acted.
func (a Actor) RequestedBy() string {
	if a.Kind == "service" {
		return a.ConfiguredBy
	}
	return a.Sub
}

// Origin says what started a run.
type Origin struct {
	Kind string `json:"kind"` // api, schedule, webhook, cli, replay (a replay's simulation runs)
	ID   string `json:"id,omitempty"`
}

// Value is a port value: inline JSON, or a reference to a claim-checked blob
// stored under (tenant, run, node, port, sha256) when it exceeds 32 KiB.
type Value struct {
	Inline json.RawMessage `json:"inline,omitempty"`
	Ref    *ValueRef       `json:"ref,omitempty"`
}

// ValueRef points at a stored large value.
type ValueRef struct {
	NodeID string `json:"nodeId"`
	Port   string `json:"port"`
	SHA256 string `json:"sha256"`
	Size   int    `json:"size"`
}

// RunParams is the interpreter workflow's input. It never carries secrets.
type RunParams struct {
	TenantID    string    `json:"tenantId"`
	TenantName  string    `json:"tenantName,omitempty"`
	RunID       string    `json:"runId"`
	WorkflowKey string    `json:"workflowKey"`
	Revision    int       `json:"revision"` // 0 for a simulated draft
	Checksum    string    `json:"checksum"`
	Mode        Mode      `json:"mode"`
	Input       Value     `json:"input"`
	Actor       Actor     `json:"actor"`
	Origin      Origin    `json:"origin"`
	Permissions []string  `json:"permissions"`
	EnqueuedAt  time.Time `json:"enqueuedAt"`
	// Carry is set when the run continued as new: node states and references only.
	Carry *Carry `json:"carry,omitempty"`
	// Durability bounds the re-dispatch of attempts lost to
	// infrastructure faults (durability.go); nil takes DefaultDurability.
	// Runs started before weft-infra-redispatch never read it.
	Durability *Durability `json:"durability,omitempty"`
	// LeanInputs makes interpreter version 6 send node attempts lean
	// inputs (NodeInput.Lean): the per-run constants left out, for the
	// activity to read from the run's stored record. The starter sets it
	// from its configuration (WEFT_LEAN_INPUTS); it travels here, not in
	// the interpreter's code or the worker's environment, so a replay
	// sends what the original execution sent, and a run started before it
	// was switched on keeps full inputs to its end. Only workers of the
	// release that reads lean inputs may receive them: a worker of an
	// earlier one would run the attempt with no permissions, no revision
	// and live mode.
	LeanInputs bool `json:"leanInputs,omitempty"`
	// ForceContinueAsNewAfterEvents is a test knob: when > 0 the interpreter
	// continues as new once it has recorded that many events in one
	// execution, as if Temporal had suggested it. The starter leaves it 0.
	ForceContinueAsNewAfterEvents int `json:"forceContinueAsNewAfterEvents,omitempty"`
}

// Carry is the state handed across continue-as-new.
type Carry struct {
	Nodes        []NodeState         `json:"nodes"`
	Ports        map[string]PortSlot `json:"ports"` // key "node.port"
	EventOrdinal int                 `json:"eventOrdinal"`
	VirtualMs    int64               `json:"virtualMs"`
	// Generation counts the executions before the next one (interpreter
	// version 4: run.continued's event key names its execution).
	Generation int `json:"generation,omitempty"`
}

// PortSlot is the resolution of one output port: fired with a value, or dead.
type PortSlot struct {
	Fired bool  `json:"fired"`
	Value Value `json:"value,omitempty"`
}

// Node statuses in NodeState.
const (
	NodePending = "pending"
	NodeRunning = "running"
	NodeWaiting = "waiting" // between attempts
	// NodeAwaitingApproval: waiting for a person's decision (an approval
	// node, or an agent node before a call that needs approval).
	NodeAwaitingApproval = "awaiting_approval"
	NodeSucceeded        = "succeeded"
	NodeFailed           = "failed"
	NodeSkipped          = "skipped"
	NodeCancelled        = "cancelled"
)

// NodeState is a node's projection answered by the state query.
type NodeState struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Status  string `json:"status"`
	Attempt int    `json:"attempt"`
	Port    string `json:"port,omitempty"`   // the port that fired
	Reason  string `json:"reason,omitempty"` // skip reason (DEAD_INPUT, SETTLED) or error code
	Error   string `json:"error,omitempty"`
	// RetryAt is when a waiting node's next attempt is due (live mode), or
	// when a re-dispatched attempt goes out again; it lets continue-as-new
	// re-arm the timer with the time left.
	RetryAt *time.Time `json:"retryAt,omitempty"`
	// Redispatches counts the infrastructure faults (a lost lease, a drained
	// worker, an unavailable store or provider) after which one of this
	// node's attempts was dispatched again with the same attempt number.
	Redispatches int `json:"redispatches,omitempty"`
	// InfraSince is the node's first infrastructure fault (workflow time):
	// Durability.MaxRedispatchMs counts from it.
	InfraSince *time.Time `json:"infraSince,omitempty"`
	// Redispatch says a running node's attempt is waiting to be dispatched
	// again (at RetryAt) after an infrastructure fault; Infra is that
	// fault's code (LEASE_LOST, WORKER_DRAINED, ...), kept as the node's
	// latest recovery.
	Redispatch bool   `json:"redispatch,omitempty"`
	Infra      string `json:"infra,omitempty"`
	// Approval is the node's latest approval request and its outcome.
	Approval *ApprovalState `json:"approval,omitempty"`
}

// NodeInput is what a node activity receives.
//
// WorkflowKey, Checksum, Mode, Actor, Permissions and TenantName are the
// run's constants (RunConstants): the same in every attempt of the run,
// and the run's stored record holds them. A lean input (Lean, interpreter
// version 6 for runs started with RunParams.LeanInputs) leaves them out and
// the activity reads them from that record; they are omitted when empty
// for that reason (a decoder of any release reads an absent member as it
// read the empty one: "permissions":null and an absent permissions both
// decode to nil).
type NodeInput struct {
	TenantID    string           `json:"tenantId"`
	RunID       string           `json:"runId"`
	WorkflowKey string           `json:"workflowKey,omitempty"`
	Checksum    string           `json:"checksum,omitempty"`
	Mode        Mode             `json:"mode,omitempty"`
	NodeID      string           `json:"nodeId"`
	Kind        graph.Kind       `json:"kind"`
	Attempt     int              `json:"attempt"`
	Inputs      map[string]Value `json:"inputs"`
	Actor       Actor            `json:"actor,omitzero"`
	Permissions []string         `json:"permissions,omitempty"`
	// TenantName feeds the context.tenantName template variable (the
	// tenant id stands in when empty).
	TenantName string `json:"tenantName,omitempty"`
	// Lean marks the run's constants omitted: the activity must read them
	// from the run's stored record under (TenantID, RunID) and use nothing
	// else, whatever the input holds in their place. It is an explicit
	// member because absence cannot mean it: every earlier input has the
	// constants, some of them empty (a run without permissions). A worker
	// of a release before it ignores the member and would run the attempt
	// without the constants, hence RunParams.LeanInputs.
	Lean bool `json:"lean,omitempty"`
	// RunStartedAt is the run's start (workflow time, RunParams.EnqueuedAt
	// or the first workflow task): context.today renders its UTC date, so
	// every attempt of a run renders the same day.
	RunStartedAt time.Time `json:"runStartedAt,omitzero"`
	// VirtualNow is the simulation clock when Mode is simulation.
	//
	// Both times are left out when zero (a live attempt's VirtualNow: 37
	// bytes of every input); a decoder of any release reads the zero time
	// from the absence, as it read it from "0001-01-01T00:00:00Z".
	VirtualNow time.Time `json:"virtualNow,omitzero"`
	// Redispatch counts how often this attempt was dispatched again after
	// an infrastructure fault (0 for its first dispatch). Side effects key
	// on (tenant, run, node) regardless.
	Redispatch int `json:"redispatch,omitempty"`
	// Events are interpreter events not yet known to be in the log, which
	// the activity appends, before anything with an outside effect (the
	// interpreter's buffer riding along instead of a flush of its own).
	Events *EventBatch `json:"events,omitempty"`
	// Carried is Events in the compact form of interpreter version 6
	// (CompactBatch): read both through CarriedEvents. It is a member of
	// its own so that a worker of an earlier release, which does not know
	// it, appends nothing and reports nothing appended
	// (NodeResult.EventsThrough 0): the events stay in the interpreter's
	// buffer and the next carrier or flush appends them.
	Carried *CompactBatch `json:"carried,omitempty"`
	// Suffix (interpreter version 7) is a CompactBatch holding only the
	// events no earlier carrier was given, those after ordinal
	// Suffix.After: its append is refused unless the log already holds
	// every event through After (store.ErrEventsGap). A member of its
	// own, so that a worker of an earlier release, which would append it
	// unchecked and report it appended, ignores it instead: it appends
	// nothing and reports nothing appended.
	Suffix *CompactBatch `json:"suffix,omitempty"`
	// CarryLazyUntil (interpreter version 9), when set, makes the carried
	// events (Carried or Suffix) lazy: the activity appends them only if
	// the attempt is still running at this time (the oldest of them plus
	// the run's deferMaxAge), never once it has returned, and reports the
	// append as any carrier does (NodeResult.EventsThrough,
	// EventsRefused). An attempt that ends first appends nothing and
	// confirms nothing: the events stay in the interpreter's buffer for
	// the next carrier or flush. A worker of an earlier release ignores
	// the member and appends them at once, as for any carrier.
	CarryLazyUntil time.Time `json:"carryLazyUntil,omitzero"`
	// Approval is the node's latest decided tool approval: the agent
	// harness applies it to that call (Call.Ordinal) if it is still
	// pending, and to nothing else.
	Approval *ApprovalState `json:"approval,omitempty"`
}

// RunConstants are the members of a NodeInput that are the same in every
// attempt of a run: what a lean input (NodeInput.Lean) leaves to the run's
// stored record.
type RunConstants struct {
	WorkflowKey string
	Checksum    string
	Mode        Mode
	Actor       Actor
	Permissions []string
	TenantName  string
}

// RunConstants returns p's constants, as every attempt's input carries them.
func (p RunParams) RunConstants() RunConstants {
	return RunConstants{WorkflowKey: p.WorkflowKey, Checksum: p.Checksum, Mode: p.Mode, Actor: p.Actor,
		Permissions: p.Permissions, TenantName: p.TenantName}
}

// WithConstants returns in with c in place of its constants and Lean
// cleared: a full input, as the activity's code reads it.
func (in NodeInput) WithConstants(c RunConstants) NodeInput {
	in.WorkflowKey, in.Checksum, in.Mode, in.Actor = c.WorkflowKey, c.Checksum, c.Mode, c.Actor
	in.Permissions, in.TenantName, in.Lean = c.Permissions, c.TenantName, false
	return in
}

// EventBatch is the interpreter's buffer as an activity carries it: events
// in ordinal order (appending them again is harmless: keys), the run update
// that goes with them, and the ordinal of the last one, which the activity
// reports back (NodeResult.EventsThrough) once they are known appended.
type EventBatch struct {
	Events  []EventDraft `json:"events,omitempty"`
	Run     *RunUpdate   `json:"run,omitempty"`
	Through int          `json:"through"`
	// After is, for a suffix (NodeInput.Suffix), the ordinal its events
	// follow; 0 for a batch holding the whole unconfirmed prefix.
	After int `json:"after,omitempty"`
}

// UnmarshalJSON decodes a batch as encoding/json does, into an Events
// slice allocated once: every event has one "key" member, so counting
// them (an over-count when a value holds one too) sizes it. Left to
// itself the decoder grows the slice by doubling from one element, and
// every attempt decodes the batch it carries: a chain10 run's ten inputs
// carry 86 events, for which the doubling allocated room for 230.
func (b *EventBatch) UnmarshalJSON(data []byte) error {
	type plain EventBatch // the same fields without this method
	var p plain
	p.Events = presized[EventDraft](data, eventKeyMember, minEventJSONBytes)
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	if len(p.Events) == 0 {
		p.Events = nil // as an absent (omitempty) member decodes
	}
	*b = EventBatch(p)
	return nil
}

var eventKeyMember = []byte(`"key"`)

// presized is an empty slice with room for one element per occurrence of
// member in data (each element of a batch has exactly one), or nil when
// there is none. Values may hold the member too: never more elements than
// the bytes could encode at minBytes each, so a value full of them cannot
// inflate the allocation.
func presized[E any](data, member []byte, minBytes int) []E {
	n := bytes.Count(data, member)
	if n == 0 {
		return nil
	}
	return make([]E, 0, min(n, len(data)/minBytes+1))
}

// minEventJSONBytes is less than any of weft's events takes encoded (a
// key holding the run id, a dotted type, a time); a smaller one would only
// make the slice grow once more.
const minEventJSONBytes = 64

// NodeResult is what a node activity returns.
type NodeResult struct {
	// Port is the output port that fired ("out", "pass", "fail").
	Port  string `json:"port"`
	Value Value  `json:"value"`
	// DurationMs is a simulated duration (fixtures) the virtual clock advances by.
	DurationMs int64 `json:"durationMs,omitempty"`
	// EventsThrough is the ordinal through which the run's events are
	// known to be in the log: NodeInput.Events.Through once the carried
	// events are appended, less (or 0) when the attempt answered before
	// its append committed (a read action does not wait for it).
	EventsThrough int `json:"eventsThrough,omitempty"`
	// EventsRefused: the suffix the attempt carried (NodeInput.Suffix)
	// was refused, the events before it not being in the log yet; the
	// interpreter carries the whole unconfirmed prefix next.
	EventsRefused bool `json:"eventsRefused,omitempty"`
	// Approval, instead of a port, says the agent attempt stopped before a
	// tool call that needs a person's decision; the interpreter waits for
	// it and dispatches the attempt again to resume.
	Approval *ApprovalRequest `json:"approval,omitempty"`
}

// Event types (schemaVersion 1).
const (
	EventRunStarted         = "run.started"
	EventNodeStarted        = "node.started"
	EventNodeAttemptFailed  = "node.attempt.failed"
	EventNodeRetryScheduled = "node.retry.scheduled"
	// EventNodeAttemptLeaseLost: the attempt's worker stopped heartbeating;
	// the same attempt is dispatched again (durability.go).
	EventNodeAttemptLeaseLost = "node.attempt.lease_lost"
	// EventNodeAttemptInfraRetry: the attempt met an infrastructure fault
	// (data.code: WORKER_DRAINED, STORE_UNAVAILABLE, PROVIDER_UNAVAILABLE);
	// the same attempt is dispatched again.
	EventNodeAttemptInfraRetry = "node.attempt.infra_retry"
	EventNodeCompleted         = "node.completed"
	EventNodeFailed            = "node.failed"
	EventNodeSkipped           = "node.skipped"
	EventEdgeTaken             = "edge.taken"
	EventEdgeDead              = "edge.dead"
	EventToolStarted           = "tool.started"
	EventToolCompleted         = "tool.completed"
	EventToolFailed            = "tool.failed"
	EventToolDenied            = "tool.denied"
	EventRunCancelRequested    = "run.cancel.requested"
	// EventRunThrottled: the run was accepted over a limit and waits for a
	// slot (data: position, reason); EventRunAdmitted: it got its slot and
	// is being started (data: waitedMs). The starter's dispatcher appends
	// them; a run admitted at once has neither.
	EventRunThrottled           = "run.throttled"
	EventRunAdmitted            = "run.admitted"
	EventNodeCancelAcknowledged = "node.cancel.acknowledged"
	EventNodeCancelUnacked      = "node.cancel.unacknowledged"
	EventNodeLateResult         = "node.late.result"
	// EventNodeApprovalRequested: the node waits for a decision (data:
	// request, timeoutMs, deadlineAt, call for a tool approval).
	EventNodeApprovalRequested = "node.approval.requested"
	// EventNodeApprovalDecided: the request was decided (data: request,
	// decision approve|reject, actor, comment).
	EventNodeApprovalDecided = "node.approval.decided"
	// EventNodeApprovalTimedOut: no decision came within timeoutMs.
	EventNodeApprovalTimedOut = "node.approval.timed_out"
	EventRunContinued         = "run.continued"
	EventRunSucceeded         = "run.succeeded"
	EventRunFailed            = "run.failed"
	EventRunCancelled         = "run.cancelled"
)

// EventSchemaVersion is the schema version stamped on every event.
const EventSchemaVersion = 1

// EventDraft is an event before PostgreSQL assigns seq and hash. Key is
// deterministic (run, node, attempt, type, ordinal) so a re-executed
// activity never appends twice.
type EventDraft struct {
	Key     string          `json:"key"`
	Type    string          `json:"type"`
	NodeID  string          `json:"nodeId,omitempty"`
	Attempt int             `json:"attempt,omitempty"`
	At      time.Time       `json:"at"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// RunUpdate is a run-row projection applied in the same transaction as an append.
type RunUpdate struct {
	Status string `json:"status"`
	// TemporalRunID is the interpreter's own Temporal run id, sent with the
	// move to running: the row keeps the first one (continue-as-new changes
	// it; the workflow id is what operations address).
	TemporalRunID string    `json:"temporalRunId,omitempty"`
	Output        *Value    `json:"output,omitempty"`
	Error         *RunError `json:"error,omitempty"`
}

// RunError is a run's terminal error.
type RunError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	NodeID  string `json:"nodeId,omitempty"`
}

// AppendEventsInput is the input of the AppendEvents local activity.
type AppendEventsInput struct {
	TenantID string       `json:"tenantId"`
	RunID    string       `json:"runId"`
	Events   []EventDraft `json:"events"`
	Run      *RunUpdate   `json:"run,omitempty"`
	// Through is the interpreter's ordinal of the last event, as in
	// EventBatch (from interpreter version 4, whose keys hold no ordinal):
	// events are Through-len(Events)+1 .. Through in the run's order, so a
	// reader of the history (the workflow tests) can tell one event sent
	// twice from two events under one key. The store does not read it.
	Through int `json:"through,omitempty"`
}

// LoadPlanInput is the input of the LoadPlan local activity.
type LoadPlanInput struct {
	TenantID string `json:"tenantId"`
	Checksum string `json:"checksum"`
}

// Activity error types (ApplicationError.Type). Permanent ones are non-retryable.
const (
	ErrMappingUnresolved = "MAPPING_UNRESOLVED"
	ErrPermissionDenied  = "PERMISSION_DENIED"
	ErrPayloadTooLarge   = "PAYLOAD_TOO_LARGE"
	ErrInvalidOutput     = "INVALID_OUTPUT"
	ErrSchemaViolation   = "SCHEMA_VIOLATION"
	ErrActionFailed      = "ACTION_FAILED"
	ErrNodeNotFound      = "NODE_NOT_FOUND"
	// ErrPlanNotFound: no compiled revision is stored under (tenant, checksum).
	ErrPlanNotFound = "PLAN_NOT_FOUND"
	// ErrExpressionFailed: a gate expression failed to evaluate (a missing
	// field, the cost limit, a non-bool result); deterministic, so permanent.
	ErrExpressionFailed = "EXPRESSION_FAILED"
	// ErrActionUnavailable: the worker has no action registered for the
	// pinned id@version, or its contract differs from the pinned one.
	ErrActionUnavailable = "ACTION_UNAVAILABLE"
	// ErrIdempotencyConflict: a ledger key was reused with another input.
	ErrIdempotencyConflict = "IDEMPOTENCY_CONFLICT"
	// ErrAgentUnavailable: the pinned agent revision, its provider or its
	// saved transcript cannot be used by this worker (permanent).
	ErrAgentUnavailable = "AGENT_UNAVAILABLE"
	// ErrActionTimeout: the handler did not finish within the node timeout (retryable).
	ErrActionTimeout = "ACTION_TIMEOUT"
	// ErrBudgetExceeded: the run's budget (maxTokens, maxCostUsd) cannot
	// cover the agent's next model call; not retryable. The node appends
	// agent.budget.exceeded saying what was spent and allowed.
	ErrBudgetExceeded = "BUDGET_EXCEEDED"
	// ErrBudgetUnpriced: the run has a cost budget (maxCostUsd) and the
	// agent's model has no price, so no call can be bounded; not retryable.
	ErrBudgetUnpriced = "BUDGET_UNPRICED"
	// ErrAppendRefused: the store refused an event batch (malformed event,
	// unknown run); retrying the same batch cannot succeed.
	ErrAppendRefused = "APPEND_REFUSED"
	// ErrRunNotFound: a lean input (NodeInput.Lean) names a run the store
	// does not hold under its tenant, or holds with a mode that is neither
	// live nor simulation, so the attempt has no permissions, revision or
	// mode to run with; permanent.
	ErrRunNotFound = "RUN_NOT_FOUND"
)

// Run-level error codes.
const (
	RunErrNoOutput   = "NO_OUTPUT"
	RunErrNodeFailed = "NODE_FAILED"
	RunErrCancelled  = "CANCELLED"
	// RunErrPlanUnavailable: the execution plan could not be loaded or is malformed.
	RunErrPlanUnavailable = "PLAN_UNAVAILABLE"
)
