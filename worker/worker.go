// Package worker is weft's Temporal worker: worker.New on the task queue →
// register the interpreter workflow and the activities → run until the
// context is done, with the reconciler, the throttled-run dispatcher and
// retention beside it. The app (cmd/weft/internal/app) opens the
// connections and builds the shared wiring (variable registry, starter)
// once, and passes them in Deps: `weft worker` and `weft dev` both call
// Serve.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/weftworks/weft/activities"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/metrics"
	"github.com/weftworks/weft/reconciler"
	"github.com/weftworks/weft/revcache"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/temporalclient"
	"github.com/weftworks/weft/variables"
)

// StickyScheduleToStartTimeout is how long the server waits for the worker
// that cached a workflow (its sticky queue) before handing the next workflow
// task to any worker. The SDK default is 5 s: measured on the dev server, a
// worker killed mid-run delayed the next step of its runs by ~5 s. weft's
// workflow tasks are short and the interpreter replays cheaply, so losing the
// cache costs little; 1 s (the setting's resolution) bounds the stall.
const StickyScheduleToStartTimeout = time.Second

// MaxHeartbeatThrottleInterval caps how long the SDK batches heartbeats, which
// bounds how late a running node hears of a cancellation.
const MaxHeartbeatThrottleInterval = time.Second

// searchAttributeTimeout bounds the search attribute check at start.
const searchAttributeTimeout = 10 * time.Second

// Deps are the connections and the shared wiring a worker runs on. Store,
// Temporal, Variables and Starter are required.
type Deps struct {
	Config   config.Config
	Store    *store.Store
	Temporal client.Client
	Logger   *slog.Logger
	// Variables is the process's variable registry: templates, agent
	// instructions and schedule input resolve against it.
	Variables *variables.Registry
	// Starter is the process's execution capability: schedule firings
	// enqueue through it, and its dispatcher starts throttled runs when
	// runs this worker settles free their slots.
	Starter *starter.Starter
	// Metrics observes node attempts (weft_node_duration_seconds); nil
	// observes nothing.
	Metrics *metrics.Metrics
	// Actions are Go actions registered beyond the built-ins (README
	// "Adding an action in Go").
	Actions []catalog.Action
	// Revocations answers the per-attempt revocation read (a running
	// revcache.Cache); nil reads each from Store. Serve builds and runs
	// one when Config.RevocationCache is on and none is given.
	Revocations activities.RevocationSource
}

// Options are the worker options every weft worker uses.
func Options(cfg config.Config, logger *slog.Logger) sdkworker.Options {
	return sdkworker.Options{
		StickyScheduleToStartTimeout: StickyScheduleToStartTimeout,
		// A stopping worker (SIGTERM of a deploy) stops polling at once and
		// lets running attempts finish for this long; the activities hand
		// back what still runs shortly before it ends (WORKER_DRAINED), so
		// another worker takes it at once. Without it the SDK cancels them
		// immediately and each costs its node an attempt.
		WorkerStopTimeout: cfg.WorkerDrain,
		// An activity learns it was cancelled only from a heartbeat reply.
		// The SDK otherwise throttles heartbeats to 0.8 x the heartbeat
		// timeout (24 s for 30 s), so a cancelled node would run to its end
		// and be recorded as a late result instead of an acknowledgement.
		MaxHeartbeatThrottleInterval: MaxHeartbeatThrottleInterval,
		OnFatalError: func(err error) {
			logger.Error("temporal worker stopped by a fatal error", "err", err)
		},
	}
}

// check refuses Deps that lack a required dependency, naming it.
func (d Deps) check() error {
	switch {
	case d.Store == nil:
		return errors.New("worker: Store is required")
	case d.Temporal == nil:
		return errors.New("worker: Temporal is required")
	case d.Variables == nil:
		return errors.New("worker: Variables (the variable registry) is required")
	case d.Starter == nil:
		return errors.New("worker: Starter is required")
	}
	return nil
}

