package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/weftworks/weft/execution"
)

// scheduledEnv runs ScheduledEnqueue with enqueue standing in for the activity.
func scheduledEnv(t *testing.T, enqueue func(context.Context, execution.EnqueueScheduledInput) (execution.EnqueueScheduledResult, error)) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	Register(env)
	env.RegisterActivityWithOptions(enqueue, activity.RegisterOptions{Name: execution.ActivityEnqueueScheduled})
	return env
}

func TestScheduledEnqueueKeysTheFiringByTheScheduledTime(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 30, 4, 0, time.UTC)
	var got []execution.EnqueueScheduledInput
	env := scheduledEnv(t, func(_ context.Context, in execution.EnqueueScheduledInput) (execution.EnqueueScheduledResult, error) {
		got = append(got, in)
		return execution.EnqueueScheduledResult{RunID: "run-1", Created: true}, nil
	})
	require.NoError(t, env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(execution.ScheduledStartTimeKey.ValueSet(at))))
	env.ExecuteWorkflow(execution.ScheduledEnqueueWorkflow, execution.ScheduledEnqueueParams{TenantID: "t1", ScheduleID: "sch_1"})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []execution.EnqueueScheduledInput{{TenantID: "t1", ScheduleID: "sch_1", ScheduledAt: at}}, got)
	var res execution.EnqueueScheduledResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, execution.EnqueueScheduledResult{RunID: "run-1", Created: true}, res)
}

func TestScheduledEnqueueFallsBackToStartTimeAndRetries(t *testing.T) {
	calls := 0
	var got execution.EnqueueScheduledInput
	env := scheduledEnv(t, func(_ context.Context, in execution.EnqueueScheduledInput) (execution.EnqueueScheduledResult, error) {
		calls++
		got = in
		if calls < 3 {
			return execution.EnqueueScheduledResult{}, errors.New("postgres is restarting")
		}
		return execution.EnqueueScheduledResult{RefusedCode: "PERMISSION_DENIED", Missing: []string{"notes.write"}}, nil
	})
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	env.SetStartTime(start)
	env.ExecuteWorkflow(execution.ScheduledEnqueueWorkflow, execution.ScheduledEnqueueParams{TenantID: "t1", ScheduleID: "sch_1"})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, 3, calls, "transient errors are retried")
	require.True(t, got.ScheduledAt.Equal(start), "scheduledAt %s", got.ScheduledAt)
	var res execution.EnqueueScheduledResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "PERMISSION_DENIED", res.RefusedCode, "a refusal is a result, not a failure")
}
