// Package reconciler brings run rows in line with Temporal when a run's
// workflow was closed outside weft (SPEC §5): `temporal workflow
// terminate`, a workflow timeout, or a failure that kept the interpreter
// from recording its own terminal event. The interpreter always appends
// run.succeeded|failed|cancelled before its workflow closes, so a run row
// that is still queued or running while Temporal reports the workflow
// closed is exactly the case to repair.
//
// A full pass lists the non-terminal runs, asks Temporal for each one's
// workflow (by workflow id with an empty run id, so the latest execution of
// a continue-as-new chain answers) and, for a closed one, appends the
// terminal event the interpreter could not write, with the evidence
// Temporal holds (status, close time, the terminate reason and identity),
// in the same transaction as the run row update. The append happens only
// while the row is still not terminal (checked under the run row lock) and
// under a deterministic event key, so concurrent reconcilers on many
// replicas, and a late interpreter flush, never write twice.
//
// A full pass costs one Temporal request per non-terminal run, and every
// worker replica runs the loop, so Run makes one only every full interval
// (DefaultFullInterval). The passes between are recent passes: one query of
// Temporal's visibility for the interpreter's workflows that closed in a
// way weft may not have recorded (terminated, timed out, failed,
// cancelled) since shortly before the previous pass, and a Temporal
// request only for those whose rows are still not terminal. A run
// terminated by an operator is settled within about one interval either
// way; a full pass catches whatever visibility did not list.
//
// `temporal workflow reset` is not supported: a reset reopens a workflow
// whose run row may already be settled; the row stays as it is.
package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/store"
)

// ReasonClosedOutsideWeft is the evidence reason (and the run error code of
// a failed run) when Temporal closed a run weft did not settle.
const ReasonClosedOutsideWeft = "TERMINATED_OUTSIDE_WEFT"

// DefaultInterval is how often Run reconciles.
const DefaultInterval = 10 * time.Second

// DefaultFullInterval is how often Run makes a full pass (see the package
// comment); the passes between are recent ones.
const DefaultFullInterval = 5 * time.Minute

// recentOverlap is how far before the previous pass's start a recent pass
// looks: visibility may list a close a little late (Elasticsearch refreshes
// about every second), and the server's clock may differ from this one's.
const recentOverlap = time.Minute

// Bounds of one pass.
const (
	pageSize = 200
	// maxPerPass bounds the runs one pass examines; the next pass resumes
	// from the start, so a backlog is worked through over several passes.
	maxPerPass = 5000
	// describeTimeout bounds the Temporal calls made for one run.
	describeTimeout = 10 * time.Second
)

// Deps are the reconciler's collaborators.
type Deps struct {
	Store    *store.Store
	Temporal client.Client
	Logger   *slog.Logger
	// FullInterval is how often Run makes a full pass; 0 takes
	// DefaultFullInterval.
	FullInterval time.Duration
}

// Reconciler compares non-terminal run rows with Temporal and settles the
// ones Temporal closed.
type Reconciler struct {
	store     *store.Store
	temporal  client.Client
	log       *slog.Logger
	fullEvery time.Duration
}

