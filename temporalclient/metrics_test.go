package temporalclient_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/metrics"
	"github.com/weftworks/weft/temporalclient"
)

// TestDialRecordsSDKMetrics: a client dialled with metrics' Temporal
// handler records the SDK's client and worker metrics on weft's registry,
// where /metrics serves them: a workflow and its activity run through a
// real dev server, then the scrape holds their task latencies, labelled
// by type, and the start request.
func TestDialRecordsSDKMetrics(t *testing.T) {
	srv, err := testinfra.SharedTemporal()
	require.NoError(t, err)
	m := metrics.New()
	cfg := baseConfig(t, map[string]string{"TEMPORAL_ADDRESS": srv.HostPort})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := temporalclient.Dial(ctx, cfg, slog.New(slog.DiscardHandler), m.Temporal())
	require.NoError(t, err)
	defer c.Close()

	queue := "metrics-" + uuid.NewString()
	w := sdkworker.New(c, queue, sdkworker.Options{})
	w.RegisterActivityWithOptions(func(_ context.Context, s string) (string, error) { return s + "!", nil },
		activity.RegisterOptions{Name: "metrics.Echo"})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context, s string) (string, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
		var out string
		err := workflow.ExecuteActivity(ctx, "metrics.Echo", s).Get(ctx, &out)
		return out, err
	}, workflow.RegisterOptions{Name: "metrics.Flow"})
	require.NoError(t, w.Start())
	defer w.Stop()

	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "metrics-" + uuid.NewString(), TaskQueue: queue}, "metrics.Flow", "hi")
	require.NoError(t, err)
	var out string
	require.NoError(t, run.Get(ctx, &out))
	require.Equal(t, "hi!", out)

	want := []*regexp.Regexp{
		regexp.MustCompile(`(?m)^temporal_workflow_task_execution_latency_seconds_count\{[^}]*workflow_type="metrics\.Flow"[^}]*\} [1-9]`),
		regexp.MustCompile(`(?m)^temporal_workflow_task_schedule_to_start_latency_seconds_count\{[^}]*task_queue="` + regexp.QuoteMeta(queue) + `"[^}]*\} [1-9]`),
		regexp.MustCompile(`(?m)^temporal_activity_execution_latency_seconds_count\{[^}]*activity_type="metrics\.Echo"[^}]*workflow_type="metrics\.Flow"[^}]*\} 1$`),
		regexp.MustCompile(`(?m)^temporal_activity_schedule_to_start_latency_seconds_count\{[^}]*activity_type="metrics\.Echo"[^}]*\} 1$`),
		regexp.MustCompile(`(?m)^temporal_workflow_completed_total\{[^}]*workflow_type="metrics\.Flow"[^}]*\} 1$`),
		regexp.MustCompile(`(?m)^temporal_request_total\{[^}]*operation="StartWorkflowExecution"[^}]*\} 1$`),
	}
	// The worker records some of them after its last response, which the
	// run's result may beat: scrape until every one is there.
	var got string
	missing := func() []string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		require.Equal(t, 200, rec.Code)
		body, err := io.ReadAll(rec.Body)
		require.NoError(t, err)
		got = string(body)
		var out []string
		for _, re := range want {
			if !re.MatchString(got) {
				out = append(out, re.String())
			}
		}
		return out
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(missing()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	assert.Empty(t, missing(), "the scrape lacks these; it was:\n%s", got)
}
