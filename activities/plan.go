package activities

import (
	"context"
	"encoding/json"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
)

// planLoader reads execution plans (store.Store).
type planLoader interface {
	GetPlan(ctx context.Context, tenantID, checksum string) (*graph.Plan, error)
}

// eventAppender appends events (store.Store).
type eventAppender interface {
	AppendEvents(ctx context.Context, tenantID, runID string, events []execution.EventDraft, upd *execution.RunUpdate) error
}

// valueStore holds claim-checked values (store.Store).
type valueStore interface {
	PutValue(ctx context.Context, tenantID, runID, nodeID, port string, value json.RawMessage) (execution.ValueRef, error)
	GetValue(ctx context.Context, tenantID, runID string, ref execution.ValueRef) (json.RawMessage, error)
}

var (
	_ planLoader    = (*store.Store)(nil)
	_ eventAppender = (*store.Store)(nil)
	_ valueStore    = (*store.Store)(nil)
)

// PlanActivities loads execution plans for the interpreter.
type PlanActivities struct {
	plans planLoader
}

// LoadPlan (execution.ActivityLoadPlan, local) returns the execution plan of
// (tenant, checksum): ids, kinds, wiring, retries and timeouts, never node
// bodies. A missing plan is permanent (PLAN_NOT_FOUND): retrying cannot make
// it appear, since compiled revisions are stored before any run starts.
func (a *PlanActivities) LoadPlan(ctx context.Context, in execution.LoadPlanInput) (*graph.Plan, error) {
	p, err := a.plans.GetPlan(ctx, in.TenantID, in.Checksum)
	if err != nil {
		return nil, storeError(execution.ErrPlanNotFound, err, "load plan "+in.Checksum)
	}
	return p, nil
}

// EventActivities appends the interpreter's buffered events.
type EventActivities struct {
	events eventAppender
}

// AppendEvents (execution.ActivityAppendEvents, local) appends events and
// applies the run update in one transaction. Re-execution is harmless: the
// store skips event keys it already holds. Malformed events or an unknown
// run are permanent errors; database failures are retried.
func (a *EventActivities) AppendEvents(ctx context.Context, in execution.AppendEventsInput) error {
	if err := a.events.AppendEvents(ctx, in.TenantID, in.RunID, in.Events, in.Run); err != nil {
		return storeError(execution.ErrAppendRefused, err, "append events")
	}
	return nil
}
