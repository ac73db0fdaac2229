package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/store"
)

// errDrained is the cancellation cause of an attempt handed back because
// its worker is shutting down.
var errDrained = errors.New("worker is draining")

// HandbackBefore is how long before the end of the worker's drain window
// (WEFT_WORKER_DRAIN, the SDK's WorkerStopTimeout) an unfinished attempt is
// handed back: the time its WORKER_DRAINED answer needs to reach Temporal
// before the worker process exits. A quarter of short windows.
func HandbackBefore(drain time.Duration) time.Duration {
	return min(drain/4, 2*time.Second)
}

// durable wraps a node activity so that infrastructure faults reach the
// interpreter as such (execution.IsInfraError), never as the node's own
// failure that would spend one of its attempts:
//
//   - when the worker starts draining (SIGTERM of a deploy), attempts keep
//     running for drain minus HandbackBefore(drain); one still running
//     then has its context cancelled and answers WORKER_DRAINED, so another
//     worker runs it again at once instead of after a lost lease;
//   - an error that says PostgreSQL was unreachable (store.Unavailable,
//     anywhere in the error's chain, e.g. a notes write or a revocation
//     read) answers STORE_UNAVAILABLE.
//
// drain <= 0 hands attempts back as soon as the worker stops.
func durable(run nodeRunner, drain time.Duration) nodeRunner {
	handback := max(drain-HandbackBefore(drain), 0)
	return func(ctx context.Context, in execution.NodeInput) (execution.NodeResult, error) {
		dctx, stop := withDrain(ctx, handback)
		defer stop()
		res, err := run(dctx, in)
		if err == nil {
			return res, nil
		}
		if ctx.Err() == nil && errors.Is(context.Cause(dctx), errDrained) {
			return execution.NodeResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("node %q attempt %d: the worker shut down before it finished; it runs again elsewhere", in.NodeID, in.Attempt),
				execution.ErrWorkerDrained, err)
		}
		if store.Unavailable(err) {
			return execution.NodeResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("node %q attempt %d: PostgreSQL is unavailable: %v", in.NodeID, in.Attempt, err),
				execution.ErrStoreUnavailable, err)
		}
		return res, err
	}
}

// withDrain returns a context cancelled with errDrained once the worker has
// been stopping for handback. Outside a worker (tests calling a handler
// directly) it only adds a cancel function.
func withDrain(ctx context.Context, handback time.Duration) (context.Context, func()) {
	dctx, cancel := context.WithCancelCause(ctx)
	if !activity.IsActivity(ctx) {
		return dctx, func() { cancel(nil) }
	}
	stopping := activity.GetWorkerStopChannel(ctx) // nil for local activities: never fires
	go func() {
		select {
		case <-stopping:
		case <-dctx.Done():
			return
		}
		t := time.NewTimer(handback)
		defer t.Stop()
		select {
		case <-t.C:
			cancel(errDrained)
		case <-dctx.Done():
		}
	}()
	return dctx, func() { cancel(nil) }
}

// handlerGrace is how long a handler may take to return after its deadline
// or cancellation before the attempt stops waiting for it.
const handlerGrace = time.Second

// bounded runs fn on its own goroutine and returns what it returns; when fn
// is still running handlerGrace after ctx ended (a handler that ignores its
// context), it returns ctx's error and abandons fn. So the node's deadline
// is always the activity's own doing, well before Temporal's
// start-to-close timer, which the interpreter would take for a lost worker.
// A panic in fn becomes onPanic's error instead of crashing the worker.
func bounded[T any](ctx context.Context, onPanic func(p any) error, fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r = result{err: onPanic(p)}
			}
			done <- r
		}()
		r.v, r.err = fn()
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
	}
	t := time.NewTimer(handlerGrace)
	defer t.Stop()
	select {
	case r := <-done:
		return r.v, r.err
	case <-t.C:
		var zero T
		return zero, ctx.Err()
	}
}