// New returns a Reconciler. Store and Temporal are required.
func New(d Deps) (*Reconciler, error) {
	if d.Store == nil || d.Temporal == nil {
		return nil, errors.New("reconciler: Store and Temporal are required")
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.FullInterval <= 0 {
		d.FullInterval = DefaultFullInterval
	}
	return &Reconciler{store: d.Store, temporal: d.Temporal, log: d.Logger.With("component", "reconciler"), fullEvery: d.FullInterval}, nil
}

// Result is what one pass did.
type Result struct {
	// Checked is how many non-terminal runs were compared with Temporal
	// (one Temporal request each).
	Checked int
	// Settled lists the runs whose rows this pass settled.
	Settled []string
}

// Evidence is the data of the terminal event the reconciler appends.
type Evidence struct {
	// Reason is always ReasonClosedOutsideWeft.
	Reason string `json:"reason"`
	// TemporalStatus is the workflow's close status: TERMINATED,
	// TIMED_OUT, FAILED, CANCELED or COMPLETED.
	TemporalStatus string    `json:"temporalStatus"`
	CloseTime      time.Time `json:"closeTime"`
	// TemporalRunID is the closed execution (the last of a continue-as-new chain).
	TemporalRunID string `json:"temporalRunId"`
	HistoryLength int64  `json:"historyLength"`
	// TemporalReason is the terminate reason or the failure message Temporal recorded.
	TemporalReason string `json:"temporalReason,omitempty"`
	// Identity is who terminated or cancelled the workflow, as Temporal recorded it.
	Identity string `json:"identity,omitempty"`
	// RunError is the run's terminal error (failed and cancelled runs).
	RunError *execution.RunError `json:"runError,omitempty"`
	// NodeID is absent: no output node settled a run closed outside weft.
}

// Reconcile runs one pass over the non-terminal runs. Errors for single
// runs are joined and returned after the pass; the pass goes on.
func (r *Reconciler) Reconcile(ctx context.Context) (Result, error) {
	var res Result
	var errs []error
	var after *store.RunCursor
	for res.Checked < maxPerPass {
		page, err := r.store.ActiveRuns(ctx, 0, after, pageSize)
		if err != nil {
			return res, fmt.Errorf("reconciler: %w", err)
		}
		for _, run := range page {
			res.Checked++
			settled, err := r.reconcileRun(ctx, run)
			if err != nil {
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
				errs = append(errs, fmt.Errorf("run %s: %w", run.RunID, err))
				continue
			}
			if settled {
				res.Settled = append(res.Settled, run.RunID)
			}
		}
		if len(page) < pageSize {
			break
		}
		last := page[len(page)-1]
		after = &store.RunCursor{CreatedAt: last.CreatedAt, RunID: last.RunID}
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("reconciler: %w", errors.Join(errs...))
	}
	return res, nil
}

// ReconcileRecent runs one recent pass: it asks Temporal's visibility for
// the interpreter's workflows that closed terminated, timed out, failed or
// cancelled at or after since, and compares with Temporal only the runs of
// those whose rows are still queued or running (most of them the
// interpreter settled itself before closing, and are skipped). Errors for
// single runs are joined and returned after the pass; the pass goes on.
// A visibility store that cannot answer the query is an error: the caller
// makes a full pass instead.
func (r *Reconciler) ReconcileRecent(ctx context.Context, since time.Time) (Result, error) {
	var res Result
	ids, err := r.closedSince(ctx, since)
	if err != nil {
		return res, fmt.Errorf("reconciler: %w", err)
	}
	var errs []error
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), pageSize)]
		ids = ids[len(chunk):]
		runs, err := r.store.ActiveRunsOfWorkflows(ctx, chunk)
		if err != nil {
			return res, fmt.Errorf("reconciler: %w", err)
		}
		for _, run := range runs {
			res.Checked++
			settled, err := r.reconcileRun(ctx, run)
			if err != nil {
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
				errs = append(errs, fmt.Errorf("run %s: %w", run.RunID, err))
				continue
			}
			if settled {
				res.Settled = append(res.Settled, run.RunID)
			}
		}
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("reconciler: %w", errors.Join(errs...))
	}
	return res, nil
}

