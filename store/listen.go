package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reconnection backoff of the listener.
const (
	feedRetryMin = 100 * time.Millisecond
	feedRetryMax = 5 * time.Second
)

// ListenerApplicationName marks the process's listening connection in
// pg_stat_activity.
const ListenerApplicationName = "weft-listener"

// errFeedWasHealthy marks a connection that had been listening before it
// failed, so the next reconnection starts from the shortest delay.
var errFeedWasHealthy = errors.New("store: listener lost after listening")

// Subscriber is one interest in a notification channel of the process's
// listener (Store.Listen). Callbacks run on the listener's goroutine, one
// at a time across every subscriber of the process, and must not block:
// a slow one delays every feed's notifications.
type Subscriber struct {
	// Channel is the PostgreSQL notification channel.
	Channel string
	// Logger receives the subscriber's reconnection warnings (slog.Default
	// when nil).
	Logger *slog.Logger
	// Connected (may be nil) runs once Channel is LISTENed on a new
	// connection, or at once when the subscriber joins a connection already
	// listening: PostgreSQL drops notifications sent while nobody listens,
	// so the subscriber catches up on what it may have missed.
	Connected func()
	// Notified runs with the payload of each notification on Channel heard
	// since Connected.
	Notified func(payload string)
	// Lost (may be nil) runs when the connection failed (or could not be
	// made), and when the subscriber's context ends: nothing is heard
	// until Connected runs again.
	Lost func(err error)
}

// Listener is a process's one listening connection to PostgreSQL, outside
// the pool (so a busy pool never delays a notification). PostgreSQL
// signals every listening backend of a database on each commit that
// notifies, whatever the channel: one connection LISTENing on every
// channel the process needs costs one backend wake-up per commit, where a
// connection per feed cost one each. It is opened when the first
// subscriber joins, LISTENs on the channels of the subscribers present,
// dispatches each notification to the subscribers of its channel, is
// re-established with backoff after a failure (telling every subscriber
// Lost, then Connected), and is closed when the last subscriber leaves.
type Listener struct {
	config *pgx.ConnConfig

	// dispatch serialises the callbacks and the removal of subscribers, so
	// none runs for a subscriber after its Listen returned.
	dispatch sync.Mutex

	mu   sync.Mutex
	subs map[*subscription]struct{}
	// stop ends the running connection loop (nil when none runs); done is
	// closed when that loop has returned, so loops never overlap.
	stop context.CancelFunc
	done chan struct{}
	// interrupt ends the current wait for a notification, so the loop
	// brings its LISTENs in line with a changed set of subscribers.
	interrupt context.CancelFunc
}

type subscription struct {
	Subscriber
	// live: told Connected on the current connection (guarded by mu).
	live bool
}

// NewListener returns a listener connecting with config (copied; its
// application_name is set to ListenerApplicationName). Store.Listen uses
// the store's own, built from the pool's settings.
func NewListener(config *pgx.ConnConfig) *Listener {
	cfg := config.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = ListenerApplicationName
	return &Listener{config: cfg, subs: map[*subscription]struct{}{}}
}

// Listener returns the store's listener (built on first use), shared by
// every feed of the process that uses this Store.
func (s *Store) Listener() *Listener {
	s.listenerOnce.Do(func() { s.listener = NewListener(s.Pool.Config().ConnConfig) })
	return s.listener
}

// Listen subscribes sub to the store's listener until ctx ends; then sub
// is told Lost(ctx.Err()) and no callback of it runs after Listen returns.
func (s *Store) Listen(ctx context.Context, sub Subscriber) { s.Listener().Listen(ctx, sub) }

// Listen subscribes sub until ctx ends; then sub is told Lost(ctx.Err())
// and no callback of it runs after Listen returns.
func (l *Listener) Listen(ctx context.Context, sub Subscriber) {
	if sub.Logger == nil {
		sub.Logger = slog.Default()
	}
	s := &subscription{Subscriber: sub}
	l.add(s)
	<-ctx.Done()
	l.remove(s, ctx.Err())
}

func (l *Listener) add(s *subscription) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.subs[s] = struct{}{}
	if l.stop != nil {
		if l.interrupt != nil {
			l.interrupt()
		}
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	prev, done := l.done, make(chan struct{})
	l.stop, l.done = stop, done
	go l.loop(ctx, prev, done)
}

