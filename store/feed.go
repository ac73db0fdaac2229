package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// EventsChannel is the PostgreSQL notification channel AppendEvents
// notifies, with the run id as payload, in the transaction that appends a
// run's events (so a notification arrives only after its events commit).
const EventsChannel = "weft_run_events"

// Reconnection backoff of the EventFeed listener.
const (
	feedRetryMin = 100 * time.Millisecond
	feedRetryMax = 5 * time.Second
)

// feedApplicationName marks the listener's connection in pg_stat_activity.
const feedApplicationName = "weft-event-feed"

// EventFeed turns notifications on EventsChannel into wake-ups of the
// subscribers of one run: one listening connection per API process, fanned
// out in memory to every open event stream. A wake-up says only "this run
// may have new events"; subscribers read the events from the store by seq,
// so a coalesced, lost or duplicated notification never loses or repeats an
// event. Notifications sent while the listener is disconnected are lost:
// every (re)connection wakes every subscriber, and subscribers also re-read
// on a timer of their own as a safety net.
type EventFeed struct {
	config *pgx.ConnConfig
	log    *slog.Logger

	mu        sync.Mutex
	subs      map[string]map[chan struct{}]struct{}
	connected bool
}

// NewEventFeed returns a feed listening on the store's database (its own
// connection, outside the pool). Run it with Run.
func (s *Store) NewEventFeed(logger *slog.Logger) *EventFeed {
	if logger == nil {
		logger = slog.Default()
	}
	cfg := s.Pool.Config().ConnConfig.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = feedApplicationName
	return &EventFeed{config: cfg, log: logger, subs: map[string]map[chan struct{}]struct{}{}}
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
	delay := feedRetryMin
	for {
		err := f.listen(ctx)
		f.setConnected(false)
		if ctx.Err() != nil {
			return nil
		}
		f.log.Warn("event feed: listener lost; reconnecting", "err", err, "in", delay.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(delay*2, feedRetryMax)
		if errors.Is(err, errFeedWasHealthy) {
			delay = feedRetryMin
		}
	}
}

// errFeedWasHealthy marks a listener that had been connected before it
// failed, so the next reconnection starts from the shortest delay.
var errFeedWasHealthy = errors.New("event feed: connection lost after listening")

// listen holds one connection listening on EventsChannel until it fails or
// ctx ends.
func (f *EventFeed) listen(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, f.config)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+EventsChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	f.setConnected(true)
	// Anything appended while no listener was connected was not notified.
	f.wakeAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return errors.Join(errFeedWasHealthy, err)
		}
		f.wake(n.Payload)
	}
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
