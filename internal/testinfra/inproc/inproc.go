// Package inproc builds weft components in a test's own process exactly as
// production wires them. It is apart from testinfra because it imports the
// worker (and through it starter and workflows), whose own in-package tests
// import testinfra. wiring.go builds the shared wiring (variable registry,
// publication resolver and service, starter) the production constructors
// require, as cmd/weft/internal/app does.
package inproc

import (
	"context"
	"testing"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/weftworks/weft/worker"
)

// NewWorker builds a worker on deps.Config.TaskQueue, polling through
// deps.Temporal, as production does: worker.Options, and worker.Register for
// the interpreter and every activity with its real dependencies (deps
// completed by WorkerDeps).
func NewWorker(deps worker.Deps) (sdkworker.Worker, error) {
	deps, err := WorkerDeps(deps)
	if err != nil {
		return nil, err
	}
	w := sdkworker.New(deps.Temporal, deps.Config.TaskQueue, worker.Options(deps.Config, deps.Logger))
	if err := worker.Register(w, deps); err != nil {
		return nil, err
	}
	return w, nil
}

// Worker builds a worker as NewWorker does, with the revocation cache
// deps.Config asks for running beside it (as worker.Serve runs it), starts
// it and stops both when the test ends.
func Worker(t testing.TB, deps worker.Deps) sdkworker.Worker {
	t.Helper()
	if deps.Config.TaskQueue == "" {
		t.Fatal("inproc: worker needs Config.TaskQueue")
	}
	if deps.Revocations == nil {
		// The revocation cache worker.Serve runs when the config asks for
		// it; its cleanup, registered first, runs after the worker's stop.
		cache, err := worker.RevocationCache(deps.Config, deps.Store, deps.Logger)
		if err != nil {
			t.Fatalf("inproc: %v", err)
		}
		if cache != nil {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				cache.Run(ctx)
			}()
			t.Cleanup(func() {
				cancel()
				<-done
			})
			deps.Revocations = cache
		}
	}
	w, err := NewWorker(deps)
	if err != nil {
		t.Fatalf("inproc: register worker: %v", err)
	}
	if err := w.Start(); err != nil {
		t.Fatalf("inproc: start worker: %v", err)
	}
	t.Cleanup(w.Stop)
	return w
}
