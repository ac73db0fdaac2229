package execution

import (
	"time"

	"go.temporal.io/sdk/temporal"
)

// Temporal names of the schedule bridge (SPEC §8). Changing either breaks
// existing schedules, whose actions name the workflow type.
const (
	// ScheduledEnqueueWorkflow is the action of every weft schedule.
	ScheduledEnqueueWorkflow = "weft.ScheduledEnqueue"
	// ActivityEnqueueScheduled is its one activity: enqueue the firing
	// through the starter as the schedule's service actor.
	ActivityEnqueueScheduled = "weft.EnqueueScheduled"
)

// ScheduledStartTimeKey is the search attribute Temporal sets on every
// workflow a schedule starts: the nominal time of the firing.
var ScheduledStartTimeKey = temporal.NewSearchAttributeKeyTime("TemporalScheduledStartTime")

// ScheduledEnqueueParams is the argument a schedule's action passes: only
// ids, so nothing in Temporal's copy of the schedule goes stale; the
// activity reads the rest (workflow key, input, creator, scopes) from
// PostgreSQL at every firing.
type ScheduledEnqueueParams struct {
	TenantID   string `json:"tenantId"`
	ScheduleID string `json:"scheduleId"`
}

// EnqueueScheduledInput is the input of ActivityEnqueueScheduled.
type EnqueueScheduledInput struct {
	TenantID   string `json:"tenantId"`
	ScheduleID string `json:"scheduleId"`
	// ScheduledAt is the firing's nominal time; it keys the run's
	// idempotency, so a re-run firing finds the run it already started.
	ScheduledAt time.Time `json:"scheduledAt"`
}

// EnqueueScheduledResult is what a firing did: started (or found) a run,
// was refused (with the evidence recorded), or was skipped.
type EnqueueScheduledResult struct {
	RunID   string `json:"runId,omitempty"`
	Created bool   `json:"created,omitempty"`
	// RefusedCode is set when the firing was refused instead of run; the
	// refusal is recorded as evidence, listed with the schedule.
	RefusedCode string   `json:"refusedCode,omitempty"`
	Missing     []string `json:"missing,omitempty"`
	// Skipped says why nothing was done (the schedule was deleted).
	Skipped string `json:"skipped,omitempty"`
}
