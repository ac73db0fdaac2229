package store

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
)

// EventsChannel is the PostgreSQL notification channel AppendEvents
// notifies, with the run id as payload, in the transaction that appends a
// run's events (so a notification arrives only after its events commit).
// Since migration 00027 only runs an EventFeed watches are notified: a
// notifying commit holds PostgreSQL's cluster-wide notify lock through its
// WAL flush, so notifying every append serialised every append's commit.
const EventsChannel = "weft_run_events"

// watchLease is how long a run's watch (run_event_watches) makes appends
// notify without being renewed: a crashed process's watches lapse after
// it. The feed renews its watches every watchLease/3.
const watchLease = time.Minute

// EventFeed turns notifications on EventsChannel into wake-ups of the
// subscribers of one run: the process's one listening connection
// (Store.Listener), fanned out in memory to every open event stream. A wake-up says only "this run
// may have new events"; subscribers read the events from the store by seq,
// so a coalesced, lost or duplicated notification never loses or repeats an
// event. Notifications sent while the listener is disconnected are lost:
// every (re)connection wakes every subscriber, and subscribers also re-read
// on a timer of their own as a safety net.
//
// Appends notify only the runs some feed watches (migration 00027): the
// feed registers a run in run_event_watches when its first subscriber
// comes, renews the lease while any stays, removes it when the last one
// leaves, and wakes a run's subscribers once its watch is committed (an
// append that committed before it did not notify).
type EventFeed struct {
	store  *Store
	logger *slog.Logger
	holder string        // this feed's rows of run_event_watches
	kick   chan struct{} // the subscribed runs changed

	mu        sync.Mutex
	subs      map[string]map[chan struct{}]struct{}
	watched   map[string]bool // runs whose watch is committed
	connected bool
}

// NewEventFeed returns a feed listening on the store's database through
// the store's listener (Store.Listener). Run it with Run.
func (s *Store) NewEventFeed(logger *slog.Logger) *EventFeed {
	if logger == nil {
		logger = slog.Default()
	}
	return &EventFeed{store: s, logger: logger, holder: uuid.NewString(), kick: make(chan struct{}, 1),
		subs: map[string]map[chan struct{}]struct{}{}, watched: map[string]bool{}}
}

// Subscribe registers interest in runID's events. The channel receives a
// value (coalesced: it holds at most one) whenever events of the run may
// have been appended; cancel unregisters it and must be called.
func (f *EventFeed) Subscribe(runID string) (wake <-chan struct{}, cancel func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	set := f.subs[runID]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		f.subs[runID] = set
		signal(f.kick) // a run to watch
	}
	set[ch] = struct{}{}
	f.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			delete(f.subs[runID], ch)
			if len(f.subs[runID]) == 0 {
				delete(f.subs, runID)
				signal(f.kick) // a watch to drop
			}
		})
	}
}

// Connected reports whether the listener is connected and listening.
func (f *EventFeed) Connected() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connected
}

// Run listens until ctx is done, reconnecting with backoff after a lost
// connection. It returns nil when ctx ends.
func (f *EventFeed) Run(ctx context.Context) error {
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		f.maintainWatches(ctx)
	}()
	defer func() { <-watching }()
	f.store.Listen(ctx, Subscriber{
		Channel: EventsChannel,
		Logger:  f.logger,
		Connected: func() {
			f.setConnected(true)
			// Anything appended while no listener was connected was not notified.
			f.wakeAll()
		},
		Notified: f.wake,
		Lost:     func(error) { f.setConnected(false) },
	})
	return nil
}

// maintainWatches keeps this feed's rows of run_event_watches in line
// with its subscribed runs until ctx ends, then removes them. A failed
// sync is retried at the next change or renewal; meanwhile streams of an
// unregistered run rely on their own re-read timer, as when the listener
// is away.
func (f *EventFeed) maintainWatches(ctx context.Context) {
	renew := time.NewTicker(watchLease / 3)
	defer renew.Stop()
	for {
		if err := f.syncWatches(ctx); err != nil && ctx.Err() == nil {
			f.logger.Warn("event feed: watching runs failed; streams re-read on their timer", "err", err)
		}
		select {
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = f.store.Pool.Exec(cctx, `DELETE FROM run_event_watches WHERE holder_id = $1`, f.holder)
			cancel()
			return
		case <-f.kick:
		case <-renew.C:
			if err := f.store.purgeLapsedWatches(ctx); err != nil && ctx.Err() == nil {
				f.logger.Warn("event feed: removing lapsed watches failed", "err", err)
			}
		}
	}
}

