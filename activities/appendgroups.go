package activities

import (
	"context"
	"sync"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/store"
)

// maxAppendGroup bounds the runs one group commit carries: a statement
// each in one pipeline, so far more than a worker's attempts in flight
// would make one transaction hold many run locks for long.
const maxAppendGroup = 64

// groupAppender appends several runs' events in one transaction (store.Store).
type groupAppender interface {
	AppendEventsGroup(ctx context.Context, reqs []store.AppendRequest) []error
}

var _ groupAppender = (*store.Store)(nil)

// appendGroups commits the carried appends of different runs that wait at
// the same time together: one transaction, one commit, one WAL flush for
// all of them (store.AppendEventsGroup). Each attempt of a run used to
// commit its carried events on its own, so a worker with many runs in
// flight made PostgreSQL do a commit (a round trip, a transaction, a WAL
// flush wait, a wake-up of this process) per attempt; with a chain of ten
// that is ten or more per run, on the cores the dev server and the worker
// need too.
//
// One group is in flight at a time: an append that arrives while none is
// goes out at once, alone (no added wait on an idle worker); those that
// arrive while one is in flight go out together as the next. Nothing about
// a run's log changes: each run's part is the same statement as alone
// (its row lock, keys, hash chain), appends of one run still take turns
// (runAppends), and each request learns its own outcome.
type appendGroups struct {
	store groupAppender
	max   int

	mu      sync.Mutex
	waiting []*groupedAppend
	leading bool // a goroutine is sending groups
}

// groupedAppend is one caller's appends waiting for, or in, a group:
// one request, or several of one run that must share a commit
// (AppendTogether).
type groupedAppend struct {
	ctx  context.Context
	reqs []store.AppendRequest
	done chan struct{}
	errs []error
}

func newAppendGroups(st groupAppender, max int) *appendGroups {
	return &appendGroups{store: st, max: max}
}

// AppendEvents appends one run's carried events in the next group and
// returns its outcome; it gives up waiting with ctx (the events may still
// be committed: the interpreter carries them again and keys skip them).
func (g *appendGroups) AppendEvents(ctx context.Context, tenantID, runID string, events []execution.EventDraft, upd *execution.RunUpdate) error {
	return g.AppendCarried(ctx, store.AppendRequest{TenantID: tenantID, RunID: runID, Events: events, Update: upd})
}

// AppendCarried is AppendEvents with the batch's ordinals (a suffix's
// check, the vouch): the request as the group sends it.
func (g *appendGroups) AppendCarried(ctx context.Context, r store.AppendRequest) error {
	return g.AppendTogether(ctx, []store.AppendRequest{r})[0]
}

// AppendTogether appends reqs in the next group, in their order and never
// split between two groups, so they share one transaction and its commit
// (store.AppendEventsGroup: all commit or none, or each on its own in
// order after a failure of the whole), and returns each one's outcome.
func (g *appendGroups) AppendTogether(ctx context.Context, reqs []store.AppendRequest) []error {
	a := &groupedAppend{ctx: ctx, done: make(chan struct{}), reqs: reqs}
	g.mu.Lock()
	g.waiting = append(g.waiting, a)
	lead := !g.leading
	g.leading = true
	g.mu.Unlock()
	if lead {
		go g.lead(context.WithoutCancel(ctx))
	}
	select {
	case <-a.done:
		return a.errs
	case <-ctx.Done():
		errs := make([]error, len(reqs))
		for i := range errs {
			errs[i] = ctx.Err()
		}
		return errs
	}
}

// lead sends groups until nobody waits. ctx carries the first request's
// values; each group is bounded by carriedAppendTimeout, so a waiter is
// never held longer than a carried append would be alone.
func (g *appendGroups) lead(ctx context.Context) {
	for {
		g.mu.Lock()
		n := min(len(g.waiting), g.max)
		if n == 0 {
			g.leading = false
			g.mu.Unlock()
			return
		}
		group := g.waiting[:n:n]
		g.waiting = append([]*groupedAppend(nil), g.waiting[n:]...)
		g.mu.Unlock()
		g.send(ctx, group)
	}
}

// send commits one group; a caller who already gave up is left out.
func (g *appendGroups) send(ctx context.Context, group []*groupedAppend) {
	live := group[:0:0]
	var reqs []store.AppendRequest
	for _, a := range group {
		if err := a.ctx.Err(); err != nil {
			a.errs = make([]error, len(a.reqs))
			for i := range a.errs {
				a.errs[i] = err
			}
			close(a.done)
			continue
		}
		live = append(live, a)
		reqs = append(reqs, a.reqs...)
	}
	if len(live) == 0 {
		return
	}
	gctx, cancel := context.WithTimeout(ctx, carriedAppendTimeout)
	defer cancel()
	errs := g.store.AppendEventsGroup(gctx, reqs)
	for _, a := range live {
		a.errs, errs = errs[:len(a.reqs):len(a.reqs)], errs[len(a.reqs):]
		close(a.done)
	}
}
