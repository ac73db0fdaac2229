package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
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

// Bounds of one firing's enqueue. The activity only reads PostgreSQL and
// starts a workflow, so 30 s per attempt is generous; retries back off to
// 30 s and stop after 15 minutes, so an outage delays a firing rather than
// piling up workflows (the schedule's overlap policy is BUFFER_ONE).
const (
	enqueueStartToClose    = 30 * time.Second
	enqueueScheduleToClose = 15 * time.Minute
	enqueueMaxInterval     = 30 * time.Second
)

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

// ScheduledEnqueue is the action of a weft schedule: one activity that
// enqueues the firing through the starter, keyed by the scheduled time.
// It does not wait for the run: the run is its own workflow, so a slow run
// never holds up the schedule.
func ScheduledEnqueue(ctx workflow.Context, p ScheduledEnqueueParams) (EnqueueScheduledResult, error) {
	at := scheduledStartTime(ctx)
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    enqueueStartToClose,
		ScheduleToCloseTimeout: enqueueScheduleToClose,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    enqueueMaxInterval,
		},
		Summary: "enqueue schedule " + p.ScheduleID,
	})
	var res EnqueueScheduledResult
	err := workflow.ExecuteActivity(ctx, ActivityEnqueueScheduled, EnqueueScheduledInput{
		TenantID: p.TenantID, ScheduleID: p.ScheduleID, ScheduledAt: at,
	}).Get(ctx, &res)
	return res, err
}

// scheduledStartTime is the firing's nominal time from the
// TemporalScheduledStartTime search attribute. A workflow started some
// other way (a manual start, a test) falls back to its start time; both
// come from the history, so replay is deterministic.
func scheduledStartTime(ctx workflow.Context) time.Time {
	if t, ok := workflow.GetTypedSearchAttributes(ctx).GetTime(ScheduledStartTimeKey); ok && !t.IsZero() {
		return t.UTC()
	}
	return workflow.GetInfo(ctx).WorkflowStartTime.UTC()
}
