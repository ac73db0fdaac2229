package store

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// EventsChannel is the PostgreSQL notification channel AppendEvents
// notifies, with the run id as payload, in the transaction that appends a
// run's events (so a notification arrives only after its events commit).
const EventsChannel = "weft_run_events"

// EventFeed turns notifications on EventsChannel into wake-ups of the
// subscribers of one run: the process's one listening connection
// (Store.Listener), fanned out in memory to every open event stream. A wake-up says only "this run
// may have new events"; subscribers read the events from the store by seq,
// so a coalesced, lost or duplicated notification never loses or repeats an
// event. Notifications sent while the listener is disconnected are lost:
// every (re)connection wakes every subscriber, and subscribers also re-read
// on a timer of their own as a safety net.
type EventFeed struct {
	store  *Store
	logger *slog.Logger

	mu        sync.Mutex
	subs      map[string]map[chan struct{}]struct{}
	connected bool
}

// NewEventFeed returns a feed listening on the store's database through
// the store's listener (Store.Listener). Run it with Run.
func (s *Store) NewEventFeed(logger *slog.Logger) *EventFeed {
	return &EventFeed{store: s, logger: logger, subs: map[string]map[chan struct{}]struct{}{}}
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
