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

// groupedAppend is one carried append waiting for, or in, a group.
type groupedAppend struct {
	ctx  context.Context
	req  store.AppendRequest
	done chan struct{}
	err  error
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
	a := &groupedAppend{ctx: ctx, done: make(chan struct{}), req: r}
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
		return a.err
	case <-ctx.Done():
		return ctx.Err()
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

// send commits one group; a request whose caller already gave up is left
// out.
func (g *appendGroups) send(ctx context.Context, group []*groupedAppend) {
	live := group[:0:0]
	for _, a := range group {
		if err := a.ctx.Err(); err != nil {
			a.err = err
			close(a.done)
			continue
		}
		live = append(live, a)
	}
	if len(live) == 0 {
		return
	}
	reqs := make([]store.AppendRequest, len(live))
	for i, a := range live {
		reqs[i] = a.req
	}
	gctx, cancel := context.WithTimeout(ctx, carriedAppendTimeout)
	defer cancel()
	errs := g.store.AppendEventsGroup(gctx, reqs)
	for i, a := range live {
		a.err = errs[i]
		close(a.done)
	}
}
