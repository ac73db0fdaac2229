package activities

import (
	"context"

	lru "github.com/hashicorp/golang-lru/v2"
)

// runMemo is an LRU of what never changes for a run once it is enqueued
// (its fixtures, its constants), by (tenant, run): read from the run's
// record once per worker instead of once per attempt. The key holds the
// tenant, so an input naming another tenant's run can never be answered
// from a run read for its own tenant: it misses, and the load, which reads
// by tenant and run, finds nothing. A failed load is not kept.
type runMemo[V any] struct {
	lru *lru.Cache[runKey, V]
}

// newRunMemo keeps at most size runs (fallback when size is not positive).
func newRunMemo[V any](size, fallback int) *runMemo[V] {
	if size <= 0 {
		size = fallback
	}
	cache, _ := lru.New[runKey, V](size) // fails only for a size below 1
	return &runMemo[V]{lru: cache}
}

// get returns the run's value, calling load on a miss. Concurrent misses
// of one run may load twice; the first value kept is the one returned.
func (m *runMemo[V]) get(ctx context.Context, tenantID, runID string, load func(context.Context) (V, error)) (V, error) {
	key := runKey{tenantID, runID}
	if v, ok := m.lru.Get(key); ok {
		return v, nil
	}
	v, err := load(ctx)
	if err != nil {
		var zero V
		return zero, err
	}
	if first, ok, _ := m.lru.PeekOrAdd(key, v); ok {
		return first, nil
	}
	return v, nil
}
