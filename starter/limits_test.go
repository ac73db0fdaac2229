package starter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/store"
)

func ptr[T any](v T) *T { return &v }

// started reports whether the run's workflow exists in Temporal.
func (b *bundle) started(t *testing.T, run store.Run) bool {
	t.Helper()
	_, err := b.tc.DescribeWorkflow(context.Background(), run.WorkflowID, "")
	var nf *serviceerror.NotFound
	switch {
	case err == nil:
		return true
	case errors.As(err, &nf):
		return false
	}
	t.Fatalf("describe %s: %v", run.WorkflowID, err)
	return false
}

func (b *bundle) get(t *testing.T, tenant, id string) store.Run {
	t.Helper()
	r, err := b.st.GetRun(context.Background(), tenant, id)
	require.NoError(t, err)
	return r
}

// settle ends a run as the interpreter does (no worker polls the test's
// queue): its terminal event and status, which frees its slot.
func (b *bundle) settle(t *testing.T, tenant, id string) {
	t.Helper()
	err := b.st.AppendEvents(context.Background(), tenant, id, []execution.EventDraft{{
		Key: id + "/-/0/run.succeeded/0", Type: execution.EventRunSucceeded, At: time.Now()}},
		&execution.RunUpdate{Status: execution.StatusSucceeded})
	require.NoError(t, err)
}

