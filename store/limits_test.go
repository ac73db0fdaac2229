package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

func ptr[T any](v T) *T { return &v }

// limitsWorld is a database with workflows whose limits tests set.
type limitsWorld struct {
	t      *testing.T
	st     *store.Store
	tenant string
}

func newLimitsWorld(t *testing.T, keys ...string) *limitsWorld {
	t.Helper()
	w := &limitsWorld{t: t, st: testinfra.NewStore(t), tenant: "t-" + uuid.NewString()[:8]}
	for _, k := range keys {
		_, err := w.st.CreateWorkflow(context.Background(), w.tenant, k, json.RawMessage(`{"schemaVersion":1}`), "ada")
		require.NoError(t, err)
	}
	return w
}

func (w *limitsWorld) setWorkflow(key string, concurrent, rate *int) {
	w.t.Helper()
	_, _, err := w.st.SetWorkflowLimits(context.Background(), store.WorkflowLimits{TenantID: w.tenant, WorkflowKey: key,
		MaxConcurrentRuns: concurrent, MaxStartsPerMinute: rate, UpdatedBy: "ada"})
	require.NoError(w.t, err)
}

// enqueue persists a live run of key and returns what EnqueueRun did.
func (w *limitsWorld) enqueue(key, mode string) store.Enqueued {
	w.t.Helper()
	idem := uuid.NewString()
	r := newRunValue(w.tenant, key, idem)
	r.Mode = mode
	e, err := w.st.EnqueueRun(context.Background(), r, idem)
	require.NoError(w.t, err)
	require.True(w.t, e.Created)
	return e
}

func (w *limitsWorld) run(id string) store.Run {
	w.t.Helper()
	r, err := w.st.GetRun(context.Background(), w.tenant, id)
	require.NoError(w.t, err)
	return r
}

// settle ends a run the way the interpreter does: its terminal event with
// the terminal status projection.
func (w *limitsWorld) settle(id string) {
	w.t.Helper()
	require.NoError(w.t, w.st.AppendEvents(context.Background(), w.tenant, id, []execution.EventDraft{{
		Key: id + "/-/0/run.succeeded/0", Type: execution.EventRunSucceeded, At: time.Now()}},
		&execution.RunUpdate{Status: execution.StatusSucceeded}))
}

func (w *limitsWorld) statuses(key string) map[string]int {
	w.t.Helper()
	rows, err := w.st.Pool.Query(context.Background(), `SELECT status, count(*) FROM runs WHERE tenant_id = $1 AND workflow_key = $2 GROUP BY status`,
		w.tenant, key)
	require.NoError(w.t, err)
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(w.t, rows.Scan(&s, &n))
		out[s] = n
	}
	require.NoError(w.t, rows.Err())
	return out
}

// listenSlots listens on SlotsChannel until the test ends and returns the
// tenants notified, once the listener is connected.
func (w *limitsWorld) listenSlots() <-chan string {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w.t.Cleanup(cancel)
	woken := make(chan string, 10)
	connected := make(chan struct{}, 10)
	go w.st.ListenSlots(ctx, nil, func(tenant string) { woken <- tenant }, func() { connected <- struct{}{} })
	select {
	case <-connected:
	case <-time.After(30 * time.Second):
		w.t.Fatal("the slot listener did not connect")
	}
	return woken
}

func ids(runs []store.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.RunID
	}
	return out
}