// withCarriedEvents appends the interpreter events an attempt carries
// (NodeInput.Events from interpreter version 2, NodeInput.Carried from
// version 6) and reports how far the run's
// events are known to be appended (NodeResult.EventsThrough). The append
// starts with the attempt and runs while the node prepares (revision,
// authority, mapping, schema checks: reads only). Whatever has an effect
// outside the attempt waits for it first (awaitCarried: a workspace-write
// action's handler, the agent harness), so the log holds node.started and
// what led to it before the node does anything.
//
// An attempt that never waited (a read action, a simulated node: nothing
// outside the attempt depends on the log) does not wait at its end either:
// it answers at once and reports the highest ordinal this worker has seen
// committed for the run (appendedRuns), its own batch's if that append
// already finished. An append still running finishes on its own, detached
// from the attempt. The interpreter keeps every event buffered until some
// attempt or flush reports it appended, so an attempt that fails, answers
// before its append commits, or dies with its worker loses nothing: the
// next carrier or flush appends the events again (keys make repeats
// harmless), and the run's last flush appends whatever is left before the
// run is reported closed. A run's appends take turns in this process
// (runAppends): one waiting behind another sends only what is not known
// committed by then, coalesced with the run's latest waiting batch.
func withCarriedEvents(run nodeRunner, appends *runAppends, logger *slog.Logger) nodeRunner {
	return func(ctx context.Context, in execution.NodeInput) (execution.NodeResult, error) {
		// Either form (interpreter version 6 sends the compact one),
		// expanded to the events the plain form holds.
		b, err := in.CarriedEvents()
		if err != nil {
			return execution.NodeResult{}, permanent(execution.ErrAppendRefused, err, "decode the carried events: %v", err)
		}
		if b == nil {
			return run(ctx, in)
		}
		in.Events, in.Carried = nil, nil // the node itself never sees them
		if !in.CarryLazyUntil.IsZero() {
			return carryLazily(ctx, run, appends, logger, in, b)
		}
		// The goroutines below take these, not in: capturing in would
		// move the whole input to the heap for every attempt.
		tenantID, runID, nodeID := in.TenantID, in.RunID, in.NodeID
		c := &carried{done: make(chan struct{})}
		// Not the attempt's context: the append may outlive the attempt.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), carriedAppendTimeout)
		go func() {
			defer cancel()
			defer close(c.done)
			c.err = carryClosingGap(actx, appends, tenantID, runID, b)
		}()
		res, err := run(context.WithValue(ctx, carriedKey{}, c), in)
		if c.awaited.Load() {
			// The attempt made its append part of its outcome: as it waited.
			if aerr := c.wait(); aerr != nil {
				return execution.NodeResult{}, aerr
			}
			if err == nil {
				res.EventsThrough = b.Through
			}
			return res, err
		}
		if err == nil {
			res.EventsThrough = min(appends.appended.through(tenantID, runID), b.Through)
			select {
			case <-c.done:
				// Refused for good: the interpreter carries the whole
				// unconfirmed prefix next instead of another suffix.
				res.EventsRefused = isGap(c.err)
			default:
			}
		}
		// Nobody reads a detached append's error: the events stay buffered
		// and are carried again, but a store that keeps refusing them must
		// show in the worker's log.
		go func() {
			<-c.done
			if c.err != nil {
				logger.Warn("a carried event append failed; the events stay buffered and are carried again",
					"tenant", tenantID, "run", runID, "node", nodeID, "err", c.err)
			}
		}()
		return res, err
	}
}