// Serve registers missing search attributes where the server allows it,
// builds the worker on the task queue, registers the interpreter and the
// activities, and runs it until ctx is done (then stops it gracefully) or it
// fails.
func Serve(ctx context.Context, d Deps) error {
	if err := d.check(); err != nil {
		return err
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	log := d.Logger.With("component", "worker", "taskQueue", d.Config.TaskQueue, "namespace", d.Config.TemporalNamespace)
	EnsureSearchAttributes(ctx, d.Temporal, d.Config.TemporalNamespace, log)

	// Publish the action contracts before polling: a contract changed
	// under an already published id@version stops the worker here.
	actions, err := Actions(d)
	if err != nil {
		return err
	}
	if err := actions.Publish(ctx, d.Store); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	if d.Revocations == nil {
		cache, err := RevocationCache(d.Config, d.Store, d.Logger)
		if err != nil {
			return err
		}
		if cache != nil {
			// Until its first heartbeat and while it cannot keep the
			// guarantee, the cache reads through; once ctx ends it stops
			// answering and removes its holder row.
			go cache.Run(ctx)
			d.Revocations = cache
		}
	}
	w := sdkworker.New(d.Temporal, d.Config.TaskQueue, Options(d.Config, log))
	if err := register(w, d, actions); err != nil {
		return err
	}
	if ctx.Err() != nil {
		// Stopped while starting: starting the worker now would only make
		// shutdown wait for its connection attempts.
		return nil
	}
	interrupt := make(chan any)
	go func() {
		<-ctx.Done()
		close(interrupt)
	}()
	// The reconciler names its own component; log already says "worker".
	rec, err := reconciler.New(reconciler.Deps{Store: d.Store, Temporal: d.Temporal, Logger: d.Logger.With("taskQueue", d.Config.TaskQueue)})
	if err != nil {
		return err
	}
	// Every replica reconciles: SettleRun appends under the run row lock with
	// a fixed event key, so replicas never settle a run twice.
	go rec.Run(ctx, reconciler.DefaultInterval)
	// Every replica dispatches too: a run this worker settles frees its
	// slot in the settling transaction, which wakes the dispatchers
	// (store.SlotsChannel); the decision is PostgreSQL's, under the
	// tenant's lock, so replicas never admit past a cap.
	go d.Starter.RunDispatcher(ctx)
	go runRetention(ctx, Retention{Store: d.Store, Temporal: d.Temporal, Namespace: d.Config.TemporalNamespace,
		EventDays: d.Config.EventRetentionDays, RunDays: d.Config.RunRetentionDays, Logger: log})
	log.Info("worker starting")
	if err := w.Run(interrupt); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	if ctx.Err() == nil {
		// Run returns early only when the worker failed for good.
		return fmt.Errorf("worker: stopped before shutdown was requested")
	}
	log.Info("worker stopped")
	return nil
}

// RevocationCache builds the revocation cache cfg asks for
// (WEFT_REVOCATION_CACHE, WEFT_REVOCATION_CACHE_LEASE) over st, not yet
// running: nil when it is off. Whoever runs it passes it as
// Deps.Revocations.
func RevocationCache(cfg config.Config, st *store.Store, logger *slog.Logger) (*revcache.Cache, error) {
	if !cfg.RevocationCache {
		return nil, nil
	}
	if st == nil {
		return nil, errors.New("worker: the revocation cache needs the Store")
	}
	cache, err := revcache.New(revcache.Config{Lease: cfg.RevocationCacheLease}, st, logger)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	return cache, nil
}

// EnsureSearchAttributes registers weft's search attributes when the
// namespace lacks them and the server allows it (a dev server or a
// self-hosted cluster does; Temporal Cloud needs them added as a setup
// step). A failure is logged, never fatal: /readyz reports what is missing.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, searchAttributeTimeout)
	defer cancel()
	added, err := temporalclient.RegisterSearchAttributes(ctx, c, namespace)
	if len(added) > 0 {
		log.Info("registered search attributes", "added", added)
	}
	if err != nil {
		log.Warn("could not register search attributes; register them as a setup step (see README)", "err", err)
	}
}