// lapsedWatchAge is how long past its lease a watch row stays: a live
// feed renews its rows every watchLease/3, so a row this old belongs to a
// process that is gone (crashed before removing its rows) and only takes
// room, since every process starts with a holder id of its own.
const lapsedWatchAge = time.Hour

// purgeLapsedWatches deletes the watch rows whose lease ended more than
// lapsedWatchAge ago, whoever held them. It runs on its own, outside any
// feed's sync, and touches no row a live feed renews, so it never waits
// on one.
func (s *Store) purgeLapsedWatches(ctx context.Context) error {
	_, err := s.Pool.Exec(ctx, `DELETE FROM run_event_watches WHERE expires_at < now() - $1::bigint * interval '1 millisecond'`,
		lapsedWatchAge.Milliseconds())
	return err
}

// syncWatches registers the subscribed runs not yet watched, renews the
// others' lease and removes the runs nobody subscribes to any more, in
// one transaction; then it wakes the newly watched runs' subscribers. A
// new run's row is locked FOR SHARE first, so the watch commits after any
// append holding the row and every later append sees it (migration 00027).
func (f *EventFeed) syncWatches(ctx context.Context) error {
	f.mu.Lock()
	var wanted, added, gone []string
	for runID := range f.subs {
		wanted = append(wanted, runID)
		if !f.watched[runID] {
			added = append(added, runID)
		}
	}
	for runID := range f.watched {
		if f.subs[runID] == nil {
			gone = append(gone, runID)
		}
	}
	f.mu.Unlock()
	if len(wanted) == 0 && len(gone) == 0 {
		return nil
	}
	slices.Sort(added) // lock rows in one order
	tx, err := f.store.Pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if len(added) > 0 {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM runs WHERE run_id = ANY($1) ORDER BY run_id FOR SHARE`, added); err != nil {
			return err
		}
	}
	if len(wanted) > 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO run_event_watches (run_id, holder_id, expires_at)
			SELECT r.run_id, $2, now() + $3::bigint * interval '1 millisecond' FROM runs r WHERE r.run_id = ANY($1)
			ON CONFLICT (run_id, holder_id) DO UPDATE SET expires_at = EXCLUDED.expires_at`,
			wanted, f.holder, watchLease.Milliseconds()); err != nil {
			return err
		}
	}
	if len(gone) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM run_event_watches WHERE holder_id = $1 AND run_id = ANY($2)`, f.holder, gone); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, runID := range gone {
		delete(f.watched, runID)
	}
	for _, runID := range added {
		f.watched[runID] = true
		// Appends that committed before the watch did not notify.
		for ch := range f.subs[runID] {
			signal(ch)
		}
	}
	return nil
}

func (f *EventFeed) setConnected(v bool) {
	f.mu.Lock()
	f.connected = v
	f.mu.Unlock()
}

// wake signals every subscriber of runID without blocking.
func (f *EventFeed) wake(runID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs[runID] {
		signal(ch)
	}
}

// wakeAll signals every subscriber of every run.
func (f *EventFeed) wakeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, set := range f.subs {
		for ch := range set {
			signal(ch)
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// RunProgress is how far a run's event log has got: its last seq and its
// status (terminal statuses are final, and the terminal event is appended
// in the same transaction).
type RunProgress struct {
	LastSeq int64
	Status  string
	// EventsDeleted: retention deleted the (closed) run's events; none
	// will be read again.
	EventsDeleted bool
}

// RunProgress returns the run's last seq and status. A run of another
// tenant is failure.ErrNotFound.
func (s *Store) RunProgress(ctx context.Context, tenantID, runID string) (RunProgress, error) {
	var p RunProgress
	err := s.Pool.QueryRow(ctx, `SELECT last_seq, status, events_deleted_at IS NOT NULL FROM runs WHERE run_id = $1 AND tenant_id = $2`,
		runID, tenantID).Scan(&p.LastSeq, &p.Status, &p.EventsDeleted)
	if err != nil {
		return RunProgress{}, fmt.Errorf("store: run progress of %s: %w", runID, notFound(err))
	}
	return p, nil
}
