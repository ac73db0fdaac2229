package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// recorder is a subscriber that records what it is told.
type recorder struct {
	connected chan struct{}
	notes     chan string
	lost      chan error
}

func newRecorder() *recorder {
	return &recorder{connected: make(chan struct{}, 16), notes: make(chan string, 64), lost: make(chan error, 16)}
}

func (r *recorder) subscriber(channel string) store.Subscriber {
	return store.Subscriber{
		Channel:   channel,
		Connected: func() { r.connected <- struct{}{} },
		Notified:  func(p string) { r.notes <- p },
		Lost:      func(err error) { r.lost <- err },
	}
}

// listen subscribes r on channel until the returned cancel; cancel waits
// for Listen to return.
func (r *recorder) listen(st *store.Store, channel string) (cancel func()) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		st.Listen(ctx, r.subscriber(channel))
	}()
	return func() { stop(); <-done }
}

func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("nothing for %s within 30 s", what)
		var zero T
		return zero
	}
}

func requireNone[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s: got %v", what, v)
	default:
	}
}

func notify(t *testing.T, st *store.Store, channel, payload string) {
	t.Helper()
	_, err := st.Pool.Exec(context.Background(), `SELECT pg_notify($1, $2)`, channel, payload)
	require.NoError(t, err)
}

// listeners counts the database's listening connections of weft.
func listeners(t *testing.T, st *store.Store) int {
	t.Helper()
	var n int
	require.NoError(t, st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND datname = current_database()`, store.ListenerApplicationName).Scan(&n))
	return n
}

// TestListenerDispatchesByChannel: subscribers of several channels share
// one connection, and a notification reaches the subscribers of its
// channel only; a subscriber that leaves is told Lost and hears nothing
// more; the last one to leave closes the connection.
func TestListenerDispatchesByChannel(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	a1, a2, b := newRecorder(), newRecorder(), newRecorder()
	stopA1 := a1.listen(st, "weft_test_a")
	defer stopA1()
	stopB := b.listen(st, "weft_test_b")
	defer stopB()
	waitFor(t, a1.connected, "a1 connecting")
	waitFor(t, b.connected, "b connecting")
	// A subscriber joining a live connection (its channel already heard).
	stopA2 := a2.listen(st, "weft_test_a")
	waitFor(t, a2.connected, "a2 connecting")
	require.Equal(t, 1, listeners(t, st), "one listening connection for every subscriber")

	notify(t, st, "weft_test_a", "x")
	require.Equal(t, "x", waitFor(t, a1.notes, "a1 hearing x"))
	require.Equal(t, "x", waitFor(t, a2.notes, "a2 hearing x"))
	notify(t, st, "weft_test_b", "y")
	require.Equal(t, "y", waitFor(t, b.notes, "b hearing y"))
	// Notifications are dispatched in order from one connection: once b
	// heard y, a1 and a2 would have heard it before, had it been theirs.
	requireNone(t, a1.notes, "a1 after b's notification")
	requireNone(t, a2.notes, "a2 after b's notification")
	requireNone(t, b.notes, "b after a's notification")
	notify(t, st, "weft_test_other", "z")

	stopA2()
	require.ErrorIs(t, waitFor(t, a2.lost, "a2 leaving"), context.Canceled)
	notify(t, st, "weft_test_a", "w")
	require.Equal(t, "w", waitFor(t, a1.notes, "a1 hearing w"))
	requireNone(t, a2.notes, "a2 after it left")
	requireNone(t, a1.lost, "a1 when a2 left")
	requireNone(t, b.lost, "b when a2 left")

	stopA1()
	stopB()
	deadline := time.Now().Add(30 * time.Second)
	for listeners(t, st) != 0 {
		require.False(t, time.Now().After(deadline), "the listening connection outlived its last subscriber")
		time.Sleep(10 * time.Millisecond)
	}
	// A new subscriber opens a new connection.
	c := newRecorder()
	stopC := c.listen(st, "weft_test_b")
	defer stopC()
	waitFor(t, c.connected, "c connecting after the connection closed")
	notify(t, st, "weft_test_b", "v")
	require.Equal(t, "v", waitFor(t, c.notes, "c hearing v"))
}

// TestListenerLostTellsEverySubscriber: a dropped connection tells every
// subscriber Lost, then Connected once it is listening again (each
// catches up as with a connection of its own), and notifications flow
// again.
func TestListenerLostTellsEverySubscriber(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	channels := []string{store.EventsChannel, store.SlotsChannel, store.RevocationsChannel}
	recs := make([]*recorder, len(channels))
	for i, ch := range channels {
		recs[i] = newRecorder()
		defer recs[i].listen(st, ch)()
	}
	for i, r := range recs {
		waitFor(t, r.connected, channels[i]+" connecting")
	}
	require.Equal(t, 1, listeners(t, st))

	_, err := st.Pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = $1 AND datname = current_database()`, store.ListenerApplicationName)
	require.NoError(t, err)
	for i, r := range recs {
		err := waitFor(t, r.lost, channels[i]+" losing the connection")
		require.Error(t, err)
		require.False(t, errors.Is(err, context.Canceled), "%s: lost with %v", channels[i], err)
		waitFor(t, r.connected, channels[i]+" reconnecting")
	}
	require.Equal(t, 1, listeners(t, st))
	for i, r := range recs {
		notify(t, st, channels[i], "after-"+channels[i])
		require.Equal(t, "after-"+channels[i], waitFor(t, r.notes, channels[i]+" hearing after the reconnection"))
	}
}
