package activities

import (
	"cmp"
	"context"
	"errors"
	"slices"
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
// committed, and a carried batch that waited sends the batches waiting
// for the run with its own (coalesced: a later whole prefix holds
// everything the earlier ones do, and suffixes that continue one another
// are sent as one), and the others then find their events committed and
// send nothing. Only batches carried by attempts are coalesced: an
// attempt exists only once the workflow task that decided it completed,
// whereas a flush comes from a workflow task that may never complete
// (docs/reliability.md), so a flush appends exactly what it was given;
// it may only share the transaction of the carried append that has the
// turn before it (laneFlush).
type runAppends struct {
	events eventAppender // flushes: events, or one sharing commits (appendGroups)
	// carried sends carried batches: events, or one sharing commits with
	// other runs' (appendGroups).
	carried carriedAppender
	// together, when set, sends a carried batch and a flush of its run in
	// one transaction (appendGroups.AppendTogether); without it flushes
	// are never taken along.
	together togetherAppender
	appended *appendedRuns
	// gapWait is how long a refused suffix is tried again (carryClosingGap).
	gapWait time.Duration

	mu    sync.Mutex
	lanes map[runKey]*appendLane
}

// appendLane is one run's turn: sem holds one token while an append of
// the run is being sent; waiting are the carried batches that wait for
// (or hold) the turn, in the order they came.
type appendLane struct {
	sem     chan struct{}
	users   int
	waiting []*execution.EventBatch
	// flushes are the run's flushes waiting for the turn, which a carried
	// append may take along (laneFlush).
	flushes []*laneFlush
}

// laneFlush is a flush waiting for its run's turn. A carried append that
// gets the turn before it, and whose coalesced batch holds every carried
// batch waiting, may send it in the same transaction, right after its own
// (takeFlush): the flush then shares that commit instead of waiting for
// it and making one of its own, on the run's critical path (the run's
// final flush comes right after its last attempts, whose appends are
// often still in flight or waiting). taken (under runAppends.mu) says who
// sends it; err is its outcome once done is closed.
type laneFlush struct {
	in    execution.AppendEventsInput
	taken bool
	done  chan struct{}
	err   error
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

// togetherAppender appends requests of one run in one transaction, in
// order (appendGroups).
type togetherAppender interface {
	AppendTogether(ctx context.Context, reqs []store.AppendRequest) []error
}

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
	r.events, r.carried, r.together = g, g, g
	return r
}

// join returns the run's lane, offering b (nil for a flush) to it as a
// waiting batch.
func (r *runAppends) join(k runKey, b *execution.EventBatch) *appendLane {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lanes[k]
	if l == nil {
		l = &appendLane{sem: make(chan struct{}, 1)}
		r.lanes[k] = l
	}
	l.users++
	if b != nil {
		l.waiting = append(l.waiting, b)
	}
	return l
}

// leave takes b (nil for a flush) out of the lane.
func (r *runAppends) leave(k runKey, l *appendLane, b *execution.EventBatch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b != nil {
		if i := slices.Index(l.waiting, b); i >= 0 {
			l.waiting = slices.Delete(l.waiting, i, i+1)
		}
	}
	if l.users--; l.users == 0 {
		delete(r.lanes, k)
	}
}

// waitingBatches is a copy of the batches in l.
func (r *runAppends) waitingBatches(l *appendLane) []*execution.EventBatch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(l.waiting)
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
	defer r.leave(k, l, b)
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
	send := coalesced(b, r.waitingBatches(l), known)
	pending := unappended(send, known)
	after := send.After
	if after <= known {
		after = 0 // this process committed the events it follows
	}
	req := store.AppendRequest{TenantID: tenantID, RunID: runID, Events: pending, Update: send.Run, After: after, Through: send.Through}
	if f := r.takeFlush(l, send); f != nil {
		return r.sendWithFlush(ctx, req, f, known)
	}
	if len(pending) > 0 || send.Run != nil {
		if err := r.carried.AppendCarried(ctx, req); err != nil {
			return err
		}
	}
	r.appended.record(tenantID, runID, send.Through)
	return nil
}

// takeFlush returns the run's first waiting flush, marked taken, when a
// carried append about to send send may take it along: with a together
// appender, and when send holds every carried batch waiting (else one
// left behind would follow the flush with its own check, which the flush,
// never vouching, does not satisfy).
func (r *runAppends) takeFlush(l *appendLane, send *execution.EventBatch) *laneFlush {
	if r.together == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range l.waiting {
		if w.Through > send.Through {
			return nil
		}
	}
	for _, f := range l.flushes {
		if !f.taken {
			f.taken = true
			return f
		}
	}
	return nil
}

