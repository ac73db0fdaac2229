package app

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/temporalclient"
)

// TestRunWorker drives `weft worker`'s wiring against a real PostgreSQL and a dev
// server started WITHOUT weft's search attributes (like a fresh self-hosted
// cluster): the worker registers them, polls its task queue, and stops
// cleanly when its context ends.
func TestRunWorker(t *testing.T) {
	srv := testinfra.BareTemporal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := srv.Client()

	env := map[string]string{
		"DATABASE_URL":     testinfra.NewDatabase(t),
		"TEMPORAL_ADDRESS": srv.FrontendHostPort(),
		"WEFT_TASK_QUEUE":  "weft-worker-test",
	}
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- RunWorker(runCtx, cfg, false, slog.New(slog.NewJSONHandler(os.Stderr, nil))) }()

	// The worker polls its task queue...
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.DescribeTaskQueue(ctx, cfg.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		if err == nil && len(resp.GetPollers()) > 0 {
			break
		}
		require.False(t, time.Now().After(deadline), "no worker polls %s (last err %v)", cfg.TaskQueue, err)
		time.Sleep(100 * time.Millisecond)
	}
	// ...after registering the search attributes the server lacked.
	missing, err := temporalclient.MissingSearchAttributes(ctx, c, "default")
	require.NoError(t, err, "search attributes still missing: %v (err %v)", missing, err)
	require.Empty(t, missing, "search attributes still missing: %v (err %v)", missing, err)

	stop()
	select {
	case err := <-done:
		require.NoError(t, err, "Run after cancel = %v, want nil", err)
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop after its context ended")
	}
}

func TestRunWorkerFailsWithoutTemporal(t *testing.T) {
	env := map[string]string{
		"DATABASE_URL":     testinfra.NewDatabase(t),
		"TEMPORAL_ADDRESS": "127.0.0.1:1", // nothing listens there
	}
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.Error(t, RunWorker(ctx, cfg, false, slog.New(slog.DiscardHandler)), "Run without Temporal succeeded")
}