func (l *Listener) remove(s *subscription, err error) {
	l.dispatch.Lock()
	defer l.dispatch.Unlock()
	l.mu.Lock()
	delete(l.subs, s)
	switch {
	case len(l.subs) == 0 && l.stop != nil:
		l.stop()
		l.stop = nil
	case l.interrupt != nil:
		l.interrupt() // UNLISTEN a channel nobody needs any more
	}
	l.mu.Unlock()
	if s.Lost != nil {
		s.Lost(err)
	}
}

// loop holds a connection until ctx ends (the last subscriber left),
// reconnecting with backoff.
func (l *Listener) loop(ctx context.Context, prev, done chan struct{}) {
	defer close(done)
	if prev != nil {
		<-prev
	}
	delay := feedRetryMin
	for {
		err := l.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errFeedWasHealthy) {
			delay = feedRetryMin
		}
		l.lost(err, delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, feedRetryMax)
	}
}

// lost tells every subscriber the connection failed.
func (l *Listener) lost(err error, retry time.Duration) {
	l.dispatch.Lock()
	defer l.dispatch.Unlock()
	l.mu.Lock()
	subs := make([]*subscription, 0, len(l.subs))
	for s := range l.subs {
		s.live = false
		subs = append(subs, s)
	}
	l.mu.Unlock()
	for _, s := range subs {
		s.Logger.Warn("listener lost; reconnecting", "channel", s.Channel, "err", err, "in", retry.String())
		if s.Lost != nil {
			s.Lost(err)
		}
	}
}

// session holds one connection until it fails or ctx ends.
func (l *Listener) session(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, l.config)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	listening := map[string]bool{}
	healthy := func(err error) error {
		if len(listening) > 0 {
			return errors.Join(errFeedWasHealthy, err)
		}
		return err
	}
	for {
		wait, err := l.sync(ctx, conn, listening)
		if err != nil {
			return healthy(err)
		}
		for {
			n, err := conn.WaitForNotification(wait)
			if err == nil {
				l.deliver(n.Channel, n.Payload)
				continue
			}
			if ctx.Err() == nil && wait.Err() != nil && !conn.IsClosed() {
				break // interrupted: the subscribers changed
			}
			return healthy(err)
		}
	}
}

// sync LISTENs on the channels of the subscribers present (and UNLISTENs
// the others), tells the subscribers not yet live Connected, and returns
// the context of the next wait, which add and remove cancel.
func (l *Listener) sync(ctx context.Context, conn *pgx.Conn, listening map[string]bool) (context.Context, error) {
	l.mu.Lock()
	wanted := map[string]bool{}
	for s := range l.subs {
		wanted[s.Channel] = true
	}
	wait, interrupt := context.WithCancel(ctx)
	if l.interrupt != nil {
		l.interrupt() // release the previous wait's context
	}
	l.interrupt = interrupt
	l.mu.Unlock()
	for _, ch := range sortedKeys(wanted) {
		if listening[ch] {
			continue
		}
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return nil, fmt.Errorf("listen %s: %w", ch, err)
		}
		listening[ch] = true
	}
	for _, ch := range sortedKeys(listening) {
		if wanted[ch] {
			continue
		}
		if _, err := conn.Exec(ctx, "UNLISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return nil, fmt.Errorf("unlisten %s: %w", ch, err)
		}
		delete(listening, ch)
	}
	l.dispatch.Lock()
	defer l.dispatch.Unlock()
	l.mu.Lock()
	var fresh []*subscription
	for s := range l.subs {
		if !s.live && listening[s.Channel] {
			s.live = true
			fresh = append(fresh, s)
		}
	}
	l.mu.Unlock()
	for _, s := range fresh {
		if s.Connected != nil {
			s.Connected()
		}
	}
	return wait, nil
}

// deliver runs Notified of the live subscribers of channel.
func (l *Listener) deliver(channel, payload string) {
	l.dispatch.Lock()
	defer l.dispatch.Unlock()
	l.mu.Lock()
	var targets []*subscription
	for s := range l.subs {
		if s.live && s.Channel == channel {
			targets = append(targets, s)
		}
	}
	l.mu.Unlock()
	for _, s := range targets {
		s.Notified(payload)
	}
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
