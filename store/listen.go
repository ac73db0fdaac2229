package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reconnection backoff of every listener.
const (
	feedRetryMin = 100 * time.Millisecond
	feedRetryMax = 5 * time.Second
)

// errFeedWasHealthy marks a listener that had been connected before it
// failed, so the next reconnection starts from the shortest delay.
var errFeedWasHealthy = errors.New("store: listener lost after listening")

// listener is one LISTEN on a connection of its own (outside the pool, so
// a busy pool never delays a notification), held until ctx ends and
// re-established with backoff. The event feed, the slot feed and the
// revocation feed are each one. PostgreSQL drops notifications sent while
// nobody listens: connected runs after every (re)connection so the owner
// can catch up on what it may have missed. Callbacks run on the listener's
// goroutine and must not block.
type listener struct {
	config    *pgx.ConnConfig
	channel   string
	log       *slog.Logger
	connected func()
	notified  func(payload string)
	// lost, when set, runs after the connection failed or ctx ended.
	lost func(err error)
}

// newListener listens on channel with the store's connection settings;
// application names the connection in pg_stat_activity.
func (s *Store) newListener(logger *slog.Logger, application, channel string) listener {
	if logger == nil {
		logger = slog.Default()
	}
	cfg := s.Pool.Config().ConnConfig.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = application
	return listener{config: cfg, channel: channel, log: logger}
}

// run listens until ctx ends.
func (l listener) run(ctx context.Context) {
	delay := feedRetryMin
	for {
		err := l.listenOnce(ctx)
		if l.lost != nil {
			l.lost(err)
		}
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("listener lost; reconnecting", "channel", l.channel, "err", err, "in", delay.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, feedRetryMax)
		if errors.Is(err, errFeedWasHealthy) {
			delay = feedRetryMin
		}
	}
}

// listenOnce holds one connection listening until it fails or ctx ends.
func (l listener) listenOnce(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, l.config)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if l.connected != nil {
		l.connected()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return errors.Join(errFeedWasHealthy, err)
		}
		l.notified(n.Payload)
	}
}