// Many enqueues at once against maxConcurrentRuns 2 admit exactly two; the
// rest wait in the order they were accepted, and each settlement admits
// exactly the oldest waiting run.
func TestAdmissionHoldsTheCapFirstInFirstOut(t *testing.T) {
	t.Parallel()
	w := newLimitsWorld(t, "wf", "free")
	w.setWorkflow("wf", ptr(2), nil)

	const n = 16
	var mu sync.Mutex
	var all []store.Enqueued
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n / 4 {
				e := w.enqueue("wf", "live")
				mu.Lock()
				all = append(all, e)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Equal(t, map[string]int{"queued": 2, "throttled": n - 2}, w.statuses("wf"))

	// The queue: every run, in createdAt order. The first two hold the
	// slots; the rest are throttled with positions 1..n-2 in that order.
	var runs []store.Run
	for _, e := range all {
		runs = append(runs, w.run(e.Run.RunID))
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].CreatedAt.Before(runs[j].CreatedAt) })
	for i, r := range runs {
		if i < 2 {
			require.Equal(t, execution.StatusQueued, r.Status, "run %d", i)
			require.NotNil(t, r.AdmittedAt)
			continue
		}
		require.Equal(t, execution.StatusThrottled, r.Status, "run %d", i)
		require.Equal(t, i-1, r.Position, "run %d", i)
		require.Nil(t, r.AdmittedAt)
	}
	// A workflow without limits is not held by them.
	require.Equal(t, execution.StatusQueued, w.enqueue("free", "live").Run.Status)

	// Each settlement frees one slot; Dispatch admits exactly the oldest.
	running := []string{runs[0].RunID, runs[1].RunID}
	for next := 2; next < n; next++ {
		w.settle(running[0])
		running = running[1:]
		adm, err := w.st.Dispatch(context.Background(), w.tenant)
		require.NoError(t, err)
		require.Equal(t, []string{runs[next].RunID}, ids(adm.Admitted), "admission %d", next)
		running = append(running, runs[next].RunID)
		again, err := w.st.Dispatch(context.Background(), w.tenant)
		require.NoError(t, err)
		require.Empty(t, again.Admitted, "a second dispatch admits nothing")
		require.LessOrEqual(t, w.statuses("wf")["queued"], 2)
	}
	// admitted_at follows the queue.
	var prev time.Time
	for _, r := range runs {
		got := w.run(r.RunID)
		require.NotNil(t, got.AdmittedAt)
		require.False(t, got.AdmittedAt.Before(prev), "admitted out of order")
		prev = *got.AdmittedAt
	}
	// A throttled run that waited has run.admitted; one admitted at once has no event.
	events, err := w.st.ListEvents(context.Background(), w.tenant, runs[n-1].RunID, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []string{execution.EventRunThrottled, execution.EventRunAdmitted}, eventTypes(events))
	events, err = w.st.ListEvents(context.Background(), w.tenant, runs[0].RunID, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []string{execution.EventRunSucceeded}, eventTypes(events))
}

func eventTypes(events []store.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Type
	}
	return out
}

// The tenant cap spans workflows; a workflow whose own cap is full does not
// hold back another workflow's runs behind it.
func TestTenantCapSpansWorkflows(t *testing.T) {
	t.Parallel()
	w := newLimitsWorld(t, "a", "b")
	_, _, err := w.st.SetTenantLimits(context.Background(), store.TenantLimits{TenantID: w.tenant, MaxConcurrentRuns: ptr(3), UpdatedBy: "ada"})
	require.NoError(t, err)
	w.setWorkflow("a", ptr(1), nil)

	a1, a2 := w.enqueue("a", "live"), w.enqueue("a", "live")
	b1, b2, b3 := w.enqueue("b", "live"), w.enqueue("b", "live"), w.enqueue("b", "live")
	require.Equal(t, execution.StatusQueued, a1.Run.Status)
	require.Equal(t, execution.StatusThrottled, a2.Run.Status)
	require.Equal(t, execution.StatusQueued, b1.Run.Status, "b1 overtakes a2, whose own workflow is full")
	require.Equal(t, execution.StatusQueued, b2.Run.Status)
	require.Equal(t, execution.StatusThrottled, b3.Run.Status)
	events, err := w.st.ListEvents(context.Background(), w.tenant, a2.Run.RunID, 0, 10)
	require.NoError(t, err)
	require.Len(t, events, 1)
	require.JSONEq(t, `{"position": 1, "reason": "WORKFLOW_CONCURRENCY"}`, string(events[0].Data))
	events, err = w.st.ListEvents(context.Background(), w.tenant, b3.Run.RunID, 0, 10)
	require.NoError(t, err)
	require.JSONEq(t, `{"position": 1, "reason": "TENANT_CONCURRENCY"}`, string(events[0].Data))

	// a1 settles: a2 (first in the queue) takes the tenant's free slot; b3 waits on.
	w.settle(a1.Run.RunID)
	adm, err := w.st.Dispatch(context.Background(), w.tenant)
	require.NoError(t, err)
	require.Equal(t, []string{a2.Run.RunID}, ids(adm.Admitted))
	require.Equal(t, store.ThrottleTenantConcurrency, adm.Reasons[b3.Run.RunID])

	// Simulations are exempt: never throttled, holding no slot.
	sim := w.enqueue("b", "simulation")
	require.Equal(t, execution.StatusQueued, sim.Run.Status)
	u, err := w.st.LimitsUsage(context.Background(), w.tenant, nil)
	require.NoError(t, err)
	require.Equal(t, 3, u.Running)
	require.Equal(t, 1, u.Throttled)
	require.Equal(t, store.WorkflowUsage{Running: 2, Throttled: 1, StartsInWindow: 2}, u.Workflows["b"])

	// Raising the tenant cap admits b3 in the same transaction.
	_, adm, err = w.st.SetTenantLimits(context.Background(), store.TenantLimits{TenantID: w.tenant, MaxConcurrentRuns: ptr(4), UpdatedBy: "ada"})
	require.NoError(t, err)
	require.Equal(t, []string{b3.Run.RunID}, ids(adm.Admitted))
}

