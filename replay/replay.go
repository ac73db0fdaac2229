// Package replay replays recorded live runs through a draft (issue 21): for
// each chosen run it derives simulation fixtures from the run's recorded
// node results, runs the draft in simulation through the starter with the
// run's input, waits for it and compares the two runs (path, output,
// status) into a verdict stored beside the replay.
//
// A replay is driven by a small Temporal workflow (Workflow, registered by
// every worker), so it survives an API or worker restart: the API stores
// the replay and its chosen runs, then starts the workflow; activities do
// the work and are idempotent (the simulation's idempotency key is the
// replay and the run). Nothing live is called: a simulation run calls no
// provider and no action and writes nothing of the business (package
// fixtures), and simulation runs are exempt from run caps. Simulation runs
// of a replay carry origin {kind: "replay", id: <replay id>} and are never
// chosen as replay sources (only live runs are).
package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/fixtures"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
)

// Codes the replay engine adds to failure's shared set.
const (
	// CodeTooManyRuns refuses a replay of more runs than the configured
	// maximum (details.limit).
	CodeTooManyRuns = "REPLAY_TOO_MANY_RUNS"
	// CodeRunInvalid refuses a runs[] id that is not a live run of the
	// workflow in the caller's tenant (details.runId).
	CodeRunInvalid = "REPLAY_RUN_INVALID"
)

// DefaultLast is how many recent runs a replay takes when it names none.
const DefaultLast = 20

// OriginKind is the origin kind of a replay's simulation runs.
const OriginKind = "replay"

// Engine starts replays (the API side). The work is done by the worker's
// activities (Activities).
type Engine struct {
	store     *store.Store
	starter   *starter.Starter
	temporal  client.Client
	taskQueue string
	maxRuns   int
	parallel  int
	log       *slog.Logger
}

// Deps are the engine's collaborators.
type Deps struct {
	Store    *store.Store
	Starter  *starter.Starter
	Temporal client.Client
	// TaskQueue is the queue the workers poll (the replay workflow runs
	// there, beside the interpreter).
	TaskQueue string
	// MaxRuns bounds the runs of one replay (config WEFT_REPLAY_MAX_RUNS);
	// Parallel the simulations one replay has going at once
	// (WEFT_REPLAY_PARALLEL).
	MaxRuns  int
	Parallel int
	Logger   *slog.Logger
}

