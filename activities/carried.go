package activities

import (
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// carriedAppendTimeout bounds a carried append that outlives its attempt
// (withCarriedEvents): long enough for a loaded database, short enough
// that a worker never accumulates stuck appends. One that gives up loses
// nothing: its events stay in the interpreter's buffer until confirmed.
const carriedAppendTimeout = 30 * time.Second

// appendedRunsSize bounds the runs appendedRuns remembers: far more than a
// worker has in flight at once; an evicted run only confirms a little later.
const appendedRunsSize = 16 << 10

type runKey struct{ tenantID, runID string }

// appendedRuns remembers, per run, the highest event ordinal through which
// a carried batch was committed by this worker process. A batch carries
// the interpreter's whole unconfirmed prefix (ordinals through its
// Through), so a committed one proves every event of the run up to its
// Through is in the log: an attempt may report that ordinal
// (NodeResult.EventsThrough) even when its own append has not finished.
// It is process memory, not a source of truth: forgetting a run (eviction,
// a restart, an attempt on another worker) only confirms less, and the
// interpreter then carries the events again (keys make that harmless).
type appendedRuns struct {
	mu  sync.Mutex // makes record's read-modify-write atomic
	lru *lru.Cache[runKey, int]
}

func newAppendedRuns(size int) *appendedRuns {
	cache, _ := lru.New[runKey, int](size) // fails only for a size below 1
	return &appendedRuns{lru: cache}
}

// record notes that the run's events through ordinal are committed.
func (a *appendedRuns) record(tenantID, runID string, through int) {
	if through <= 0 {
		return
	}
	k := runKey{tenantID, runID}
	a.mu.Lock()
	defer a.mu.Unlock()
	if prev, ok := a.lru.Get(k); ok && prev >= through {
		return
	}
	a.lru.Add(k, through)
}

// through is the highest ordinal recorded for the run, 0 if none.
func (a *appendedRuns) through(tenantID, runID string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, _ := a.lru.Get(runKey{tenantID, runID})
	return v
}
