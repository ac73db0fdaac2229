package worker_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/worker"
)

func TestOptions(t *testing.T) {
	o := worker.Options(config.Config{WorkerDrain: 3 * time.Second}, slog.New(slog.DiscardHandler))
	if o.StickyScheduleToStartTimeout != time.Second {
		t.Fatalf("StickyScheduleToStartTimeout = %s, want 1s", o.StickyScheduleToStartTimeout)
	}
}

// TestServeRequiresItsDependencies: the worker defaults none of the shared
// wiring; a missing piece is refused by name before anything starts.
func TestServeRequiresItsDependencies(t *testing.T) {
	err := worker.Serve(context.Background(), worker.Deps{Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "Store is required") {
		t.Fatalf("Serve without a store = %v", err)
	}
	if err := worker.Register(nil, worker.Deps{}); err == nil {
		t.Fatal("Register without dependencies succeeded")
	}
}