// closedSince lists, through visibility, the workflow ids of interpreter
// executions that closed in a way weft may not have recorded at or after
// since, at most maxPerPass of them (a later full pass sees the rest).
// Completed executions are left out: the interpreter settles its row
// before it returns, and a full pass covers the exception.
func (r *Reconciler) closedSince(ctx context.Context, since time.Time) ([]string, error) {
	query := fmt.Sprintf("WorkflowType = '%s' AND CloseTime >= '%s' AND (ExecutionStatus = 'Terminated' OR "+
		"ExecutionStatus = 'TimedOut' OR ExecutionStatus = 'Failed' OR ExecutionStatus = 'Canceled')",
		execution.WorkflowName, since.UTC().Format(time.RFC3339Nano))
	seen := map[string]bool{}
	var ids []string
	var token []byte
	for len(ids) < maxPerPass {
		resp, err := r.temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			PageSize: pageSize, NextPageToken: token, Query: query,
		})
		if err != nil {
			return nil, fmt.Errorf("list closed workflows: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			if id := e.GetExecution().GetWorkflowId(); id != "" && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	return ids, nil
}

// reconcileRun compares one run with its workflow and settles it if
// Temporal closed the workflow.
func (r *Reconciler) reconcileRun(ctx context.Context, run store.ActiveRun) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, describeTimeout)
	defer cancel()
	desc, err := r.temporal.DescribeWorkflow(ctx, run.WorkflowID, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, nil // never started: the starter's sweeper starts it
	}
	if err != nil {
		return false, fmt.Errorf("describe workflow %s: %w", run.WorkflowID, err)
	}
	if desc == nil || desc.RawResponse == nil {
		return false, fmt.Errorf("describe workflow %s: empty answer", run.WorkflowID)
	}
	info := desc.RawResponse.GetWorkflowExecutionInfo()
	status := info.GetStatus()
	switch status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED,
		enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED,
		enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
	default:
		return false, nil // running, paused, or between executions of a chain
	}
	ev := Evidence{
		Reason:         ReasonClosedOutsideWeft,
		TemporalStatus: statusName(status),
		TemporalRunID:  info.GetExecution().GetRunId(),
		HistoryLength:  info.GetHistoryLength(),
	}
	if ct := info.GetCloseTime(); ct != nil {
		ev.CloseTime = ct.AsTime().UTC()
	}
	if ev.CloseTime.IsZero() {
		ev.CloseTime = time.Now().UTC()
	}
	r.closeDetails(ctx, run.WorkflowID, ev.TemporalRunID, &ev)

	upd := execution.RunUpdate{}
	typ := execution.EventRunFailed
	switch status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		// Unreachable while the interpreter flushes before it returns;
		// settled from the workflow's own result if it ever happens.
		var out execution.Value
		if err := r.temporal.GetWorkflow(ctx, run.WorkflowID, ev.TemporalRunID).Get(ctx, &out); err != nil {
			return false, fmt.Errorf("read the result of workflow %s: %w", run.WorkflowID, err)
		}
		typ, upd.Status, upd.Output = execution.EventRunSucceeded, execution.StatusSucceeded, &out
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		typ, upd.Status = execution.EventRunCancelled, execution.StatusCancelled
		upd.Error = &execution.RunError{Code: execution.RunErrCancelled, Message: message(ev)}
	default:
		upd.Status = execution.StatusFailed
		upd.Error = &execution.RunError{Code: ReasonClosedOutsideWeft, Message: message(ev)}
	}
	ev.RunError = upd.Error
	data, err := json.Marshal(ev)
	if err != nil {
		return false, err
	}
	draft := execution.EventDraft{
		// Deterministic: every reconciler replica proposes the same key.
		Key:  fmt.Sprintf("%s/-/0/%s/reconciled", run.RunID, typ),
		Type: typ,
		At:   ev.CloseTime,
		Data: data,
	}
	applied, err := r.store.SettleRun(ctx, run.TenantID, run.RunID, draft, upd)
	if err != nil {
		return false, err
	}
	if applied {
		r.log.Warn("run closed outside weft; its row is settled from Temporal",
			"run", run.RunID, "tenant", run.TenantID, "workflowId", run.WorkflowID,
			"temporalStatus", ev.TemporalStatus, "status", upd.Status, "temporalReason", ev.TemporalReason)
	}
	return applied, nil
}

// closeDetails adds what the close event says (the terminate reason and
// identity, the failure message). It is best effort: the status and close
// time are the evidence that matters, so a failed read is only logged.
func (r *Reconciler) closeDetails(ctx context.Context, workflowID, runID string, ev *Evidence) {
	it := r.temporal.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			r.log.Info("could not read the close event", "workflowId", workflowID, "err", err)
			return
		}
		closeEvent(e, ev)
	}
}

