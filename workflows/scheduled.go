package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/execution"
)

// Bounds of one firing's enqueue. The activity only reads PostgreSQL and
// starts a workflow, so 30 s per attempt is generous; retries back off to
// 30 s and stop after 15 minutes, so an outage delays a firing rather than
// piling up workflows (the schedule's overlap policy is BUFFER_ONE).
const (
	enqueueStartToClose    = 30 * time.Second
	enqueueScheduleToClose = 15 * time.Minute
	enqueueMaxInterval     = 30 * time.Second
)

// ScheduledEnqueue is the action of a weft schedule: one activity that
// enqueues the firing through the starter, keyed by the scheduled time.
// It does not wait for the run: the run is its own workflow, so a slow run
// never holds up the schedule.
func ScheduledEnqueue(ctx workflow.Context, p execution.ScheduledEnqueueParams) (execution.EnqueueScheduledResult, error) {
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
	var res execution.EnqueueScheduledResult
	err := workflow.ExecuteActivity(ctx, execution.ActivityEnqueueScheduled, execution.EnqueueScheduledInput{
		TenantID: p.TenantID, ScheduleID: p.ScheduleID, ScheduledAt: at,
	}).Get(ctx, &res)
	return res, err
}

// scheduledStartTime is the firing's nominal time from the
// TemporalScheduledStartTime search attribute. A workflow started some
// other way (a manual start, a test) falls back to its start time; both
// come from the history, so replay is deterministic.
func scheduledStartTime(ctx workflow.Context) time.Time {
	if t, ok := workflow.GetTypedSearchAttributes(ctx).GetTime(execution.ScheduledStartTimeKey); ok && !t.IsZero() {
		return t.UTC()
	}
	return workflow.GetInfo(ctx).WorkflowStartTime.UTC()
}
