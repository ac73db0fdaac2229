package activities

import (
	"context"
	"errors"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
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
