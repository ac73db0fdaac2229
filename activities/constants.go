package activities

import (
	"context"
	"errors"
	"time"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/store"
)

// DefaultRunConstantsCacheSize bounds the runs whose constants a worker
// keeps: far more than it has in flight at once. An entry is the run's
// permission snapshot and a few short strings (about half a KiB), so the
// cache stays around a few MiB; an evicted run costs one more query.
const DefaultRunConstantsCacheSize = 4096

// constantsSource reads a run's constants from its stored record (store.Store).
type constantsSource interface {
	RunConstants(ctx context.Context, tenantID, runID string) (execution.RunConstants, error)
}

// runConstants reads runs' constants from their records, once per worker
// per run (runMemo): the run's row never changes them after the enqueue,
// so an entry never goes stale.
type runConstants struct {
	src  constantsSource
	memo *runMemo[execution.RunConstants]
}

func newRunConstants(src constantsSource, size int) *runConstants {
	return &runConstants{src: src, memo: newRunMemo[execution.RunConstants](size, DefaultRunConstantsCacheSize)}
}

// get returns the run's constants, reading them on a miss. A failed read is
// not kept: a run not found is permanent RUN_NOT_FOUND (the attempt cannot
// run without its permissions, revision and mode); an unreachable store is
// returned as it is, for durable to answer STORE_UNAVAILABLE so that the
// interpreter re-dispatches the attempt without spending it.
func (c *runConstants) get(ctx context.Context, tenantID, runID string) (execution.RunConstants, error) {
	return c.memo.get(ctx, tenantID, runID, func(ctx context.Context) (execution.RunConstants, error) {
		v, err := c.src.RunConstants(ctx, tenantID, runID)
		if err != nil {
			if errors.Is(err, failure.ErrNotFound) {
				return execution.RunConstants{}, permanent(execution.ErrRunNotFound, err,
					"the attempt's input leaves the run's constants to its record, and tenant %q has no run %q", tenantID, runID)
			}
			return execution.RunConstants{}, storeError(execution.ErrRunNotFound, err, "read the constants of run "+runID)
		}
		if v.Mode != execution.ModeLive && v.Mode != execution.ModeSimulation {
			// Never guess: an unknown mode is not live, and not safely simulated either.
			return execution.RunConstants{}, permanent(execution.ErrRunNotFound, nil,
				"run %q of tenant %q is stored with mode %q, neither live nor simulation", runID, tenantID, v.Mode)
		}
		return v, nil
	})
}

// workflowConstantsSource reads a run's constants by its workflow id
// (store.Store), for prefetch.
type workflowConstantsSource interface {
	RunConstantsOfWorkflow(ctx context.Context, tenantID, workflowID string) (string, execution.RunConstants, error)
}

var _ workflowConstantsSource = (*store.Store)(nil)

// prefetchTimeout bounds a prefetch's read: it is an optimisation, and the
// attempt reads the constants itself if the prefetch has not kept them.
const prefetchTimeout = 10 * time.Second

// prefetch reads, on a goroutine of its own, the constants of the tenant's
// run whose workflow id is workflowID and keeps them for the run, so the
// run's first attempt finds them in memory instead of reading them on its
// path (in weftbench, 3.6 ms median against 0.2 ms for the run's other
// attempts, at load 11-19). It keeps only what get would have kept: the
// same row, read by tenant, under its own tenant and run id, a valid mode.
// A failed read is dropped silently: the attempt reads, and reports, as
// before. done, when not nil, is called once the read ended (tests).
func (c *runConstants) prefetch(tenantID, workflowID string, done func()) {
	src, ok := c.src.(workflowConstantsSource)
	if !ok || tenantID == "" || workflowID == "" {
		if done != nil {
			done()
		}
		return
	}
	go func() {
		if done != nil {
			defer done()
		}
		ctx, cancel := context.WithTimeout(context.Background(), prefetchTimeout)
		defer cancel()
		runID, v, err := src.RunConstantsOfWorkflow(ctx, tenantID, workflowID)
		if err != nil || runID == "" || (v.Mode != execution.ModeLive && v.Mode != execution.ModeSimulation) {
			return
		}
		c.memo.lru.PeekOrAdd(runKey{tenantID, runID}, v)
	}()
}

// withRunConstants completes a lean input (execution.NodeInput.Lean) with
// the constants of the run it names, read from the run's record for its
// tenant (runConstants), before the attempt runs: the node's permissions,
// revision and mode come from the record and from nothing the input holds
// in their place. A full input passes through untouched.
//
// It runs inside durable, so an unreachable store is an infrastructure
// fault (STORE_UNAVAILABLE, re-dispatched), and inside withCarriedEvents,
// so the carried append (which needs only the tenant and run) starts
// while the constants are read.
func withRunConstants(run nodeRunner, consts *runConstants) nodeRunner {
	return func(ctx context.Context, in execution.NodeInput) (execution.NodeResult, error) {
		if !in.Lean {
			return run(ctx, in)
		}
		if in.TenantID == "" || in.RunID == "" {
			return execution.NodeResult{}, permanent(execution.ErrRunNotFound, nil,
				"node %q attempt %d: a lean input must name its tenant and run", in.NodeID, in.Attempt)
		}
		c, err := consts.get(ctx, in.TenantID, in.RunID)
		if err != nil {
			return execution.NodeResult{}, err
		}
		in = in.WithConstants(c)
		if seen, ok := ctx.Value(resolvedKey{}).(*execution.NodeInput); ok {
			*seen = in // observed logs the attempt with them
		}
		return run(ctx, in)
	}
}

// resolvedKey holds, for observed, where withRunConstants leaves the input
// it completed.
type resolvedKey struct{}
