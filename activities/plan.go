package activities

import (
	"context"
	"encoding/json"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.temporal.io/sdk/activity"

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

// PlanActivities loads execution plans for the interpreter. Plans are
// immutable (keyed by tenant and checksum), so every execution after the
// first of a revision is served from memory: the first workflow task of a
// run makes no database round trip for it.
type PlanActivities struct {
	plans planLoader
	cache *lru.Cache[planKey, *graph.Plan]
	// constants, when set, are prefetched for the run whose workflow
	// loads its plan (Deps.PrefetchRunConstants).
	constants *runConstants
}

type planKey struct{ tenant, checksum string }

// planCacheSize bounds the plans kept in memory (a plan is ids, wiring,
// retries and timeouts: a few KiB even for 200 nodes).
const planCacheSize = 512

func newPlanActivities(plans planLoader) *PlanActivities {
	cache, _ := lru.New[planKey, *graph.Plan](planCacheSize) // fails only for a size below 1
	return &PlanActivities{plans: plans, cache: cache}
}

// LoadPlan (execution.ActivityLoadPlan, local) returns the execution plan of
// (tenant, checksum): ids, kinds, wiring, retries and timeouts, never node
// bodies. A missing plan is permanent (PLAN_NOT_FOUND): retrying cannot make
// it appear, since compiled revisions are stored before any run starts.
//
// A run's workflow loads its plan first, in its first workflow task, so
// the run's constants are read meanwhile for its attempts (prefetch).
func (a *PlanActivities) LoadPlan(ctx context.Context, in execution.LoadPlanInput) (*graph.Plan, error) {
	if a.constants != nil && activity.IsActivity(ctx) {
		a.constants.prefetch(in.TenantID, activity.GetInfo(ctx).WorkflowExecution.ID, nil)
	}
	key := planKey{in.TenantID, in.Checksum}
	if p, ok := a.cache.Get(key); ok {
		return p, nil
	}
	p, err := a.plans.GetPlan(ctx, in.TenantID, in.Checksum)
	if err != nil {
		return nil, storeError(execution.ErrPlanNotFound, err, "load plan "+in.Checksum)
	}
	a.cache.Add(key, p)
	return p, nil
}

// EventActivities appends the interpreter's buffered events.
type EventActivities struct {
	events flusher
}

// flusher appends a flush's events in its run's turn (runAppends).
type flusher interface {
	Flush(ctx context.Context, in execution.AppendEventsInput) error
}

// AppendEvents (execution.ActivityAppendEvents, local) appends events and
// applies the run update in one transaction. Re-execution is harmless: the
// store skips event keys it already holds. Malformed events or an unknown
// run are permanent errors; database failures are retried.
func (a *EventActivities) AppendEvents(ctx context.Context, in execution.AppendEventsInput) error {
	if err := a.events.Flush(ctx, in); err != nil {
		return storeError(execution.ErrAppendRefused, err, "append events")
	}
	return nil
}