// maxStartsPerMinute admits at most that many runs in any minute; the
// admission says when the window has room again.
func TestStartRateWindow(t *testing.T) {
	t.Parallel()
	w := newLimitsWorld(t, "wf")
	w.setWorkflow("wf", nil, ptr(2))
	r1, r2, r3 := w.enqueue("wf", "live"), w.enqueue("wf", "live"), w.enqueue("wf", "live")
	require.Equal(t, execution.StatusQueued, r1.Run.Status)
	require.Equal(t, execution.StatusQueued, r2.Run.Status)
	require.Equal(t, execution.StatusThrottled, r3.Run.Status)

	// Settling frees no start: the window still holds two.
	w.settle(r1.Run.RunID)
	adm, err := w.st.Dispatch(context.Background(), w.tenant)
	require.NoError(t, err)
	require.Empty(t, adm.Admitted)
	require.Equal(t, store.ThrottleWorkflowStartRate, adm.Reasons[r3.Run.RunID])
	require.NotNil(t, adm.RetryAt)
	first := w.run(r1.Run.RunID).AdmittedAt
	require.WithinDuration(t, first.Add(store.RateWindow), *adm.RetryAt, time.Millisecond)

	// Once the first admission leaves the window, r3 goes.
	_, err = w.st.Pool.Exec(context.Background(), `UPDATE runs SET admitted_at = admitted_at - interval '61 seconds' WHERE run_id = $1`, r1.Run.RunID)
	require.NoError(t, err)
	adm, err = w.st.Dispatch(context.Background(), w.tenant)
	require.NoError(t, err)
	require.Equal(t, []string{r3.Run.RunID}, ids(adm.Admitted))
	require.Nil(t, adm.RetryAt)
}

// A throttled run cancelled leaves the queue without starting; a run
// already admitted is not cancelled this way.
func TestCancelThrottled(t *testing.T) {
	t.Parallel()
	w := newLimitsWorld(t, "wf")
	w.setWorkflow("wf", ptr(1), nil)
	r1, r2, r3 := w.enqueue("wf", "live"), w.enqueue("wf", "live"), w.enqueue("wf", "live")
	require.Equal(t, 2, w.run(r3.Run.RunID).Position)
	ctx := context.Background()
	runErr := execution.RunError{Code: execution.RunErrCancelled, Message: "cancelled by user ada while throttled"}

	done, err := w.st.CancelThrottled(ctx, w.tenant, r2.Run.RunID, runErr, nil)
	require.NoError(t, err)
	require.True(t, done)
	got := w.run(r2.Run.RunID)
	require.Equal(t, execution.StatusCancelled, got.Status)
	require.NotNil(t, got.FinishedAt)
	require.JSONEq(t, `{"code": "CANCELLED", "message": "cancelled by user ada while throttled"}`, string(got.Error))
	require.Equal(t, 1, w.run(r3.Run.RunID).Position, "r3 moved up")
	events, err := w.st.ListEvents(ctx, w.tenant, r2.Run.RunID, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []string{execution.EventRunThrottled, execution.EventRunCancelled}, eventTypes(events))
	require.NoError(t, w.st.VerifyChain(ctx, w.tenant, r2.Run.RunID))

	// Twice, or on a run holding its slot: nothing happens.
	done, err = w.st.CancelThrottled(ctx, w.tenant, r2.Run.RunID, runErr, nil)
	require.NoError(t, err)
	require.False(t, done)
	done, err = w.st.CancelThrottled(ctx, w.tenant, r1.Run.RunID, runErr, nil)
	require.NoError(t, err)
	require.False(t, done)
	_, err = w.st.CancelThrottled(ctx, "someone-else", r3.Run.RunID, runErr, nil)
	require.ErrorIs(t, err, failure.ErrNotFound)

	// The slot goes to r3, never to the cancelled run.
	w.settle(r1.Run.RunID)
	adm, err := w.st.Dispatch(ctx, w.tenant)
	require.NoError(t, err)
	require.Equal(t, []string{r3.Run.RunID}, ids(adm.Admitted))
}

