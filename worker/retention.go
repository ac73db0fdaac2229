package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/weftworks/weft/store"
)

// Retention timing.
const (
	// retentionInterval is how often the worker prunes what retention
	// allows.
	retentionInterval = time.Hour
	// BindingMargin is how much longer than the Temporal namespace's
	// retention an idempotency binding outlives its run: Temporal deletes a
	// closed execution some time after its retention ends, never before.
	BindingMargin = 24 * time.Hour
	// ScheduleFiringRetention is how long the resolved input of a templated
	// schedule firing is kept (a firing is retried for 15 minutes at most).
	ScheduleFiringRetention = 7 * 24 * time.Hour
	// describeNamespaceTimeout bounds the namespace retention read.
	describeNamespaceTimeout = 10 * time.Second
)

// Retention is what the worker's retention pass deletes, and where.
type Retention struct {
	Store *store.Store
	// Temporal and Namespace tell the namespace's retention, which every
	// idempotency binding outlives its run by (plus BindingMargin).
	Temporal  client.Client
	Namespace string
	// EventDays deletes the events of runs closed longer ago
	// (WEFT_EVENT_RETENTION_DAYS); 0 keeps them.
	EventDays int
	// RunDays deletes runs closed longer ago with what belongs to them
	// alone (WEFT_RUN_RETENTION_DAYS); 0 keeps them.
	RunDays int
	Logger  *slog.Logger
}

// RetentionReport is what one pass deleted.
type RetentionReport struct {
	Events int64
	Runs   store.RetentionResult
	// Bindings are idempotency bindings of deleted runs past the
	// namespace's retention; NamespaceRetention is what was read (0 when it
	// could not be, and then no binding was deleted).
	Bindings           int64
	NamespaceRetention time.Duration
	ScheduleFirings    int64
}

// runRetention runs a retention pass at start and every retentionInterval
// until ctx ends. Failures are logged; the next pass tries again.
func runRetention(ctx context.Context, r Retention) {
	t := time.NewTicker(retentionInterval)
	defer t.Stop()
	for {
		rep, err := r.Once(ctx, time.Now())
		switch {
		case err != nil && ctx.Err() == nil:
			r.Logger.Warn("retention pass failed", "err", err)
		case err == nil && (rep.Events > 0 || rep.Runs.Runs > 0 || rep.Bindings > 0 || rep.ScheduleFirings > 0):
			r.Logger.Info("retention pass", "events", rep.Events, "runs", rep.Runs.Runs, "transcripts", rep.Runs.Transcripts,
				"values", rep.Runs.Values, "nodeResults", rep.Runs.NodeResults, "ledgerEntries", rep.Runs.LedgerEntries, "replays", rep.Runs.Replays, "bindings", rep.Bindings,
				"namespaceRetention", rep.NamespaceRetention.String(), "scheduleFirings", rep.ScheduleFirings)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Once runs one retention pass as of now: events of runs closed more than
// EventDays ago, runs closed more than RunDays ago (their bindings kept),
// bindings whose run was deleted and closed more than the namespace's
// retention plus BindingMargin ago, and templated schedule firings older
// than ScheduleFiringRetention. Every replica may run it: each deletion
// skips rows another holds and is idempotent.
func (r Retention) Once(ctx context.Context, now time.Time) (RetentionReport, error) {
	var rep RetentionReport
	var errs []error
	if r.EventDays > 0 {
		n, err := r.Store.DeleteEventsOfRunsClosedBefore(ctx, now.Add(-days(r.EventDays)))
		rep.Events = n
		errs = append(errs, err)
	}
	if r.RunDays > 0 {
		res, err := r.Store.DeleteRunsClosedBefore(ctx, now.Add(-days(r.RunDays)))
		rep.Runs = res
		errs = append(errs, err)
		keep, err := NamespaceRetention(ctx, r.Temporal, r.Namespace)
		if err != nil {
			// Never delete a binding without knowing how long Temporal may
			// hold its run's workflow id.
			errs = append(errs, fmt.Errorf("idempotency bindings kept: %w", err))
		} else {
			rep.NamespaceRetention = keep
			rep.Bindings, err = r.Store.DeleteExpiredBindings(ctx, now.Add(-keep-BindingMargin))
			errs = append(errs, err)
		}
	}
	n, err := r.Store.DeleteScheduleFiringsBefore(ctx, now.Add(-ScheduleFiringRetention))
	rep.ScheduleFirings = n
	errs = append(errs, err)
	return rep, errors.Join(errs...)
}

func days(n int) time.Duration { return time.Duration(n) * 24 * time.Hour }

// NamespaceRetention reads the Temporal namespace's workflow execution
// retention: how long Temporal keeps a closed execution, and so its
// workflow id, which a start with the same id (REJECT_DUPLICATE) would
// collide with.
func NamespaceRetention(ctx context.Context, c client.Client, namespace string) (time.Duration, error) {
	if c == nil {
		return 0, errors.New("worker: no Temporal client to read the namespace's retention")
	}
	ctx, cancel := context.WithTimeout(ctx, describeNamespaceTimeout)
	defer cancel()
	resp, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	if err != nil {
		return 0, fmt.Errorf("worker: describe namespace %s: %w", namespace, err)
	}
	ttl := resp.GetConfig().GetWorkflowExecutionRetentionTtl()
	if ttl == nil {
		return 0, fmt.Errorf("worker: namespace %s reports no retention", namespace)
	}
	return ttl.AsDuration(), nil
}
