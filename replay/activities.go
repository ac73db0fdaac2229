package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/activity"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/fixtures"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
)

// Reasons a run is not replayable that the engine itself finds (the
// recordings add theirs, e.g. RESULTS_DELETED).
const (
	ReasonRunDeleted   = "RUN_DELETED"
	ReasonNotLive      = "NOT_LIVE"
	ReasonNotTerminal  = "NOT_TERMINAL"
	ReasonReplayFailed = "REPLAY_FAILED"
)

// Derived is what a recorded run gives its simulation.
type Derived struct {
	// Fixtures replay the recorded node results (and the request's
	// fixtures for nodes without one).
	Fixtures fixtures.Set
	// Unrecorded are the draft's simulated nodes without a recording.
	Unrecorded []string
	// NotReplayable is a stable reason code when the run cannot be
	// replayed (its results were deleted, ...); "" when it can.
	NotReplayable string
}

// Deriver derives a recorded run's simulation fixtures for the draft doc:
// the run's recording (store.RunRecording) through fixtures.FromRecording.
type Deriver interface {
	Derive(ctx context.Context, tenantID, runID string, doc *graph.Document, extra fixtures.Set) (Derived, error)
}

// Activities are the replay workflow's activities (the worker side).
type Activities struct {
	store   *store.Store
	starter *starter.Starter
	derive  Deriver
	poll    time.Duration
	log     *slog.Logger
}

// ActivityDeps are the activities' collaborators.
type ActivityDeps struct {
	Store   *store.Store
	Starter *starter.Starter
	Deriver Deriver
	// Poll is how often a replayed run's simulation is looked at while
	// it runs (default 250ms).
	Poll   time.Duration
	Logger *slog.Logger
}

// NewActivities returns the activities; Store, Starter and Deriver are required.
func NewActivities(d ActivityDeps) (*Activities, error) {
	if d.Store == nil || d.Starter == nil || d.Deriver == nil {
		return nil, errors.New("replay: activities need Store, Starter and Deriver")
	}
	if d.Poll <= 0 {
		d.Poll = 250 * time.Millisecond
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	return &Activities{store: d.Store, starter: d.Starter, derive: d.Deriver, poll: d.Poll,
		log: d.Logger.With("component", "replay")}, nil
}

// Register registers the replay workflow and a's activities on r.
func Register(r sdkworker.Registry, a *Activities) {
	r.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName})
	r.RegisterActivityWithOptions(a.ReplayRun, activity.RegisterOptions{Name: activityReplayRun})
	r.RegisterActivityWithOptions(a.GiveUp, activity.RegisterOptions{Name: activityGiveUp})
	r.RegisterActivityWithOptions(a.Finish, activity.RegisterOptions{Name: activityFinishReplay})
}

// ReplayRun replays one recorded run and stores its verdict: derive the
// fixtures, enqueue the draft's simulation with the run's input (the
// idempotency key is the replay and the run, so a retry finds the same
// simulation), wait for it, compare. A run that cannot be replayed gets
// the not-replayable verdict with its reason; only transient failures are
// returned (and retried).
func (a *Activities) ReplayRun(ctx context.Context, in RunInput) error {
	rp, rows, err := a.store.GetReplay(ctx, in.TenantID, in.ReplayID)
	if errors.Is(err, failure.ErrNotFound) {
		return nil // deleted meanwhile (retention): nothing to report to
	}
	if err != nil {
		return err
	}
	var row *store.ReplayRun
	for i := range rows {
		if rows[i].RunID == in.RunID {
			row = &rows[i]
		}
	}
	if row == nil || row.Verdict != "" {
		return nil // not this replay's, or already compared
	}
	result, err := a.replay(ctx, rp, in.RunID)
	if err != nil {
		return err
	}
	if err := a.store.SetReplayVerdict(ctx, rp.TenantID, rp.ReplayID, result); err != nil {
		return err
	}
	a.log.Info("run replayed", "replay", rp.ReplayID, "run", in.RunID, "verdict", result.Verdict,
		"reason", result.Reason, "simulation", result.SimulationRunID)
	return nil
}

func notReplayable(runID, recordedStatus, reason string) store.ReplayRun {
	return store.ReplayRun{RunID: runID, Verdict: VerdictNotReplayable, Reason: reason, RecordedStatus: recordedStatus}
}