// A settlement that frees a slot while runs wait notifies the tenant on
// SlotsChannel at commit; one that frees none (a throttled run cancelled)
// or with nobody waiting does not.
func TestSettlementWakesDispatchers(t *testing.T) {
	t.Parallel()
	w := newLimitsWorld(t, "wf")
	w.setWorkflow("wf", ptr(1), nil)
	ctx := context.Background()
	woken := w.listenSlots()
	lone := w.enqueue("wf", "live")
	w.settle(lone.Run.RunID) // nobody waits: no notification
	r1, r2, r3 := w.enqueue("wf", "live"), w.enqueue("wf", "live"), w.enqueue("wf", "live")
	done, err := w.st.CancelThrottled(ctx, w.tenant, r3.Run.RunID, execution.RunError{Code: execution.RunErrCancelled, Message: "x"}, nil)
	require.NoError(t, err)
	require.True(t, done)
	w.settle(r1.Run.RunID)
	select {
	case got := <-woken:
		require.Equal(t, w.tenant, got)
	case <-time.After(30 * time.Second):
		t.Fatal("no notification for the freed slot")
	}
	select {
	case got := <-woken:
		t.Fatalf("a second notification (%s): only r1's settlement freed a slot while r2 waited", got)
	default:
	}

	// The reconciler's settlement (a run terminated outside weft) frees
	// the slot and wakes the dispatchers the same way.
	adm, err := w.st.Dispatch(ctx, w.tenant)
	require.NoError(t, err)
	require.Equal(t, []string{r2.Run.RunID}, ids(adm.Admitted))
	w.enqueue("wf", "live")
	applied, err := w.st.SettleRun(ctx, w.tenant, r2.Run.RunID, execution.EventDraft{Key: r2.Run.RunID + "/-/0/run.failed/reconciled",
		Type: execution.EventRunFailed, At: time.Now()}, execution.RunUpdate{Status: execution.StatusFailed,
		Error: &execution.RunError{Code: "TERMINATED_OUTSIDE_WEFT", Message: "terminated"}})
	require.NoError(t, err)
	require.True(t, applied)
	select {
	case got := <-woken:
		require.Equal(t, w.tenant, got)
	case <-time.After(30 * time.Second):
		t.Fatal("no notification for the slot the reconciler freed")
	}
}

// An enqueue left waiting only for the start rate wakes the dispatchers
// (SlotsChannel, at commit), so one arms its timer even when every
// admitted run settled before it: no settlement would. An enqueue admitted
// at once, or held by a full slot cap (a settlement will wake them), does
// not notify.
func TestRateThrottledEnqueueWakesDispatchers(t *testing.T) {
	t.Parallel()
	w := newLimitsWorld(t, "paced", "capped")
	w.setWorkflow("paced", nil, ptr(1))
	w.setWorkflow("capped", ptr(1), nil)
	ctx := context.Background()
	woken := w.listenSlots()
	first := w.enqueue("paced", "live")
	require.Equal(t, execution.StatusQueued, first.Run.Status)
	w.settle(first.Run.RunID) // nobody waits yet: no notification
	w.enqueue("capped", "live")
	require.Equal(t, execution.StatusThrottled, w.enqueue("capped", "live").Run.Status)
	select {
	case got := <-woken:
		t.Fatalf("a notification (%s) before any run waited for the rate", got)
	default:
	}

	second := w.enqueue("paced", "live")
	require.Equal(t, execution.StatusThrottled, second.Run.Status)
	select {
	case got := <-woken:
		require.Equal(t, w.tenant, got)
	case <-time.After(30 * time.Second):
		t.Fatal("a run left waiting for the start rate woke no dispatcher")
	}
	adm, err := w.st.Dispatch(ctx, w.tenant)
	require.NoError(t, err)
	require.NotNil(t, adm.RetryAt, "the dispatcher learns when the window opens")
	require.Equal(t, store.ThrottleWorkflowStartRate, adm.Reasons[second.Run.RunID])
	select {
	case got := <-woken:
		t.Fatalf("the dispatcher's own pass notified (%s): it would wake itself until the window opened", got)
	case <-time.After(500 * time.Millisecond):
	}
}

