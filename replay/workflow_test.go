package replay

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
)

// TestWorkflowBoundsAndEnds: the workflow replays every run, never more
// than Parallel at once, gives a run whose activity fails for good up
// (recorded REPLAY_FAILED), and marks the replay done after all of them.
func TestWorkflowBoundsAndEnds(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()

	var mu sync.Mutex
	var replayed, gaveUp []string
	var running, peak atomic.Int64
	finished := 0
	env.RegisterActivityWithOptions(func(ctx context.Context, in RunInput) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		mu.Lock()
		defer mu.Unlock()
		replayed = append(replayed, in.RunID)
		if in.RunID == "bad" {
			return temporal.NewNonRetryableApplicationError("broken", "TEST", errors.New("broken"))
		}
		return nil
	}, activity.RegisterOptions{Name: activityReplayRun})
	env.RegisterActivityWithOptions(func(ctx context.Context, in RunInput) error {
		mu.Lock()
		defer mu.Unlock()
		gaveUp = append(gaveUp, in.RunID)
		return nil
	}, activity.RegisterOptions{Name: activityGiveUp})
	env.RegisterActivityWithOptions(func(ctx context.Context, in RunInput) error {
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, replayed, 6, "done only after every run")
		finished++
		assert.Equal(t, "rpl_1", in.ReplayID)
		return nil
	}, activity.RegisterOptions{Name: activityFinishReplay})

	env.ExecuteWorkflow(Workflow, Params{TenantID: "t", ReplayID: "rpl_1", Runs: []string{"a", "b", "bad", "c", "d", "e"}, Parallel: 2})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	assert.ElementsMatch(t, []string{"a", "b", "bad", "c", "d", "e"}, replayed)
	assert.Equal(t, []string{"bad"}, gaveUp)
	assert.Equal(t, 1, finished)
	assert.LessOrEqual(t, peak.Load(), int64(2), "at most Parallel runs at once")
}

// TestWorkflowWithoutRuns: a replay that found no runs is done at once.
func TestWorkflowWithoutRuns(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	finished := 0
	env.RegisterActivityWithOptions(func(ctx context.Context, in RunInput) error { finished++; return nil },
		activity.RegisterOptions{Name: activityFinishReplay})
	env.ExecuteWorkflow(Workflow, Params{TenantID: "t", ReplayID: "rpl_2", Parallel: 4})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	assert.Equal(t, 1, finished)
}