// permanent reports whether a coded refusal will be the same on a retry.
func permanent(err error) bool {
	switch failure.CodeOf(err) {
	case failure.CodeInternal, failure.CodeUnavailable, failure.CodeStoreUnavailable:
		return false
	}
	return true
}

func (a *Activities) replay(ctx context.Context, rp store.Replay, runID string) (store.ReplayRun, error) {
	rec, err := a.store.GetRun(ctx, rp.TenantID, runID)
	switch {
	case errors.Is(err, failure.ErrNotFound):
		return notReplayable(runID, "", ReasonRunDeleted), nil
	case err != nil:
		return store.ReplayRun{}, err
	case rec.Mode != string(execution.ModeLive) || rec.WorkflowKey != rp.WorkflowKey:
		return notReplayable(runID, rec.Status, ReasonNotLive), nil
	case !execution.Terminal(rec.Status):
		return notReplayable(runID, rec.Status, ReasonNotTerminal), nil
	}
	draft, err := a.starter.CompileDraft(ctx, rp.TenantID, rp.Permissions, rp.WorkflowKey, rp.DraftRevision)
	if err != nil {
		if permanent(err) {
			return notReplayable(runID, rec.Status, failure.CodeOf(err)), nil
		}
		return store.ReplayRun{}, err
	}
	extra, problems := fixtures.Parse(rp.Fixtures)
	if len(problems) > 0 {
		return store.ReplayRun{}, fmt.Errorf("replay %s: stored fixtures no longer parse: %s", rp.ReplayID, problems[0].Message)
	}
	der, err := a.derive.Derive(ctx, rp.TenantID, runID, &draft.Document, extra)
	if err != nil {
		if permanent(err) {
			return notReplayable(runID, rec.Status, failure.CodeOf(err)), nil
		}
		return store.ReplayRun{}, err
	}
	if der.NotReplayable != "" {
		return notReplayable(runID, rec.Status, der.NotReplayable), nil
	}
	var fx json.RawMessage
	if len(der.Fixtures) > 0 {
		if fx, err = json.Marshal(der.Fixtures); err != nil {
			return store.ReplayRun{}, fmt.Errorf("replay: fixtures: %w", err)
		}
	}
	n := rp.DraftRevision
	acc, err := a.starter.Enqueue(ctx, starter.Request{
		WorkflowKey:    rp.WorkflowKey,
		Input:          rec.Input,
		IdempotencyKey: "replay/" + rp.ReplayID + "/" + runID,
		Mode:           execution.ModeSimulation,
		DraftRevision:  &n,
		Fixtures:       fx,
		// Recorded outputs reach claim-check sizes: the derived set is
		// bounded by fixtures.MaxRecordedBytes, not a request's bound.
		DerivedFixtures: true,
	}, starter.Trusted{
		TenantID: rp.TenantID, TenantName: rp.TenantName, Actor: rp.Actor,
		Origin: execution.Origin{Kind: OriginKind, ID: rp.ReplayID}, Permissions: rp.Permissions,
	})
	if err != nil {
		if permanent(err) {
			// e.g. INVALID_INPUT: the draft's input schema refuses the
			// recorded input; INVALID_FIXTURES: the recording does not fit.
			return notReplayable(runID, rec.Status, failure.CodeOf(err)), nil
		}
		return store.ReplayRun{}, err
	}
	if err := a.store.SetReplaySimulation(ctx, rp.TenantID, rp.ReplayID, runID, acc.RunID); err != nil {
		return store.ReplayRun{}, err
	}
	sim, err := a.wait(ctx, rp.TenantID, acc.RunID)
	if err != nil {
		return store.ReplayRun{}, err
	}
	recorded, recDoc, err := a.outcome(ctx, rec)
	if err != nil {
		return store.ReplayRun{}, err
	}
	simulated, _, err := a.outcome(ctx, sim)
	if err != nil {
		return store.ReplayRun{}, err
	}
	verdict, diff := Compare(recorded, simulated, AddedNodes(recDoc, &draft.Document))
	diff.Unrecorded = UsedUnrecorded(der.Unrecorded, simulated)
	result := store.ReplayRun{RunID: runID, Verdict: verdict, SimulationRunID: acc.RunID,
		RecordedStatus: rec.Status, SimulatedStatus: sim.Status}
	if !diff.Empty() {
		if result.Diff, err = json.Marshal(diff); err != nil {
			return store.ReplayRun{}, fmt.Errorf("replay: diff: %w", err)
		}
	}
	return result, nil
}

