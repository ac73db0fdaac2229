package activities

import (
	"context"
	"errors"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/store"
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
// Through), or is a suffix the store appended only once every event
// before it was in the log (store.ErrEventsGap), so a committed one proves
// every event of the run up to its Through is in the log: an attempt may report that ordinal
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

// runAppends serializes this process's appends of one run's events
// (carried batches and local-activity flushes) and coalesces waiting
// carried batches.
//
// Appends of one run take the run row's lock in the database one at a
// time anyway. Left to PostgreSQL, every attempt's append waits there,
// holding a pool connection, and re-sends every event not yet known
// committed — all of them while the ones ahead wait — so under load a
// chain of read actions, whose attempts answer before their appends
// commit, built a backlog (ten appends of a ten-node chain still waiting
// at the run's end, the last one sending all its events again) that the
// run's final flush waited behind. Here a run's appends wait in memory
// instead: the one that gets the run's turn sends only what is not known
// committed, and a carried batch that waited sends the latest batch
// waiting for the run instead of its own: every batch carries the
// interpreter's whole unconfirmed prefix, so the latest holds everything
// the earlier ones do (and the run update, until one is confirmed), and
// the earlier ones then find their events committed and send nothing.
// Only batches carried by attempts are coalesced: an attempt exists only
// once the workflow task that decided it completed, whereas a flush comes
// from a workflow task that may never complete (docs/reliability.md), so a
// flush appends exactly what it was given.
type runAppends struct {
	events eventAppender // flushes: events, or one sharing commits (appendGroups)
	// carried sends carried batches: events, or one sharing commits with
	// other runs' (appendGroups).
	carried  carriedAppender
	appended *appendedRuns
	// gapWait is how long a refused suffix is tried again (carryClosingGap).
	gapWait time.Duration

	mu    sync.Mutex
	lanes map[runKey]*appendLane
}

// appendLane is one run's turn: sem holds one token while an append of
// the run is being sent; latest is the carried batch with the highest
// Through that waits for (or holds) the turn.
type appendLane struct {
	sem    chan struct{}
	users  int
	latest *execution.EventBatch
}

func newRunAppends(events eventAppender, appended *appendedRuns) *runAppends {
	carried, ok := events.(carriedAppender)
	if !ok {
		carried = uncheckedCarried{events}
	}
	return &runAppends{events: events, carried: carried, appended: appended, gapWait: gapWait, lanes: map[runKey]*appendLane{}}
}

// carriedAppender appends a batch an attempt carries with its ordinals:
// the check of a suffix and the vouch (store.AppendRequest.After, Through).
type carriedAppender interface {
	AppendCarried(ctx context.Context, r store.AppendRequest) error
}

var _ carriedAppender = (*store.Store)(nil)

// uncheckedCarried appends carried batches through an appender that knows
// no ordinals (the tests' recorders): it cannot check a suffix, so it
// refuses every one, as a store would before anything vouched.
type uncheckedCarried struct{ eventAppender }

func (u uncheckedCarried) AppendCarried(ctx context.Context, r store.AppendRequest) error {
	if r.After > 0 {
		return store.ErrEventsGap
	}
	return u.AppendEvents(ctx, r.TenantID, r.RunID, r.Events, r.Update)
}

// storeAppender appends one run's events or several runs' together (store.Store).
type storeAppender interface {
	eventAppender
	groupAppender
}

// newGroupedRunAppends is newRunAppends whose appends, carried batches and
// flushes alike, share commits with other runs' waiting at the same time
// (appendGroups). A flush is still never coalesced (it sends exactly what
// it was given, in its run's turn); it only joins the next commit. That
// costs a flush at most the wait for the group in flight (an append on an
// idle worker still goes out at once), and spares the database a commit
// of its own per flush; and since one group is in flight at a time, a
// worker's appends keep to one pool connection at a time instead of
// spreading over the pool's backends, each of which pays again for the
// shared-buffer pages, caches and plans it touches first.
func newGroupedRunAppends(st storeAppender, appended *appendedRuns) *runAppends {
	r := newRunAppends(st, appended)
	g := newAppendGroups(st, maxAppendGroup)
	r.events, r.carried = g, g
	return r
}

// join returns the run's lane, offering b (nil for a flush) as its latest batch.
func (r *runAppends) join(k runKey, b *execution.EventBatch) *appendLane {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lanes[k]
	if l == nil {
		l = &appendLane{sem: make(chan struct{}, 1)}
		r.lanes[k] = l
	}
	l.users++
	if b != nil && (l.latest == nil || b.Through > l.latest.Through) {
		l.latest = b
	}
	return l
}

func (r *runAppends) leave(k runKey, l *appendLane) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.users--; l.users == 0 {
		delete(r.lanes, k)
	}
}

