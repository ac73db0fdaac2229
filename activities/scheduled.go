package activities

import (
	"context"
	"log/slog"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/weftworks/weft/bridges"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/variables"
)

// BridgeDeps are what the schedule bridge's activity needs: the store (the
// schedule row, revocations, refusals), the starter it enqueues through and
// the variable registry templated input resolves against; all required.
type BridgeDeps struct {
	Store     *store.Store
	Starter   *starter.Starter
	Variables *variables.Registry
	Logger    *slog.Logger
}

// ScheduleActivities runs schedule firings.
type ScheduleActivities struct {
	enqueuer *bridges.Enqueuer
}

// RegisterBridges registers the ScheduledEnqueue workflow's activity
// (execution.ActivityEnqueueScheduled). A worker registers it next to
// Register; it needs a starter, which Register's activities do not.
func RegisterBridges(r worker.ActivityRegistry, d BridgeDeps) error {
	enq, err := bridges.NewEnqueuer(d.Store, d.Starter, d.Variables, d.Logger)
	if err != nil {
		return err
	}
	a := &ScheduleActivities{enqueuer: enq}
	r.RegisterActivityWithOptions(a.EnqueueScheduled, activity.RegisterOptions{Name: execution.ActivityEnqueueScheduled})
	return nil
}

// EnqueueScheduled enqueues one schedule firing as the schedule's service
// actor (bridges.Enqueuer.FireSchedule): a deleted schedule is a no-op, a
// refusal is recorded as evidence and returned as a result (so the firing
// is not retried forever), and anything else (PostgreSQL or Temporal
// unavailable) is returned as a retryable error.
func (a *ScheduleActivities) EnqueueScheduled(ctx context.Context, in execution.EnqueueScheduledInput) (execution.EnqueueScheduledResult, error) {
	res, err := a.enqueuer.FireSchedule(ctx, in.TenantID, in.ScheduleID, in.ScheduledAt)
	if err != nil {
		return execution.EnqueueScheduledResult{}, err
	}
	out := execution.EnqueueScheduledResult{RunID: res.RunID, Created: res.Created, Skipped: res.Skipped}
	if res.Refusal != nil {
		out.RefusedCode = res.Refusal.Code
		out.Missing = res.Refusal.Missing
	}
	return out, nil
}