// slotHolders counts the tenant's runs of key holding a slot.
func (b *bundle) slotHolders(t *testing.T, tenant, key string) int {
	t.Helper()
	var n int
	err := b.st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM runs WHERE tenant_id = $1 AND workflow_key = $2
		AND status IN ('queued', 'running')`, tenant, key).Scan(&n)
	require.NoError(t, err)
	return n
}

// Every path that can start a run respects the caps: the enqueue, a
// repeated enqueue, the sweeper and a cancel. Throttled runs never reach
// Temporal until the dispatcher admits them, first in first out.
func TestEveryStartPathRespectsTheCap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "items", itemGraph)
	_, err := b.starter.SetWorkflowLimits(ctx, store.WorkflowLimits{TenantID: b.t1, WorkflowKey: "items",
		MaxConcurrentRuns: ptr(2), UpdatedBy: "alice"})
	require.NoError(t, err)
	const n = 6
	accs := make([]Accepted, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			acc, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`),
				IdempotencyKey: fmt.Sprint("k", i)}, trusted(b.t1))
			accs[i] = acc
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var queued, throttled []store.Run
	for _, acc := range accs {
		require.True(t, acc.Created, "accepted %+v", acc)
		r := b.get(t, b.t1, acc.RunID)
		switch r.Status {
		case execution.StatusQueued:
			queued = append(queued, r)
			require.True(t, b.started(t, r), "admitted run %s was not started", r.RunID)
		case execution.StatusThrottled:
			throttled = append(throttled, r)
			require.Equal(t, execution.StatusThrottled, acc.Status, "the enqueue answered %+v for a throttled run", acc)
			require.GreaterOrEqual(t, acc.Position, 1, "the enqueue answered %+v for a throttled run", acc)
		default:
			t.Fatalf("run %s is %s", r.RunID, r.Status)
		}
	}
	require.Len(t, queued, 2, "%d queued, %d throttled", len(queued), len(throttled))
	require.Len(t, throttled, n-2, "%d queued, %d throttled", len(queued), len(throttled))
	// Queue order: positions 1..4 follow createdAt.
	byPos := map[int]store.Run{}
	for _, r := range throttled {
		byPos[r.Position] = r
	}
	for p := 1; p <= n-2; p++ {
		_, ok := byPos[p]
		require.True(t, ok, "no run at position %d: %v", p, byPos)
		require.False(t, p > 1 && !byPos[p].CreatedAt.After(byPos[p-1].CreatedAt), "position %d was created before position %d", p, p-1)
	}

	// Repeats of throttled enqueues, the sweeper (with the rows backdated
	// past SweepAfter) and the dispatcher start nothing while the cap is full.
	_, err = b.st.Pool.Exec(ctx, `UPDATE runs SET created_at = created_at - interval '1 minute',
		admitted_at = admitted_at - interval '1 minute'`)
	require.NoError(t, err)
	for _, r := range throttled {
		acc, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`),
			IdempotencyKey: keyOf(t, accs, r.RunID)}, trusted(b.t1))
		require.NoError(t, err, "repeat of a throttled run: %+v", acc)
		require.False(t, acc.Created, "repeat of a throttled run: %+v %v", acc, err)
		require.Equal(t, execution.StatusThrottled, acc.Status, "repeat of a throttled run: %+v %v", acc, err)
		require.Equal(t, r.Position, acc.Position, "repeat of a throttled run: %+v %v", acc, err)
	}
	for range 3 {
		_, err := b.starter.Sweep(ctx)
		require.NoError(t, err)
		_, err = b.starter.Dispatch(ctx, b.t1)
		require.NoError(t, err)
	}
	for _, r := range throttled {
		require.False(t, b.started(t, r), "throttled run %s was started", r.RunID)
		require.Equal(t, execution.StatusThrottled, b.get(t, b.t1, r.RunID).Status, "throttled run %s was started", r.RunID)
	}
	got := b.slotHolders(t, b.t1, "items")
	require.Equal(t, 2, got, "%d runs hold slots", got)
	// Cancelling the run at position 2 removes it without starting it.
	require.NoError(t, b.starter.Cancel(ctx, b.t1, byPos[2].RunID, execution.Actor{Kind: "user", Sub: "bob"}))
	r := b.get(t, b.t1, byPos[2].RunID)
	require.Equal(t, execution.StatusCancelled, r.Status, "cancelled throttled run: %s %s", r.Status, r.Error)
	require.Contains(t, string(r.Error), "throttled", "cancelled throttled run: %s %s", r.Status, r.Error)
	wantCode(t, b.starter.Cancel(ctx, b.t1, byPos[2].RunID, execution.Actor{Kind: "user", Sub: "bob"}), failure.CodeRunNotActive)

	// Cancelling a queued run (it holds a slot) goes through Temporal.
	require.NoError(t, b.starter.Cancel(ctx, b.t1, queued[0].RunID, execution.Actor{Kind: "user", Sub: "bob"}))
	require.True(t, cancelRequested(t, b.tc, queued[0].WorkflowID), "no cancel request for the queued run")

	// Slots free one at a time: the sweeper's dispatch admits the oldest
	// waiting run each time, never the cancelled one, never two.
	order := []store.Run{byPos[1], byPos[3], byPos[4]}
	holders := []string{queued[0].RunID, queued[1].RunID}
	for i, next := range order {
		b.settle(t, b.t1, holders[0])
		holders = append(holders[1:], next.RunID)
		_, err := b.starter.Sweep(ctx)
		require.NoError(t, err)
		r := b.get(t, b.t1, next.RunID)
		require.Equal(t, execution.StatusQueued, r.Status, "step %d: %s is %s", i, next.RunID, r.Status)
		require.True(t, b.started(t, r), "step %d: %s is %s", i, next.RunID, r.Status)
		got := b.slotHolders(t, b.t1, "items")
		require.Equal(t, 2, got, "step %d: %d runs hold slots", i, got)
		for _, later := range order[i+1:] {
			require.False(t, b.started(t, later), "step %d: %s started out of order", i, later.RunID)
		}
	}
	require.False(t, b.started(t, byPos[2]), "the cancelled throttled run was started")
}

func keyOf(t *testing.T, accs []Accepted, runID string) string {
	t.Helper()
	for i, a := range accs {
		if a.RunID == runID {
			return fmt.Sprint("k", i)
		}
	}
	t.Fatalf("no enqueue made run %s", runID)
	return ""
}

// RunDispatcher starts the next throttled run as soon as a settlement
// frees a slot (woken by PostgreSQL, not by the sweeper), and simulations
// are never throttled.
func TestDispatcherStartsTheNextRunWhenASlotFrees(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	publish(t, b.st, b.t1, "items", itemGraph)
	_, err := b.starter.SetTenantLimits(ctx, store.TenantLimits{TenantID: b.t1, MaxConcurrentRuns: ptr(1), UpdatedBy: "alice"})
	require.NoError(t, err)
	go b.starter.RunDispatcher(ctx)
	enqueue := func(key string, mode execution.Mode) Accepted {
		t.Helper()
		acc, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: key,
			Mode: mode}, trusted(b.t1))
		require.NoError(t, err)
		return acc
	}
	first, second := enqueue("first", ""), enqueue("second", "")
	sim := enqueue("sim", execution.ModeSimulation)
	require.Equal(t, execution.StatusQueued, first.Status, "statuses %s %s %s", first.Status, second.Status, sim.Status)
	require.Equal(t, execution.StatusThrottled, second.Status, "statuses %s %s %s", first.Status, second.Status, sim.Status)
	require.Equal(t, execution.StatusQueued, sim.Status, "statuses %s %s %s", first.Status, second.Status, sim.Status)
	b.settle(t, b.t1, first.RunID)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := b.get(t, b.t1, second.RunID)
		if r.Status == execution.StatusQueued && b.started(t, r) {
			break
		}
		require.False(t, time.Now().After(deadline), "the second run is still %s 30 s after the first settled", r.Status)
		time.Sleep(20 * time.Millisecond)
	}
}

// The budget is part of the idempotency binding; a workflow's default
// budget fills what the enqueue leaves unset.
func TestBudgetIsBoundWithTheKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "items", itemGraph)
	_, err := b.starter.SetWorkflowLimits(ctx, store.WorkflowLimits{TenantID: b.t1, WorkflowKey: "items", UpdatedBy: "alice",
		Budget: store.Budget{MaxTokens: ptr(int64(9000)), MaxCostUSD: ptr(2.5)}})
	require.NoError(t, err)
	enqueue := func(key string, budget *store.Budget) (Accepted, error) {
		return b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: key,
			Budget: budget}, trusted(b.t1))
	}
	first, err := enqueue("k", &store.Budget{MaxTokens: ptr(int64(500))})
	require.NoError(t, err)
	run := b.get(t, b.t1, first.RunID)
	require.Equal(t, int64(500), *run.Budget.MaxTokens, "budget %+v requested %+v", run.Budget, run.RequestedBudget)
	require.Equal(t, 2.5, *run.Budget.MaxCostUSD, "budget %+v requested %+v", run.Budget, run.RequestedBudget)
	require.Equal(t, int64(500), *run.RequestedBudget.MaxTokens, "budget %+v requested %+v", run.Budget, run.RequestedBudget)
	require.Nil(t, run.RequestedBudget.MaxCostUSD, "budget %+v requested %+v", run.Budget, run.RequestedBudget)
	again, err := enqueue("k", &store.Budget{MaxTokens: ptr(int64(500))})
	require.NoError(t, err, "same budget: %+v", again)
	require.False(t, again.Created, "same budget: %+v %v", again, err)
	require.Equal(t, first.RunID, again.RunID, "same budget: %+v %v", again, err)
	for _, other := range []*store.Budget{nil, {MaxTokens: ptr(int64(501))}, {MaxTokens: ptr(int64(500)), MaxCostUSD: ptr(2.5)}} {
		_, err := enqueue("k", other)
		fe := wantCode(t, err, failure.CodeIdempotencyConflict)
		require.Contains(t, fe.Message, "another budget", "budget %+v: %v", other, fe)
	}
	// None given: the workflow's default; an empty budget is none.
	none, err := enqueue("k-none", nil)
	require.NoError(t, err)
	run = b.get(t, b.t1, none.RunID)
	require.Equal(t, int64(9000), *run.Budget.MaxTokens, "default budget %+v requested %+v", run.Budget, run.RequestedBudget)
	require.Nil(t, run.RequestedBudget, "default budget %+v requested %+v", run.Budget, run.RequestedBudget)
	again, err = enqueue("k-none", &store.Budget{})
	require.NoError(t, err, "empty budget repeat: %+v", again)
	require.Equal(t, none.RunID, again.RunID, "empty budget repeat: %+v %v", again, err)
	for _, bad := range []*store.Budget{{MaxTokens: ptr(int64(0))}, {MaxCostUSD: ptr(-1.0)}, {MaxCostUSD: ptr(2e6)}} {
		_, err := enqueue("k-bad", bad)
		wantCode(t, err, failure.CodeInvalidRequest)
	}
}