func closeEvent(e *historypb.HistoryEvent, ev *Evidence) {
	switch {
	case e.GetWorkflowExecutionTerminatedEventAttributes() != nil:
		a := e.GetWorkflowExecutionTerminatedEventAttributes()
		ev.TemporalReason, ev.Identity = a.GetReason(), a.GetIdentity()
	case e.GetWorkflowExecutionFailedEventAttributes() != nil:
		ev.TemporalReason = e.GetWorkflowExecutionFailedEventAttributes().GetFailure().GetMessage()
	case e.GetWorkflowExecutionCanceledEventAttributes() != nil:
		ev.TemporalReason = "cancelled"
	case e.GetWorkflowExecutionTimedOutEventAttributes() != nil:
		ev.TemporalReason = "workflow execution timeout"
	}
}

// message is the run error message a user reads.
func message(ev Evidence) string {
	msg := fmt.Sprintf("Temporal reports the workflow %s at %s outside weft", ev.TemporalStatus, ev.CloseTime.Format(time.RFC3339))
	if ev.TemporalReason != "" {
		msg += ": " + ev.TemporalReason
	}
	if ev.Identity != "" {
		msg += " (by " + ev.Identity + ")"
	}
	return msg
}

// statusName is "TERMINATED" for WORKFLOW_EXECUTION_STATUS_TERMINATED.
func statusName(s enumspb.WorkflowExecutionStatus) string {
	name, ok := enumspb.WorkflowExecutionStatus_name[int32(s)]
	if !ok {
		return fmt.Sprintf("STATUS_%d", s)
	}
	return strings.TrimPrefix(name, "WORKFLOW_EXECUTION_STATUS_")
}

// Run reconciles every interval (DefaultInterval when 0) until ctx ends:
// a full pass first and then every full interval, recent passes between
// (see the package comment). Every worker (and API) replica may run it:
// settling is conditional and keyed, so reconcilers never need to
// coordinate.
func (r *Reconciler) Run(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var s schedule
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		full, since := s.next(start, r.fullEvery)
		var res Result
		var err error
		if full {
			res, err = r.Reconcile(ctx)
		} else {
			res, err = r.ReconcileRecent(ctx, since)
		}
		s.done(start, full, err)
		var invalid *serviceerror.InvalidArgument
		if !full && errors.As(err, &invalid) {
			// Visibility cannot answer the query (a cluster without
			// advanced visibility): full passes from now on, as before.
			s.fullOnly = true
			r.log.Warn("Temporal's visibility cannot list closed workflows; every reconcile pass is a full one", "err", err)
			continue
		}
		if err != nil && ctx.Err() == nil {
			r.log.Warn("reconcile pass failed", "full", full, "checked", res.Checked, "settled", len(res.Settled), "err", err)
		}
	}
}

// schedule decides Run's passes: full when none has succeeded yet, when
// the last one is a full interval old, or after a recent pass failed (its
// window would otherwise be lost); otherwise recent, from shortly before
// the start of the last pass that succeeded.
type schedule struct {
	lastFull, lastOK time.Time
	retryFull        bool
	// fullOnly: visibility refused a recent pass's query.
	fullOnly bool
}

func (s *schedule) next(now time.Time, fullEvery time.Duration) (full bool, since time.Time) {
	if s.fullOnly || s.lastFull.IsZero() || s.retryFull || now.Sub(s.lastFull) >= fullEvery {
		return true, time.Time{}
	}
	return false, s.lastOK.Add(-recentOverlap)
}

func (s *schedule) done(start time.Time, full bool, err error) {
	switch {
	case err == nil && full:
		s.lastFull, s.lastOK, s.retryFull = start, start, false
	case err == nil:
		s.lastOK = start
	case !full:
		s.retryFull = true
	}
}