// Limits are validated, scoped to an existing workflow of the tenant, and
// read back.
func TestWorkflowLimitsRoundTrip(t *testing.T) {
	t.Parallel()
	w := newLimitsWorld(t, "wf")
	ctx := context.Background()
	l, err := w.st.GetWorkflowLimits(ctx, w.tenant, "wf")
	require.NoError(t, err)
	require.Nil(t, l.MaxConcurrentRuns)
	require.True(t, l.UpdatedAt.IsZero())
	_, err = w.st.GetWorkflowLimits(ctx, w.tenant, "nope")
	require.ErrorIs(t, err, failure.ErrNotFound)
	_, _, err = w.st.SetWorkflowLimits(ctx, store.WorkflowLimits{TenantID: w.tenant, WorkflowKey: "nope", UpdatedBy: "ada"})
	require.ErrorIs(t, err, failure.ErrNotFound)
	_, _, err = w.st.SetWorkflowLimits(ctx, store.WorkflowLimits{TenantID: "other", WorkflowKey: "wf", UpdatedBy: "ada"})
	require.ErrorIs(t, err, failure.ErrNotFound, "another tenant's workflow")
	for _, bad := range []store.WorkflowLimits{
		{MaxConcurrentRuns: ptr(0)}, {MaxStartsPerMinute: ptr(-1)}, {MaxConcurrentRuns: ptr(store.MaxConcurrentRunsLimit + 1)},
		{Budget: store.Budget{MaxTokens: ptr(int64(0))}}, {Budget: store.Budget{MaxCostUSD: ptr(-1.0)}},
	} {
		bad.TenantID, bad.WorkflowKey, bad.UpdatedBy = w.tenant, "wf", "ada"
		_, _, err := w.st.SetWorkflowLimits(ctx, bad)
		require.Equal(t, failure.CodeInvalidRequest, failure.CodeOf(err), "%+v", bad)
	}
	set := store.WorkflowLimits{TenantID: w.tenant, WorkflowKey: "wf", MaxConcurrentRuns: ptr(3), MaxStartsPerMinute: ptr(10),
		Budget: store.Budget{MaxTokens: ptr(int64(5000)), MaxCostUSD: ptr(0.25)}, UpdatedBy: "ada"}
	_, _, err = w.st.SetWorkflowLimits(ctx, set)
	require.NoError(t, err)
	l, err = w.st.GetWorkflowLimits(ctx, w.tenant, "wf")
	require.NoError(t, err)
	require.Equal(t, 3, *l.MaxConcurrentRuns)
	require.Equal(t, 10, *l.MaxStartsPerMinute)
	require.Equal(t, int64(5000), *l.Budget.MaxTokens)
	require.InDelta(t, 0.25, *l.Budget.MaxCostUSD, 1e-12)
	require.Equal(t, "ada", l.UpdatedBy)
	list, err := w.st.ListWorkflowLimits(ctx, w.tenant)
	require.NoError(t, err)
	require.Len(t, list, 1)
	list, err = w.st.ListWorkflowLimits(ctx, "other")
	require.NoError(t, err)
	require.Empty(t, list)
}

// budgetRun persists a run with budget b and returns its id.
func budgetRun(t *testing.T, st *store.Store, tenant string, b store.Budget) string {
	t.Helper()
	idem := uuid.NewString()
	r := newRunValue(tenant, "wf", idem)
	r.Budget = b
	created, _, err := st.CreateRun(context.Background(), r, idem)
	require.NoError(t, err)
	return created.RunID
}

// settleTurn saves a transcript turn with its usage, as the harness does.
func settleTurn(t *testing.T, st *store.Store, k store.BudgetKey, u store.Usage) {
	t.Helper()
	require.NoError(t, st.SaveAgentTranscript(context.Background(), store.AgentTranscript{TenantID: k.TenantID, RunID: k.RunID,
		NodeID: k.NodeID, AgentKey: "a", AgentRevision: 1, Attempt: k.Attempt, Turn: k.Turn, Transcript: json.RawMessage(`{}`)}, &u))
}

