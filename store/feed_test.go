package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
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
		if time.Now().After(deadline) {
			t.Fatal("the feed did not connect within 30 s")
		}
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
	drain(wakeA) // the connection's own wake-all may have raced the subscriptions
	drain(wakeB)

	if err := st.AppendEvents(ctx, "t1", a.RunID, []execution.EventDraft{draft("a1", execution.EventRunStarted, "")}, nil); err != nil {
		t.Fatal(err)
	}
	waitWake(t, wakeA, "run a's append")
	// A second append to a is notified too; b heard of neither. A
	// notification is delivered in order with the others on the one
	// connection, so b having none after a's second one arrived is final.
	if err := st.AppendEvents(ctx, "t1", a.RunID, []execution.EventDraft{draft("a2", execution.EventNodeStarted, "")}, nil); err != nil {
		t.Fatal(err)
	}
	waitWake(t, wakeA, "run a's second append")
	select {
	case <-wakeB:
		t.Fatal("run b was woken by run a's events")
	default:
	}
	if err := st.AppendEvents(ctx, "t1", b.RunID, []execution.EventDraft{draft("b1", execution.EventRunStarted, "")}, nil); err != nil {
		t.Fatal(err)
	}
	waitWake(t, wakeB, "run b's append")

	// Kill the listener's backend: the feed reconnects and wakes everyone.
	if _, err := st.Pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = 'weft-event-feed' AND datname = current_database()`); err != nil {
		t.Fatal(err)
	}
	waitWake(t, wakeA, "run a after the listener reconnected")
	waitWake(t, wakeB, "run b after the listener reconnected")
	deadline = time.Now().Add(30 * time.Second)
	for !feed.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("the feed did not reconnect")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := st.AppendEvents(ctx, "t1", b.RunID, []execution.EventDraft{draft("b2", execution.EventNodeStarted, "")}, nil); err != nil {
		t.Fatal(err)
	}
	waitWake(t, wakeB, "run b's append after the reconnection")

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30 s of its context ending")
	}
}

func TestRunProgress(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	p, err := st.RunProgress(ctx, "t1", run.RunID)
	if err != nil || p.LastSeq != 0 || p.Status != execution.StatusQueued {
		t.Fatalf("progress = %+v, %v", p, err)
	}
	if err := st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{
		draft("k1", execution.EventRunStarted, ""), draft("k2", execution.EventRunSucceeded, ""),
	}, &execution.RunUpdate{Status: execution.StatusSucceeded}); err != nil {
		t.Fatal(err)
	}
	if p, err = st.RunProgress(ctx, "t1", run.RunID); err != nil || p.LastSeq != 2 || p.Status != execution.StatusSucceeded {
		t.Fatalf("progress = %+v, %v", p, err)
	}
	if p.EventsDeleted {
		t.Fatal("events deleted before retention ran")
	}
	if _, err := st.Pool.Exec(ctx, `UPDATE runs SET finished_at = now() - interval '2 days' WHERE run_id = $1`, run.RunID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeleteEventsOfRunsClosedBefore(ctx, time.Now().Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if p, err = st.RunProgress(ctx, "t1", run.RunID); err != nil || !p.EventsDeleted || p.LastSeq != 2 {
		t.Fatalf("progress after retention = %+v, %v", p, err)
	}
	if _, err := st.RunProgress(ctx, "t2", run.RunID); !errors.Is(err, failure.ErrNotFound) {
		t.Fatalf("another tenant's run: %v", err)
	}
}
