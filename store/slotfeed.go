package store

import (
	"context"
	"log/slog"
)

// ListenSlots listens on SlotsChannel through the store's listener
// (Store.Listener) until ctx ends, calling wake with the tenant id of every
// notification: a run of that tenant released a slot while others wait.
// Notifications sent while it is disconnected are lost, so it calls
// onConnect after every (re)connection; it reconnects with backoff. wake
// and onConnect run on the listener's goroutine and must not block.
func (s *Store) ListenSlots(ctx context.Context, logger *slog.Logger, wake func(tenantID string), onConnect func()) {
	s.Listen(ctx, Subscriber{Channel: SlotsChannel, Logger: logger, Connected: onConnect, Notified: wake})
}