// New returns an Engine; every dependency is required.
func New(d Deps) (*Engine, error) {
	if d.Store == nil || d.Starter == nil || d.Temporal == nil || d.TaskQueue == "" {
		return nil, errors.New("replay: Store, Starter, Temporal and TaskQueue are required")
	}
	if d.MaxRuns < 1 || d.Parallel < 1 {
		return nil, errors.New("replay: MaxRuns and Parallel must be positive")
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	return &Engine{store: d.Store, starter: d.Starter, temporal: d.Temporal, taskQueue: d.TaskQueue,
		maxRuns: d.MaxRuns, parallel: d.Parallel, log: d.Logger.With("component", "replay")}, nil
}

// MaxRuns is the configured bound on the runs of one replay.
func (e *Engine) MaxRuns() int { return e.maxRuns }

// Request is what a caller asks to replay. Nothing in it is trusted.
type Request struct {
	WorkflowKey   string
	DraftRevision int
	// Runs names live runs of the workflow; Last (default DefaultLast when
	// Runs is empty) takes the most recent terminal live runs instead,
	// with one of Status when given.
	Runs   []string
	Last   *int
	Status []string
	// Fixtures are for nodes without a recording (package fixtures shape).
	Fixtures json.RawMessage
}

// Started is the answer to Start.
type Started struct {
	Replay store.Replay
	Runs   int
}

// Start validates req, chooses the runs, stores the replay with them and
// starts the workflow that replays them. tc is the caller (tenant, actor,
// scopes): the simulations are enqueued as theirs.
func (e *Engine) Start(ctx context.Context, req Request, tc starter.Trusted) (Started, error) {
	if err := e.check(&req); err != nil {
		return Started{}, err
	}
	if _, err := e.store.GetWorkflow(ctx, tc.TenantID, req.WorkflowKey); errors.Is(err, failure.ErrNotFound) {
		return Started{}, failure.New(failure.CodeNotFound, "workflow %q not found", req.WorkflowKey)
	} else if err != nil {
		return Started{}, fmt.Errorf("replay: get workflow: %w", err)
	}
	// The draft is refused up front exactly as its simulation would be.
	compiled, err := e.starter.CompileDraft(ctx, tc.TenantID, tc.Permissions, req.WorkflowKey, req.DraftRevision)
	if err != nil {
		return Started{}, err
	}
	extra, err := parseFixtures(req.Fixtures)
	if err != nil {
		return Started{}, err
	}
	if problems := extra.Check(compiled.Document); len(problems) > 0 {
		return Started{}, fixturesError(problems)
	}
	runs := req.Runs
	if len(runs) > 0 {
		bad, err := e.store.NotReplaySource(ctx, tc.TenantID, req.WorkflowKey, runs)
		if err != nil {
			return Started{}, fmt.Errorf("replay: %w", err)
		}
		if bad != "" {
			return Started{}, failure.New(CodeRunInvalid, "run %q is not a live run of workflow %q", bad, req.WorkflowKey).
				WithDetails(map[string]any{"runId": bad})
		}
	} else if runs, err = e.store.ReplaySources(ctx, tc.TenantID, req.WorkflowKey, *req.Last, req.Status); err != nil {
		return Started{}, fmt.Errorf("replay: %w", err)
	}
	fx, err := compactFixtures(extra)
	if err != nil {
		return Started{}, err
	}
	r, err := e.store.CreateReplay(ctx, store.Replay{
		ReplayID: "rpl_" + uuid.NewString(), TenantID: tc.TenantID, TenantName: tc.TenantName,
		WorkflowKey: req.WorkflowKey, DraftRevision: req.DraftRevision, Fixtures: fx,
		Actor: tc.Actor, Permissions: tc.Permissions,
	}, runs)
	if err != nil {
		return Started{}, fmt.Errorf("replay: %w", err)
	}
	if err := e.start(ctx, r, runs); err != nil {
		// Nothing drives it: undo it rather than leave a replay running forever.
		if derr := e.store.DeleteReplay(context.WithoutCancel(ctx), r.TenantID, r.ReplayID); derr != nil {
			e.log.Error("could not delete an unstarted replay; the sweeper will start it", "replay", r.ReplayID, "err", derr)
		}
		return Started{}, failure.Wrap(err, failure.CodeUnavailable, "the replay could not be started; retry shortly")
	}
	e.markStarted(ctx, r)
	e.log.Info("replay started", "replay", r.ReplayID, "tenant", r.TenantID, "workflowKey", r.WorkflowKey,
		"draftRevision", r.DraftRevision, "runs", len(runs), "actor", tc.Actor.Sub)
	return Started{Replay: r, Runs: len(runs)}, nil
}

// markStarted notes an issued start so the sweeper leaves the replay
// alone. Failing to note it costs only a repeated, harmless start.
func (e *Engine) markStarted(ctx context.Context, r store.Replay) {
	if err := e.store.MarkReplayStarted(context.WithoutCancel(ctx), r.TenantID, r.ReplayID); err != nil {
		e.log.Warn("could not mark a replay started; the sweeper will issue its start again", "replay", r.ReplayID, "err", err)
	}
}

// start issues the Temporal start of a replay's workflow. Its id is the
// replay's, USE_EXISTING answers a running one and REJECT_DUPLICATE
// refuses to run a finished one again, so repeating it (the sweeper) is
// harmless.
func (e *Engine) start(ctx context.Context, r store.Replay, runs []string) error {
	_, err := e.temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       WorkflowID(r.ReplayID),
		TaskQueue:                e.taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		StaticSummary:            fmt.Sprintf("replay of %d run(s) of %s through draft %d", len(runs), r.WorkflowKey, r.DraftRevision),
		StaticDetails:            fmt.Sprintf("replay %s · actor %s", r.ReplayID, r.Actor.Sub),
	}, WorkflowName, Params{TenantID: r.TenantID, ReplayID: r.ReplayID, Runs: runs, Parallel: e.parallel})
	return err
}

// SweepAfter is how long a replay may run before the sweeper issues its
// start again: long past the start of the request that stored it.
const SweepAfter = time.Minute

// sweepBatch bounds one sweep.
const sweepBatch = 100

// Sweep starts the workflows of replays still running SweepAfter after
// they were stored: a start lost between storing and starting (the API
// died) is issued again; for any other the start is a no-op. It returns
// how many starts it issued.
func (e *Engine) Sweep(ctx context.Context) (int, error) {
	list, runs, err := e.store.StaleReplays(ctx, SweepAfter, sweepBatch)
	if err != nil {
		return 0, fmt.Errorf("replay: sweep: %w", err)
	}
	var errs []error
	n := 0
	for i, r := range list {
		err := e.start(ctx, r, runs[i])
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		switch {
		case errors.As(err, &started):
			// Finished without marking the replay done: impossible unless
			// the Finish activity's writes were lost; say so, once.
			e.log.Warn("replay workflow closed but the replay is running", "replay", r.ReplayID)
			e.markStarted(ctx, r)
		case err != nil:
			errs = append(errs, fmt.Errorf("replay %s: %w", r.ReplayID, err))
		default:
			n++
			e.markStarted(ctx, r)
		}
	}
	return n, errors.Join(errs...)
}

