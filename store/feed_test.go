package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// waitWake waits for a wake-up on ch, failing the test after a generous
// deadline (the machine may be loaded).
func waitWake(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("no wake-up for %s within 30 s", what)
	}
}

// TestEventFeed: an append wakes the run's subscribers (and only them),
// through PostgreSQL notifications; a killed listener connection
// reconnects and wakes every subscriber, since notifications sent while it
// was away are lost.
func TestEventFeed(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	feed := st.NewEventFeed(nil)
	done := make(chan error, 1)
	go func() { done <- feed.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for !feed.Connected() {
		require.False(t, time.Now().After(deadline), "the feed did not connect within 30 s")
		time.Sleep(10 * time.Millisecond)
	}

	a, b := createRun(t, st, "t1"), createRun(t, st, "t1")
	wakeA, cancelA := feed.Subscribe(a.RunID)
	defer cancelA()
	wakeB, cancelB := feed.Subscribe(b.RunID)
	defer cancelB()
	drain := func(ch <-chan struct{}) {
		select {
		case <-ch:
		default:
		}
	}
	// Appends notify only watched runs (migration 00027): wait for both
	// watches, whose commit wakes the runs' subscribers once.
	for !feed.Watching(a.RunID) || !feed.Watching(b.RunID) {
		require.False(t, time.Now().After(deadline), "the feed did not watch the runs within 30 s")
		time.Sleep(10 * time.Millisecond)
	}
	drain(wakeA) // the connection's own wake-all and the watches' wake-ups
	drain(wakeB)

	require.NoError(t, st.AppendEvents(ctx, "t1", a.RunID, []execution.EventDraft{draft("a1", execution.EventRunStarted, "")}, nil))
	waitWake(t, wakeA, "run a's append")
	// A second append to a is notified too; b heard of neither. A
	// notification is delivered in order with the others on the one
	// connection, so b having none after a's second one arrived is final.
	require.NoError(t, st.AppendEvents(ctx, "t1", a.RunID, []execution.EventDraft{draft("a2", execution.EventNodeStarted, "")}, nil))
	waitWake(t, wakeA, "run a's second append")
	select {
	case <-wakeB:
		t.Fatal("run b was woken by run a's events")
	default:
	}
	require.NoError(t, st.AppendEvents(ctx, "t1", b.RunID, []execution.EventDraft{draft("b1", execution.EventRunStarted, "")}, nil))
	waitWake(t, wakeB, "run b's append")

	// Kill the listener's backend: the feed reconnects and wakes everyone.
	_, err := st.Pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = 'weft-listener' AND datname = current_database()`)
	require.NoError(t, err)
	waitWake(t, wakeA, "run a after the listener reconnected")
	waitWake(t, wakeB, "run b after the listener reconnected")
	deadline = time.Now().Add(30 * time.Second)
	for !feed.Connected() {
		require.False(t, time.Now().After(deadline), "the feed did not reconnect")
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, st.AppendEvents(ctx, "t1", b.RunID, []execution.EventDraft{draft("b2", execution.EventNodeStarted, "")}, nil))
	waitWake(t, wakeB, "run b's append after the reconnection")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "Run returned")
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30 s of its context ending")
	}
}

// TestAppendsNotifyOnlyWatchedRuns: since migration 00027 an append
// notifies EventsChannel only when a feed watches its run (a notifying
// commit holds PostgreSQL's cluster-wide notify lock through its WAL
// flush, which serialised every append's commit); a run's watch is
// committed before its subscribers are woken, after which its appends
// notify; a lapsed lease stops them, and a run nobody subscribes to any
// more is no longer watched.
func TestAppendsNotifyOnlyWatchedRuns(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, st.Pool.Config().ConnConfig)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "LISTEN "+store.EventsChannel)
	require.NoError(t, err)
	next := func() string {
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		n, err := conn.WaitForNotification(wctx)
		require.NoError(t, err)
		return n.Payload
	}

	feed := st.NewEventFeed(nil)
	done := make(chan error, 1)
	go func() { done <- feed.Run(ctx) }()
	quiet, streamed := createRun(t, st, "t1"), createRun(t, st, "t1")
	wake, unsubscribe := feed.Subscribe(streamed.RunID)
	waitWake(t, wake, "the watch's registration or the listener's connection")
	deadline := time.Now().Add(30 * time.Second)
	for !feed.Watching(streamed.RunID) {
		require.False(t, time.Now().After(deadline), "the feed did not watch the run within 30 s")
		time.Sleep(10 * time.Millisecond)
	}
	require.False(t, feed.Watching(quiet.RunID))

	// Notifications arrive in commit order: the streamed run's being the
	// next one means the quiet run's append (committed first) sent none.
	require.NoError(t, st.AppendEvents(ctx, "t1", quiet.RunID, []execution.EventDraft{draft("q1", execution.EventRunStarted, "")}, nil))
	require.NoError(t, st.AppendEvents(ctx, "t1", streamed.RunID, []execution.EventDraft{draft("s1", execution.EventRunStarted, "")}, nil))
	require.Equal(t, streamed.RunID, next(), "the first notification")
	waitWake(t, wake, "the streamed run's append")

	// A lapsed lease (a crashed process) notifies no more: the quiet run's
	// notification, under a watch of another holder, comes next.
	_, err = st.Pool.Exec(ctx, `UPDATE run_event_watches SET expires_at = now() - interval '1 second'`)
	require.NoError(t, err)
	require.NoError(t, st.AppendEvents(ctx, "t1", streamed.RunID, []execution.EventDraft{draft("s2", execution.EventNodeStarted, "")}, nil))
	_, err = st.Pool.Exec(ctx, `INSERT INTO run_event_watches (run_id, holder_id, expires_at) VALUES ($1, 'other', now() + interval '1 minute')`, quiet.RunID)
	require.NoError(t, err)
	require.NoError(t, st.AppendEvents(ctx, "t1", quiet.RunID, []execution.EventDraft{draft("q2", execution.EventNodeStarted, "")}, nil))
	require.Equal(t, quiet.RunID, next(), "the notification after the lapsed lease")
	_, err = st.Pool.Exec(ctx, `DELETE FROM run_event_watches WHERE holder_id = 'other'`)
	require.NoError(t, err)

	// The last subscriber leaving removes the watch.
	unsubscribe()
	deadline = time.Now().Add(30 * time.Second)
	for feed.Watching(streamed.RunID) {
		require.False(t, time.Now().After(deadline), "the watch was not removed within 30 s")
		time.Sleep(10 * time.Millisecond)
	}
	var rows int
	require.NoError(t, st.Pool.QueryRow(ctx, `SELECT count(*) FROM run_event_watches`).Scan(&rows))
	require.Zero(t, rows)
	require.NoError(t, st.AppendEvents(ctx, "t1", streamed.RunID, []execution.EventDraft{draft("s4", execution.EventNodeStarted, "")}, nil))
	require.NoError(t, st.AppendEvents(ctx, "t1", quiet.RunID, []execution.EventDraft{draft("q3", execution.EventNodeStarted, "")}, nil))
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer wcancel()
	n, err := conn.WaitForNotification(wctx)
	require.Error(t, err, "a notification for an unwatched run: %+v", n)

	cancel()
	require.NoError(t, <-done)
}

// Watch rows of a process that is gone (its lease ended long ago) are
// removed; a live feed's rows, and one whose lease only just ended (its
// holder may renew it), stay.
func TestLapsedWatchesArePurged(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	for holder, expires := range map[string]string{"live": "now() + interval '1 minute'",
		"just-lapsed": "now() - interval '1 minute'", "gone": "now() - interval '2 hours'"} {
		_, err := st.Pool.Exec(ctx, `INSERT INTO run_event_watches (run_id, holder_id, expires_at) VALUES ($1, $2, `+expires+`)`,
			run.RunID, holder)
		require.NoError(t, err)
	}
	require.NoError(t, store.PurgeLapsedWatches(ctx, st))
	rows, err := st.Pool.Query(ctx, `SELECT holder_id FROM run_event_watches ORDER BY holder_id`)
	require.NoError(t, err)
	holders, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"just-lapsed", "live"}, holders)
}

func TestRunProgress(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	p, err := st.RunProgress(ctx, "t1", run.RunID)
	require.NoError(t, err, "progress = %+v,", p)
	require.Equal(t, int64(0), p.LastSeq, "progress = %+v, %v", p, err)
	require.Equal(t, execution.StatusQueued, p.Status, "progress = %+v, %v", p, err)
	require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{
		draft("k1", execution.EventRunStarted, ""), draft("k2", execution.EventRunSucceeded, ""),
	}, &execution.RunUpdate{Status: execution.StatusSucceeded}))
	p, err = st.RunProgress(ctx, "t1", run.RunID)
	require.NoError(t, err, "progress = %+v,", p)
	require.Equal(t, int64(2), p.LastSeq, "progress = %+v, %v", p, err)
	require.Equal(t, execution.StatusSucceeded, p.Status, "progress = %+v, %v", p, err)
	require.False(t, p.EventsDeleted, "events deleted before retention ran")
	_, err = st.Pool.Exec(ctx, `UPDATE runs SET finished_at = now() - interval '2 days' WHERE run_id = $1`, run.RunID)
	require.NoError(t, err)
	_, err = st.DeleteEventsOfRunsClosedBefore(ctx, time.Now().Add(-24*time.Hour))
	require.NoError(t, err)
	p, err = st.RunProgress(ctx, "t1", run.RunID)
	require.NoError(t, err, "progress after retention = %+v,", p)
	require.True(t, p.EventsDeleted, "progress after retention = %+v, %v", p, err)
	require.Equal(t, int64(2), p.LastSeq, "progress after retention = %+v, %v", p, err)
	_, err = st.RunProgress(ctx, "t2", run.RunID)
	require.ErrorIs(t, err, failure.ErrNotFound, "another tenant's run: %v", err)
}