// wait polls the simulation run until it is terminal, heartbeating, so a
// lost worker is noticed and the retry (same idempotency key) waits for
// the same run.
func (a *Activities) wait(ctx context.Context, tenantID, runID string) (store.Run, error) {
	t := time.NewTicker(a.poll)
	defer t.Stop()
	for {
		run, err := a.store.GetRun(ctx, tenantID, runID)
		if err != nil {
			return store.Run{}, fmt.Errorf("replay: simulation %s: %w", runID, err)
		}
		if execution.Terminal(run.Status) {
			return run, nil
		}
		activity.RecordHeartbeat(ctx, run.Status)
		select {
		case <-ctx.Done():
			return store.Run{}, ctx.Err()
		case <-t.C:
		}
	}
}

// projectPage is how many events one query reads when projecting node states.
const projectPage = 1000

// outcome is how run ended: status, output, error, and every node's
// status and port folded from its event log (as GET /v1/runs/{id} shows
// them), with the document of the revision it ran.
func (a *Activities) outcome(ctx context.Context, run store.Run) (Outcome, *graph.Document, error) {
	compiled, err := a.store.GetCompiled(ctx, run.TenantID, run.Checksum)
	if err != nil {
		return Outcome{}, nil, fmt.Errorf("replay: revision of run %s: %w", run.RunID, err)
	}
	p := execution.NewNodeProjection(compiled.Document.Nodes)
	var after int64
	for {
		events, err := a.store.ListEvents(ctx, run.TenantID, run.RunID, after, projectPage)
		if err != nil {
			return Outcome{}, nil, fmt.Errorf("replay: events of run %s: %w", run.RunID, err)
		}
		for _, ev := range events {
			p.Apply(execution.RecordedEvent{Type: ev.Type, NodeID: ev.NodeID, Attempt: ev.Attempt, At: ev.At, Data: ev.Data})
			after = ev.Seq
		}
		if len(events) < projectPage {
			break
		}
	}
	o := Outcome{Status: run.Status, Output: run.Output, Error: comparableError(run.Error), Nodes: map[string]NodeOutcome{}}
	for _, st := range p.States(run.Status) {
		o.Nodes[st.ID] = NodeOutcome{Status: st.Status, Port: st.Port}
	}
	return o, &compiled.Document, nil
}

// comparableError is the part of a run error a replay compares: its code
// and the node it names. The message is left out: a simulation words the
// same failure its own way (the attempts it took, its simulated marker).
func comparableError(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var re execution.RunError
	if err := json.Unmarshal(raw, &re); err != nil {
		return raw
	}
	b, _ := json.Marshal(execution.RunError{Code: re.Code, NodeID: re.NodeID}) // strings only: cannot fail
	return b
}

// GiveUp records a run whose replay activity failed for good as
// not-replayable (REPLAY_FAILED), unless it has a verdict already.
func (a *Activities) GiveUp(ctx context.Context, in RunInput) error {
	rp, rows, err := a.store.GetReplay(ctx, in.TenantID, in.ReplayID)
	if errors.Is(err, failure.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r.RunID == in.RunID && r.Verdict == "" {
			a.log.Warn("run could not be replayed", "replay", rp.ReplayID, "run", in.RunID)
			return a.store.SetReplayVerdict(ctx, rp.TenantID, rp.ReplayID, store.ReplayRun{RunID: in.RunID,
				Verdict: VerdictNotReplayable, Reason: ReasonReplayFailed, SimulationRunID: r.SimulationRunID})
		}
	}
	return nil
}

// Finish marks the replay done.
func (a *Activities) Finish(ctx context.Context, in RunInput) error {
	err := a.store.FinishReplay(ctx, in.TenantID, in.ReplayID)
	if errors.Is(err, failure.ErrNotFound) {
		return nil
	}
	return err
}