// sendWithFlush sends a carried request and then flush f in one
// transaction, and gives f its outcome. The flush sends what it would in
// its own turn (flushEvents: less what is known committed before this
// transaction, not less the carried request's events, which the store may
// yet refuse as a gap; any it holds twice are skipped by key).
func (r *runAppends) sendWithFlush(ctx context.Context, req store.AppendRequest, f *laneFlush, known int) error {
	var reqs []store.AppendRequest
	carried := len(req.Events) > 0 || req.Update != nil
	if carried {
		reqs = append(reqs, req)
	}
	events, skip := flushEvents(f.in, known)
	if !skip {
		reqs = append(reqs, store.AppendRequest{TenantID: f.in.TenantID, RunID: f.in.RunID, Events: events, Update: f.in.Run})
	}
	var errs []error
	if len(reqs) > 0 {
		errs = r.together.AppendTogether(ctx, reqs)
	}
	if !skip {
		f.err = errs[len(errs)-1]
	}
	close(f.done)
	if carried && errs[0] != nil {
		return errs[0]
	}
	r.appended.record(req.TenantID, req.RunID, req.Through)
	return nil
}

// coalesced is what a carried batch b sends in its turn, given the run's
// waiting batches (b among them) and the ordinal known committed: the
// earliest waiting batch not known committed merged with each later one
// in the order of their ordinals (merged), when that chain holds b; else b
// merged so with the batches after it. One append so takes every batch
// that continues the one before it. From interpreter version 7 each
// attempt carries only its own events (a suffix of the one before), so
// under load a chain's attempts left a queue of suffixes behind the run's
// append in flight; with only the latest considered (which follows the
// one before it, not b) each was sent in a commit of its own, one after
// the other, and the run's final flush waited behind all of them.
//
// It sorts waiting in place.
func coalesced(b *execution.EventBatch, waiting []*execution.EventBatch, known int) *execution.EventBatch {
	slices.SortStableFunc(waiting, func(x, y *execution.EventBatch) int { return cmp.Compare(x.Through, y.Through) })
	chain := func(send *execution.EventBatch) *execution.EventBatch {
		for _, w := range waiting {
			send = merged(send, w)
		}
		return send
	}
	for _, w := range waiting {
		if w.Through <= known {
			continue
		}
		if w != b && w.Through < b.Through {
			if send := chain(w); send.Through >= b.Through {
				return send
			}
		}
		break
	}
	return chain(b)
}

// merged is what a carried batch b sends in its turn, given a later
// waiting batch: the latest when it holds the whole unconfirmed
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
	if skip < 0 {
		return b // latest does not hold the events between them
	}
	events := make([]execution.EventDraft, 0, len(b.Events)+len(latest.Events)-skip)
	events = append(append(events, b.Events...), latest.Events[skip:]...)
	run := latest.Run
	if run == nil {
		run = b.Run
	}
	return &execution.EventBatch{Events: events, Run: run, Through: latest.Through, After: b.After}
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
//
// When carried appends of the run wait for the turn ahead of the flush,
// the one that gets it may take the flush along (laneFlush): the same
// request, sent right after its own in its transaction, so the flush
// shares that commit instead of waiting for it and then committing alone.
func (r *runAppends) Flush(ctx context.Context, in execution.AppendEventsInput) error {
	k := runKey{in.TenantID, in.RunID}
	f := &laneFlush{in: in, done: make(chan struct{})}
	l := r.join(k, nil)
	r.mu.Lock()
	l.flushes = append(l.flushes, f)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if i := slices.Index(l.flushes, f); i >= 0 {
			l.flushes = slices.Delete(l.flushes, i, i+1)
		}
		r.mu.Unlock()
		r.leave(k, l, nil)
	}()
	select {
	case l.sem <- struct{}{}:
	case <-f.done: // a carried append took it along
		return f.err
	case <-ctx.Done():
		// Taken along or not, it gives up: what it sent may still
		// commit; sent again, its events are skipped by key.
		r.mu.Lock()
		f.taken = true // nobody takes it now
		r.mu.Unlock()
		return ctx.Err()
	}
	defer func() { <-l.sem }()
	r.mu.Lock()
	taken := f.taken
	f.taken = true
	r.mu.Unlock()
	if taken {
		// Taken along by the append that had the turn before, which
		// closed done before it gave the turn back.
		<-f.done
		return f.err
	}
	events, skip := flushEvents(in, r.appended.through(in.TenantID, in.RunID))
	if skip {
		return nil
	}
	return r.events.AppendEvents(ctx, in.TenantID, in.RunID, events, in.Run)
}

// flushEvents is what a flush sends given the ordinal known committed:
// from interpreter version 4 (a flush naming its last ordinal) its events
// after known, else all of them; skip when that is nothing and it has no
// run update either.
func flushEvents(in execution.AppendEventsInput, known int) (events []execution.EventDraft, skip bool) {
	if in.Through <= 0 {
		return in.Events, false
	}
	events = unappended(&execution.EventBatch{Events: in.Events, Through: in.Through}, known)
	return events, len(events) == 0 && in.Run == nil
}
