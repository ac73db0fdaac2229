package worker_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/worker"
)

func TestOptions(t *testing.T) {
	o := worker.Options(config.Config{WorkerDrain: 3 * time.Second}, slog.New(slog.DiscardHandler))
	require.Equal(t, time.Second, o.StickyScheduleToStartTimeout, "StickyScheduleToStartTimeout = %s, want 1s", o.StickyScheduleToStartTimeout)
}

// TestServeRequiresItsDependencies: the worker defaults none of the shared
// wiring; a missing piece is refused by name before anything starts.
func TestServeRequiresItsDependencies(t *testing.T) {
	err := worker.Serve(context.Background(), worker.Deps{Logger: slog.New(slog.DiscardHandler)})
	require.Error(t, err, "Serve without a store = %v", err)
	require.Contains(t, err.Error(), "Store is required", "Serve without a store = %v", err)
	require.Error(t, worker.Register(nil, worker.Deps{}), "Register without dependencies succeeded")
}
