package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// slotFeedApplicationName marks the listener's connection in pg_stat_activity.
const slotFeedApplicationName = "weft-slot-feed"

// ListenSlots listens on SlotsChannel on a connection of its own (outside
// the pool) until ctx ends, calling wake with the tenant id of every
// notification: a run of that tenant released a slot while others wait.
// Notifications sent while it is disconnected are lost, so it calls
// onConnect after every (re)connection; it reconnects with backoff. wake
// and onConnect run on the listener's goroutine and must not block.
func (s *Store) ListenSlots(ctx context.Context, logger *slog.Logger, wake func(tenantID string), onConnect func()) {
	if logger == nil {
		logger = slog.Default()
	}
	cfg := s.Pool.Config().ConnConfig.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = slotFeedApplicationName
	delay := feedRetryMin
	for {
		err := listenSlots(ctx, cfg, wake, onConnect)
		if ctx.Err() != nil {
			return
		}
		logger.Warn("slot feed: listener lost; reconnecting", "err", err, "in", delay.String())
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

func listenSlots(ctx context.Context, cfg *pgx.ConnConfig, wake func(string), onConnect func()) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+SlotsChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if onConnect != nil {
		onConnect()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return errors.Join(errFeedWasHealthy, err)
		}
		wake(n.Payload)
	}
}