// carryLazily runs an attempt whose events are carried lazily
// (NodeInput.CarryLazyUntil, interpreter version 9): a read action's, which
// nothing outside depends on. Its append starts only if the attempt is
// still running at CarryLazyUntil (or when it waits for it: awaitCarried),
// never once it has returned; one that started is waited for, so the
// result reports it exactly, as for an attempt that waited: EventsThrough
// the batch's last ordinal once committed, EventsRefused when the store
// refused the suffix. An attempt that ends before the time appends nothing
// and reports only what this worker knows committed (appendedRuns): the
// interpreter carries the events again with the next carrier or flush.
func carryLazily(ctx context.Context, run nodeRunner, appends *runAppends, logger *slog.Logger, in execution.NodeInput, b *execution.EventBatch) (execution.NodeResult, error) {
	tenantID, runID, nodeID := in.TenantID, in.RunID, in.NodeID
	c := &carried{done: make(chan struct{})}
	var once sync.Once
	var started atomic.Bool
	c.start = func() {
		once.Do(func() {
			started.Store(true)
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), carriedAppendTimeout)
			go func() {
				defer cancel()
				defer close(c.done)
				c.err = carryClosingGap(actx, appends, tenantID, runID, b)
			}()
		})
	}
	timer := time.AfterFunc(time.Until(in.CarryLazyUntil), c.start)
	res, err := run(context.WithValue(ctx, carriedKey{}, c), in)
	timer.Stop()
	once.Do(func() {}) // from here on the timer starts nothing
	if !started.Load() {
		if err == nil {
			res.EventsThrough = min(appends.appended.through(tenantID, runID), b.Through)
		}
		return res, err
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		// Cancelled or timed out: the append finishes on its own.
		go func() {
			<-c.done
			if c.err != nil {
				logger.Warn("a lazily carried event append failed; the events stay buffered and are carried again",
					"tenant", tenantID, "run", runID, "node", nodeID, "err", c.err)
			}
		}()
		return res, err
	}
	if c.awaited.Load() && c.err != nil {
		return execution.NodeResult{}, c.wait() // as for an attempt that waited
	}
	if err == nil {
		switch {
		case c.err == nil:
			res.EventsThrough = b.Through
		case isGap(c.err):
			res.EventsRefused = true
		default:
			logger.Warn("a lazily carried event append failed; the events stay buffered and are carried again",
				"tenant", tenantID, "run", runID, "node", nodeID, "err", c.err)
			res.EventsThrough = min(appends.appended.through(tenantID, runID), b.Through)
		}
	}
	return res, err
}

// gapWait bounds how long a carried suffix waits for the events before it
// to reach the log (carryClosingGap): an earlier carrier's append, on
// another worker or still in flight, commits within milliseconds; one that
// was lost never does, and the interpreter then carries the whole prefix.
const gapWait = 2 * time.Second

// carryClosingGap is appends.carry, tried again while the store refuses a
// suffix (EventBatch.After) because the events before it are not in the
// log yet, for at most gapWait (runAppends.gapWait).
func carryClosingGap(ctx context.Context, appends *runAppends, tenantID, runID string, b *execution.EventBatch) error {
	err := appends.carry(ctx, tenantID, runID, b)
	if b.After == 0 || !isGap(err) {
		return err
	}
	deadline := time.Now().Add(appends.gapWait)
	for wait := 5 * time.Millisecond; isGap(err) && time.Now().Add(wait).Before(deadline); wait = min(2*wait, 250*time.Millisecond) {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		err = appends.carry(ctx, tenantID, runID, b)
	}
	return err
}

// unappended is the suffix of b's events after ordinal known: a batch holds
// consecutive ordinals ending at b.Through, and those through known are
// committed already (appendedRuns), so hashing and sending them again
// would be wasted work (the store would skip them by key).
func unappended(b *execution.EventBatch, known int) []execution.EventDraft {
	first := b.Through - len(b.Events) + 1
	if skip := known - first + 1; skip > 0 {
		return b.Events[min(skip, len(b.Events)):]
	}
	return b.Events
}

// carried is an attempt's append of the events it carries.
type carried struct {
	done    chan struct{}
	err     error
	awaited atomic.Bool // the attempt waited for the append (awaitCarried)
	// start, for events carried lazily (carryLazily), starts the append
	// if it has not started; nil when it starts with the attempt.
	start func()
}

func (c *carried) wait() error {
	c.awaited.Store(true)
	if c.start != nil {
		c.start()
	}
	<-c.done
	if isGap(c.err) {
		// Not the node's failure, and nothing ran: the same attempt goes
		// out again (an infrastructure fault) with the whole prefix.
		return temporal.NewApplicationErrorWithCause("the events before the ones this attempt carried did not reach the run's log in time",
			execution.ErrEventsGap, c.err)
	}
	if c.err != nil {
		return storeError(execution.ErrAppendRefused, c.err, "append the interpreter's events")
	}
	return nil
}

type carriedKey struct{}

// awaitCarried waits until the events the attempt carries are in the log
// (withCarriedEvents); call it before anything with an effect outside the
// attempt.
func awaitCarried(ctx context.Context) error {
	if c, ok := ctx.Value(carriedKey{}).(*carried); ok {
		return c.wait()
	}
	return nil
}