// turn waits for the run's turn; the returned function gives it back.
func (l *appendLane) turn(ctx context.Context) (func(), error) {
	select {
	case l.sem <- struct{}{}:
		return func() { <-l.sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// carry appends a batch an attempt carries, in the run's turn: nothing
// when its events are known committed by then, else the latest batch
// waiting for the run, less what is known committed.
func (r *runAppends) carry(ctx context.Context, tenantID, runID string, b *execution.EventBatch) error {
	return r.inTurn(ctx, runKey{tenantID, runID}, b, func(l *appendLane) error {
		return r.sendCarried(ctx, tenantID, runID, l, b)
	})
}

// inTurn runs send in the run's turn, b (nil for a flush) offered as the
// lane's latest batch while it waits.
func (r *runAppends) inTurn(ctx context.Context, k runKey, b *execution.EventBatch, send func(*appendLane) error) error {
	l := r.join(k, b)
	defer r.leave(k, l)
	done, err := l.turn(ctx)
	if err != nil {
		return err
	}
	defer done()
	return send(l)
}

// sendCarried is carry's part in the run's turn.
func (r *runAppends) sendCarried(ctx context.Context, tenantID, runID string, l *appendLane, b *execution.EventBatch) error {
	known := r.appended.through(tenantID, runID)
	if known >= b.Through {
		return nil // a later batch of the run committed it, update included
	}
	r.mu.Lock()
	latest := l.latest
	r.mu.Unlock()
	send := merged(b, latest)
	pending := unappended(send, known)
	after := send.After
	if after <= known {
		after = 0 // this process committed the events it follows
	}
	if len(pending) > 0 || send.Run != nil {
		err := r.carried.AppendCarried(ctx, store.AppendRequest{TenantID: tenantID, RunID: runID,
			Events: pending, Update: send.Run, After: after, Through: send.Through})
		if err != nil {
			return err
		}
	}
	r.appended.record(tenantID, runID, send.Through)
	return nil
}

// merged is what a carried batch b sends in its turn, given the run's
// latest waiting batch: the latest when it holds the whole unconfirmed
// prefix (everything b holds that is not known committed); b followed by
// the latest's later events when the latest is a suffix continuing b (an
// earlier ordinal than b's last); b alone otherwise (the latest follows
// events b does not hold: its own turn checks them).
func merged(b, latest *execution.EventBatch) *execution.EventBatch {
	switch {
	case latest == nil || latest.Through <= b.Through:
		return b
	case latest.After == 0:
		return latest
	case latest.After > b.Through:
		return b
	}
	first := latest.Through - len(latest.Events) + 1
	skip := b.Through - first + 1
	events := make([]execution.EventDraft, 0, len(b.Events)+len(latest.Events)-skip)
	events = append(append(events, b.Events...), latest.Events[skip:]...)
	return &execution.EventBatch{Events: events, Run: latest.Run, Through: latest.Through, After: b.After}
}

// isGap reports a suffix refused because the events before it are not in
// the log (store.ErrEventsGap).
func isGap(err error) bool { return errors.Is(err, store.ErrEventsGap) }

// Flush is a flush (the AppendEvents local activity) in the run's turn:
// its events less those this worker has seen committed by then, and its
// run update.
//
// A flush carries the interpreter's whole unconfirmed prefix, so at the
// run's end it holds again what the last attempts carried and could not
// confirm before they answered (a read action answers before its append
// commits). The flush waits for those appends (the run's turn), then sent
// their events again, each found by key and skipped inside the statement,
// on the run's critical path. From interpreter version 4 a
// flush names the ordinal of its last event (AppendEventsInput.Through),
// so the events through the ordinal this worker knows committed
// (appendedRuns) are left out, as a carried batch leaves them out
// (unappended). What is left out is in the log already: appendedRuns
// holds only ordinals of carried batches that committed, and those came
// from workflow tasks that completed, so a workflow task executed again
// records the same events under them. The flush itself is never recorded
// there: it may come from a workflow task that never completes, whose
// ordinals a new execution of the task may give to other events.
// Without Through (before version 4) the flush sends all it was given.
func (r *runAppends) Flush(ctx context.Context, in execution.AppendEventsInput) error {
	return r.inTurn(ctx, runKey{in.TenantID, in.RunID}, nil, func(*appendLane) error {
		events := in.Events
		if in.Through > 0 {
			events = unappended(&execution.EventBatch{Events: in.Events, Through: in.Through}, r.appended.through(in.TenantID, in.RunID))
			if len(events) == 0 && in.Run == nil {
				return nil
			}
		}
		return r.events.AppendEvents(ctx, in.TenantID, in.RunID, events, in.Run)
	})
}