// Parallel calls of one run never reserve more than its budget: with 1000
// tokens and calls of 100, ten reserve and the others must wait; once the
// ten have spent it all, the next call is refused with what was spent.
func TestBudgetReservationsNeverOverspend(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	tenant := "t-" + uuid.NewString()[:8]
	run := budgetRun(t, st, tenant, store.Budget{MaxTokens: ptr(int64(1000))})
	est := store.CallEstimate{InputTokens: 60, OutputTokens: 40}

	var mu sync.Mutex
	var reserved []store.BudgetKey
	busy := 0
	var wg sync.WaitGroup
	for i := range 25 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := store.BudgetKey{TenantID: tenant, RunID: run, NodeID: "n" + string(rune('a'+i)), Attempt: 1, Turn: 1}
			res, err := st.ReserveBudget(context.Background(), k, est)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				require.True(t, res.Budgeted)
				require.Equal(t, int64(40), res.OutputLimit, "the sim's known output")
				require.Equal(t, int64(100), res.Tokens)
				reserved = append(reserved, k)
			case errors.Is(err, store.ErrBudgetBusy):
				busy++
			default:
				t.Errorf("reserve: %v", err)
			}
		}()
	}
	wg.Wait()
	require.Len(t, reserved, 10)
	require.Equal(t, 15, busy)
	state, err := st.RunBudget(context.Background(), tenant, run)
	require.NoError(t, err)
	require.Equal(t, int64(1000), state.ReservedTokens)

	// The same call again (a re-dispatched attempt) finds its reservation.
	again, err := st.ReserveBudget(context.Background(), reserved[0], est)
	require.NoError(t, err)
	require.Equal(t, int64(100), again.Tokens)

	for _, k := range reserved {
		settleTurn(t, st, k, store.Usage{Calls: 1, InputTokens: 60, OutputTokens: 40})
	}
	state, err = st.RunBudget(context.Background(), tenant, run)
	require.NoError(t, err)
	require.Equal(t, int64(1000), state.SpentTokens)
	require.Zero(t, state.ReservedTokens)

	_, err = st.ReserveBudget(context.Background(), store.BudgetKey{TenantID: tenant, RunID: run, NodeID: "late", Attempt: 1, Turn: 1}, est)
	var exceeded *store.BudgetExceededError
	require.ErrorAs(t, err, &exceeded)
	require.Equal(t, "tokens", exceeded.Dimension)
	require.Equal(t, int64(1000), exceeded.SpentTokens)
	require.Equal(t, int64(1000), *exceeded.AllowedTokens)
	require.Equal(t, int64(100), exceeded.NeededTokens)
	require.Contains(t, exceeded.Error(), "spent 1000 of its 1000 tokens")

	// A settled call is never reserved again.
	_, err = st.ReserveBudget(context.Background(), reserved[0], est)
	require.Equal(t, store.CodeStaleAttempt, failure.CodeOf(err))
}

// What an attempt left reserved is released when the node reserves again
// (a later attempt), and a failed call's release gives its share back.
func TestBudgetReservationsDoNotLeak(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	tenant := "t-" + uuid.NewString()[:8]
	run := budgetRun(t, st, tenant, store.Budget{MaxTokens: ptr(int64(300))})
	open := store.CallEstimate{InputTokens: 50} // a real model: its reply's size is unknown

	k1 := store.BudgetKey{TenantID: tenant, RunID: run, NodeID: "a", Attempt: 1, Turn: 1}
	res, err := st.ReserveBudget(ctx, k1, open)
	require.NoError(t, err)
	require.Equal(t, int64(250), res.OutputLimit, "the remaining tokens after the input")
	require.Equal(t, int64(300), res.Tokens)
	// Another node must wait: the open call holds everything.
	_, err = st.ReserveBudget(ctx, store.BudgetKey{TenantID: tenant, RunID: run, NodeID: "b", Attempt: 1, Turn: 1}, open)
	require.ErrorIs(t, err, store.ErrBudgetBusy)

	// Attempt 1 was lost; attempt 2 of the node releases its reservation.
	k2 := store.BudgetKey{TenantID: tenant, RunID: run, NodeID: "a", Attempt: 2, Turn: 1}
	_, err = st.ReserveBudget(ctx, k2, store.CallEstimate{InputTokens: 50, MaxOutputTokens: 100})
	require.NoError(t, err)
	state, err := st.RunBudget(ctx, tenant, run)
	require.NoError(t, err)
	require.Equal(t, int64(150), state.ReservedTokens, "attempt 1's 300 released; attempt 2 holds input + its maxOutputTokens")

	require.NoError(t, st.ReleaseBudget(ctx, k2))
	require.NoError(t, st.ReleaseBudget(ctx, k2))
	state, err = st.RunBudget(ctx, tenant, run)
	require.NoError(t, err)
	require.Zero(t, state.ReservedTokens)

	// A released call made again (a re-dispatch after a provider outage) reserves anew.
	again, err := st.ReserveBudget(ctx, k2, open)
	require.NoError(t, err)
	require.Equal(t, int64(300), again.Tokens)

	// A run without a budget reserves nothing.
	free := budgetRun(t, st, tenant, store.Budget{})
	res, err = st.ReserveBudget(ctx, store.BudgetKey{TenantID: tenant, RunID: free, NodeID: "a", Attempt: 1, Turn: 1}, open)
	require.NoError(t, err)
	require.False(t, res.Budgeted)
	require.Zero(t, res.OutputLimit)
}