// RunSweeper calls Sweep every interval until ctx ends. Every API replica
// may run it: starts are idempotent.
func (e *Engine) RunSweeper(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = 30 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := e.Sweep(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("replay sweep failed", "err", err)
		}
	}
}

// check validates the shape of req, defaulting Last.
func (e *Engine) check(req *Request) error {
	if req.DraftRevision < 1 {
		return failure.New(failure.CodeInvalidRequest, "draftRevision must be a positive integer").
			WithDetails(map[string]any{"field": "draftRevision"})
	}
	if len(req.Runs) > 0 && req.Last != nil {
		return failure.New(failure.CodeInvalidRequest, "give runs or last, not both").WithDetails(map[string]any{"field": "last"})
	}
	if len(req.Runs) > 0 && len(req.Status) > 0 {
		return failure.New(failure.CodeInvalidRequest, "status filters last; named runs are replayed whatever their status").
			WithDetails(map[string]any{"field": "status"})
	}
	for _, s := range req.Status {
		if s != execution.StatusSucceeded && s != execution.StatusFailed && s != execution.StatusCancelled {
			return failure.New(failure.CodeInvalidRequest, "status %q is not a terminal run status (succeeded, failed, cancelled)", s).
				WithDetails(map[string]any{"field": "status"})
		}
	}
	n := len(req.Runs)
	if n == 0 {
		if req.Last == nil {
			last := min(DefaultLast, e.maxRuns)
			req.Last = &last
		}
		if *req.Last < 1 {
			return failure.New(failure.CodeInvalidRequest, "last must be a positive integer").WithDetails(map[string]any{"field": "last"})
		}
		n = *req.Last
	}
	if n > e.maxRuns {
		return failure.New(CodeTooManyRuns, "a replay takes at most %d runs; asked for %d", e.maxRuns, n).
			WithDetails(map[string]any{"limit": e.maxRuns})
	}
	seen := make(map[string]bool, len(req.Runs))
	for _, id := range req.Runs {
		if id == "" || seen[id] {
			return failure.New(failure.CodeInvalidRequest, "runs must list distinct run ids").WithDetails(map[string]any{"field": "runs"})
		}
		seen[id] = true
	}
	return nil
}

// parseFixtures reads a request's fixtures; problems are INVALID_FIXTURES,
// as the starter answers them for a simulation.
func parseFixtures(raw json.RawMessage) (fixtures.Set, error) {
	set, problems := fixtures.Parse(raw)
	if len(problems) > 0 {
		return nil, fixturesError(problems)
	}
	return set, nil
}

func fixturesError(problems []fixtures.Problem) error {
	p := problems[0]
	at := p.Path
	if at == "" {
		at = "/"
	}
	return failure.New(starter.CodeInvalidFixtures, "fixtures are invalid at %s: %s", at, p.Message).
		WithDetails(map[string]any{"errors": problems})
}

// compactFixtures is what the replay row stores: nil when there are none.
func compactFixtures(set fixtures.Set) (json.RawMessage, error) {
	if len(set) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(set)
	if err != nil {
		return nil, fmt.Errorf("replay: fixtures: %w", err)
	}
	return b, nil
}

// WorkflowID is the Temporal workflow id driving a replay.
func WorkflowID(replayID string) string { return "weft-replay-" + replayID }

// Summary counts verdicts; pending runs have none yet.
type Summary struct {
	Same          int `json:"same"`
	OutputChanged int `json:"outputChanged"`
	PathChanged   int `json:"pathChanged"`
	NowFails      int `json:"nowFails"`
	NowSucceeds   int `json:"nowSucceeds"`
	NotReplayable int `json:"notReplayable"`
	Pending       int `json:"pending"`
}

// Summarize counts verdicts (verdict -> runs).
func Summarize(counts map[string]int) Summary {
	return Summary{
		Same: counts[VerdictSame], OutputChanged: counts[VerdictOutputChanged], PathChanged: counts[VerdictPathChanged],
		NowFails: counts[VerdictNowFails], NowSucceeds: counts[VerdictNowSucceeds],
		NotReplayable: counts[VerdictNotReplayable], Pending: counts[""],
	}
}
