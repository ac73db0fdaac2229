package store

import (
	"context"
	"log/slog"
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
	l := s.newListener(logger, slotFeedApplicationName, SlotsChannel)
	l.connected, l.notified = onConnect, wake
	l.run(ctx)
}