func TestPlanReservation(t *testing.T) {
	price := &store.TokenPrice{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000} // $1 per input token, $2 per output token
	cases := []struct {
		name                  string
		b                     store.Budget
		spentT, heldT         int64
		spentC, heldC         float64
		est                   store.CallEstimate
		wantLimit, wantTokens int64
		wantCost              float64
		wantErr               error
		wantExceeded          string
	}{
		{name: "tokens, unknown reply: the remaining tokens", b: store.Budget{MaxTokens: ptr(int64(1000))}, spentT: 300, heldT: 200,
			est: store.CallEstimate{InputTokens: 100}, wantLimit: 400, wantTokens: 500},
		{name: "tokens, capped reply", b: store.Budget{MaxTokens: ptr(int64(1000))}, est: store.CallEstimate{InputTokens: 100, MaxOutputTokens: 50},
			wantLimit: 50, wantTokens: 150},
		{name: "tokens, spent too much", b: store.Budget{MaxTokens: ptr(int64(1000))}, spentT: 950,
			est: store.CallEstimate{InputTokens: 40, OutputTokens: 20}, wantExceeded: "tokens"},
		{name: "tokens, held by others", b: store.Budget{MaxTokens: ptr(int64(1000))}, spentT: 500, heldT: 450,
			est: store.CallEstimate{InputTokens: 40, OutputTokens: 20}, wantErr: store.ErrBudgetBusy},
		{name: "cost, priced: the reply bounded by the money left", b: store.Budget{MaxCostUSD: ptr(100.0)}, spentC: 10,
			est: store.CallEstimate{InputTokens: 20, Price: price}, wantLimit: 35, wantTokens: 55, wantCost: 90},
		{name: "cost, known", b: store.Budget{MaxCostUSD: ptr(1.0)}, spentC: 0.5, heldC: 0.25,
			est: store.CallEstimate{InputTokens: 5, OutputTokens: 5, CostUSD: ptr(0.25)}, wantLimit: 5, wantTokens: 10, wantCost: 0.25},
		{name: "cost, known, spent", b: store.Budget{MaxCostUSD: ptr(1.0)}, spentC: 0.9,
			est: store.CallEstimate{InputTokens: 5, OutputTokens: 5, CostUSD: ptr(0.25)}, wantExceeded: "costUsd"},
		{name: "cost, unpriced", b: store.Budget{MaxCostUSD: ptr(1.0)}, est: store.CallEstimate{InputTokens: 5}, wantErr: store.ErrBudgetUnpriced},
		{name: "both: the tighter wins", b: store.Budget{MaxTokens: ptr(int64(1000)), MaxCostUSD: ptr(100.0)},
			est: store.CallEstimate{InputTokens: 20, Price: price}, wantLimit: 40, wantTokens: 60, wantCost: 100},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := store.PlanReservation(c.b, c.spentT, c.heldT, c.spentC, c.heldC, c.est)
			var exceeded *store.BudgetExceededError
			switch {
			case c.wantExceeded != "":
				require.ErrorAs(t, err, &exceeded)
				require.Equal(t, c.wantExceeded, exceeded.Dimension)
			case c.wantErr != nil:
				require.ErrorIs(t, err, c.wantErr)
			default:
				require.NoError(t, err)
				require.Equal(t, c.wantLimit, res.OutputLimit)
				require.Equal(t, c.wantTokens, res.Tokens)
				require.InDelta(t, c.wantCost, res.CostUSD, 1e-9)
			}
		})
	}
}

