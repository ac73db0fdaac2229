package replay

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Names the worker registers the replay under.
const (
	WorkflowName         = "weft.Replay"
	activityReplayRun    = "weft.ReplayRun"
	activityGiveUp       = "weft.ReplayGiveUp"
	activityFinishReplay = "weft.ReplayFinish"
)

// Params is the replay workflow's input: ids only (the replay row holds
// the rest), so no payload carries an input, a fixture or a permission.
type Params struct {
	TenantID string   `json:"tenantId"`
	ReplayID string   `json:"replayId"`
	Runs     []string `json:"runs"`
	// Parallel bounds the runs replayed at once; it travels in the
	// parameters so a configuration change never alters a running replay.
	Parallel int `json:"parallel"`
}

// RunInput names one run of a replay (the activities' input).
type RunInput struct {
	TenantID string `json:"tenantId"`
	ReplayID string `json:"replayId"`
	RunID    string `json:"runId"`
}

// Activity bounds. A replayed run's activity enqueues the simulation and
// waits for it, heartbeating; a simulation runs on a virtual clock, so
// RunTimeout is generous headroom for a loaded worker, not a wait on time.
const (
	RunTimeout       = 30 * time.Minute
	RunHeartbeat     = time.Minute
	RunMaxAttempts   = 10
	finishTimeout    = time.Minute
	finishMaxAttempt = 0 // until it succeeds: a replay must end done
)

// Workflow drives one replay: it replays its runs, at most Params.Parallel
// at once, in the order chosen, then marks the replay done. It only
// schedules; every comparison and write happens in activities, each
// idempotent. A run whose activity gives up (after RunMaxAttempts) is
// recorded not-replayable with reason REPLAY_FAILED, so the replay always
// ends.
func Workflow(ctx workflow.Context, p Params) error {
	parallel := max(p.Parallel, 1)
	runCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: RunTimeout,
		HeartbeatTimeout:    RunHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: time.Minute, MaximumAttempts: RunMaxAttempts},
	})
	endCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: finishTimeout,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: time.Minute, MaximumAttempts: finishMaxAttempt},
	})
	sel := workflow.NewSelector(ctx)
	running := 0
	var failed []string
	for _, id := range p.Runs {
		for running >= parallel {
			sel.Select(ctx)
		}
		running++
		runID := id
		f := workflow.ExecuteActivity(runCtx, activityReplayRun, RunInput{TenantID: p.TenantID, ReplayID: p.ReplayID, RunID: runID})
		sel.AddFuture(f, func(f workflow.Future) {
			running--
			if err := f.Get(ctx, nil); err != nil {
				failed = append(failed, runID)
			}
		})
	}
	for running > 0 {
		sel.Select(ctx)
	}
	for _, id := range failed {
		if err := workflow.ExecuteActivity(endCtx, activityGiveUp, RunInput{TenantID: p.TenantID, ReplayID: p.ReplayID, RunID: id}).
			Get(ctx, nil); err != nil {
			return err
		}
	}
	return workflow.ExecuteActivity(endCtx, activityFinishReplay, RunInput{TenantID: p.TenantID, ReplayID: p.ReplayID}).Get(ctx, nil)
}