// Migration 00014 gives the runs holding a slot their admission time, and
// its rollback ends runs still throttled (nothing else could run them)
// before it restores the old status check.
func TestLimitsMigrationUpAndDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newLimitsWorld(t, "wf")
	w.setWorkflow("wf", ptr(1), nil)
	running := w.enqueue("wf", "live")
	waiting := w.enqueue("wf", "live")
	require.Equal(t, execution.StatusThrottled, waiting.Run.Status)
	require.NoError(t, store.MigrateTo(ctx, w.st.Pool, 13))
	var status string
	require.NoError(t, w.st.Pool.QueryRow(ctx, `SELECT status FROM runs WHERE run_id = $1`, waiting.Run.RunID).Scan(&status))
	require.Equal(t, execution.StatusCancelled, status)
	_, err := w.st.Pool.Exec(ctx, `UPDATE runs SET status = 'throttled' WHERE run_id = $1`, running.Run.RunID)
	require.Error(t, err, "the old status check is back")

	require.NoError(t, store.Migrate(ctx, w.st.Pool))
	got := w.run(running.Run.RunID)
	require.Equal(t, execution.StatusQueued, got.Status)
	require.NotNil(t, got.AdmittedAt, "a run holding a slot is admitted as of its enqueue")
	require.Equal(t, got.CreatedAt, *got.AdmittedAt)
}

// A settlement racing an admission pass loses no wake-up: the pass counted
// the settling run's slot as taken and left a run waiting; the settlement
// waits for the pass to commit (the tenant's admission lock, taken shared)
// and then sees the waiting run, so it notifies.
func TestNoWakeUpIsLostToAConcurrentAdmission(t *testing.T) {
	t.Parallel()
	w := newLimitsWorld(t, "wf")
	w.setWorkflow("wf", ptr(1), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holder := w.enqueue("wf", "live")
	require.Equal(t, execution.StatusQueued, holder.Run.Status)
	woken := make(chan string, 10)
	connected := make(chan struct{}, 10)
	go w.st.ListenSlots(ctx, nil, func(tenant string) { woken <- tenant }, func() { connected <- struct{}{} })
	select {
	case <-connected:
	case <-time.After(30 * time.Second):
		t.Fatal("the slot listener did not connect")
	}

	// An admission pass in flight: it holds the lock and leaves a run
	// waiting, uncommitted.
	tx, err := w.st.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::int, hashtext($2))`, 0x77656674, w.tenant)
	require.NoError(t, err)
	waiting := uuid.NewString()
	_, err = tx.Exec(ctx, `INSERT INTO runs (run_id, tenant_id, workflow_key, revision, checksum, mode, status, input, input_hash,
			origin, actor, permissions, workflow_id, queue_seq)
		VALUES ($1, $2, 'wf', 1, 'c', 'live', 'throttled', '{}', 'h', '{}', '{}', '{}', $1, nextval('run_queue_seq'))`, waiting, w.tenant)
	require.NoError(t, err)

	settled := make(chan error, 1)
	go func() {
		settled <- w.st.AppendEvents(context.Background(), w.tenant, holder.Run.RunID, []execution.EventDraft{{
			Key: holder.Run.RunID + "/-/0/run.succeeded/0", Type: execution.EventRunSucceeded, At: time.Now()}},
			&execution.RunUpdate{Status: execution.StatusSucceeded})
	}()
	require.Eventually(t, func() bool {
		var n int
		err := w.st.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND classid = $1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, 0x77656674).Scan(&n)
		return err == nil && n > 0
	}, 30*time.Second, 10*time.Millisecond, "the settlement does not wait for the admission pass")
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-settled)
	select {
	case got := <-woken:
		require.Equal(t, w.tenant, got)
	case <-time.After(30 * time.Second):
		t.Fatal("the settlement did not wake the dispatchers for the run left waiting")
	}
	adm, err := w.st.Dispatch(ctx, w.tenant)
	require.NoError(t, err)
	require.Equal(t, []string{waiting}, ids(adm.Admitted))
}
