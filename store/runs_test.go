package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// newRunValue returns a valid queued run for tenant.
func newRunValue(tenant, key, idem string) store.Run {
	return store.Run{
		RunID:       uuid.NewString(),
		TenantID:    tenant,
		WorkflowKey: key,
		Revision:    1,
		Checksum:    "c0ffee",
		Mode:        string(execution.ModeLive),
		Input:       json.RawMessage(`{"id":"a"}`),
		InputHash:   "h1",
		Origin:      execution.Origin{Kind: "api"},
		Actor:       execution.Actor{Kind: "user", Sub: "ada", Name: "Ada"},
		Permissions: []string{"notes.write"},
		WorkflowID:  "weft-" + tenant + "-" + key + "-" + idem,
	}
}

// createRun persists a fresh run and returns it.
func createRun(t *testing.T, st *store.Store, tenant string) store.Run {
	t.Helper()
	idem := uuid.NewString()
	r, created, err := st.CreateRun(context.Background(), newRunValue(tenant, "wf", idem), idem)
	require.NoError(t, err, "create run: created=%v err", created)
	require.True(t, created, "create run: created=%v err=%v", created, err)
	return r
}

func TestCreateRunConcurrentSameKeyCreatesOneRun(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	const callers = 100
	var wg sync.WaitGroup
	type result struct {
		run     store.Run
		created bool
		err     error
	}
	results := make([]result, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := newRunValue("t1", "wf", "key-1") // each caller proposes its own run id
			run, created, err := st.CreateRun(ctx, r, "key-1")
			results[i] = result{run, created, err}
		}()
	}
	wg.Wait()
	createdCount := 0
	var runID string
	for i, r := range results {
		require.NoError(t, r.err, "caller %d", i)
		if r.created {
			createdCount++
		}
		if runID == "" {
			runID = r.run.RunID
		}
		require.Equal(t, runID, r.run.RunID, "caller %d got run %s, others %s", i, r.run.RunID, runID)
		require.Equal(t, execution.StatusQueued, r.run.Status, "status %q", r.run.Status)
	}
	require.Equal(t, 1, createdCount, "created=%d, want exactly 1", createdCount)
	var runs, bindings int
	require.NoError(t, st.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM idempotency_bindings)`).Scan(&runs, &bindings))
	require.Equal(t, 1, runs, "runs=%d bindings=%d, want 1 and 1", runs, bindings)
	require.Equal(t, 1, bindings, "runs=%d bindings=%d, want 1 and 1", runs, bindings)
}

func TestCreateRunReturnsBoundRunForOtherInput(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	first, created, err := st.CreateRun(ctx, newRunValue("t1", "wf", "k"), "k")
	require.NoError(t, err, fmt.Sprint(created, err))
	require.True(t, created, fmt.Sprint(created, err))
	other := newRunValue("t1", "wf", "k")
	other.InputHash = "h2"
	got, created, err := st.CreateRun(ctx, other, "k")
	require.NoError(t, err, "created=%v err", created)
	require.False(t, created, "created=%v err=%v", created, err)
	require.Equal(t, first.RunID, got.RunID, "bound run %+v", got)
	require.Equal(t, "h1", got.InputHash, "bound run %+v", got)
	// The same key in another tenant is another binding.
	_, created, err = st.CreateRun(ctx, newRunValue("t2", "wf", "k"), "k")
	require.NoError(t, err, "other tenant: created=%v err", created)
	require.True(t, created, "other tenant: created=%v err=%v", created, err)
}

func TestCreateRunRefusesIncompleteRun(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	r := newRunValue("t1", "wf", "k")
	r.WorkflowID = ""
	_, _, err := st.CreateRun(context.Background(), r, "k")
	require.Equal(t, failure.CodeInvalidRequest, failure.CodeOf(err), "err = %v", err)
}

func TestGetRunRoundTripAndTenantIsolation(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	in := newRunValue("t1", "wf", "k")
	dr := 3
	in.DraftRevision = &dr
	in.Mode = string(execution.ModeSimulation)
	in.Fixtures = json.RawMessage(`{"n":{"output":1}}`)
	created, _, err := st.CreateRun(ctx, in, "k")
	require.NoError(t, err)
	got, err := st.GetRun(ctx, "t1", created.RunID)
	require.NoError(t, err)
	require.True(t, got.Actor == in.Actor, "round trip: %+v", got)
	require.True(t, got.Origin == in.Origin, "round trip: %+v", got)
	require.Equal(t, 3, *got.DraftRevision, "round trip: %+v", got)
	require.Equal(t, "{}", string(got.Usage), "round trip: %+v", got)
	require.Len(t, got.Permissions, 1, "round trip: %+v", got)
	require.Equal(t, in.WorkflowID, got.WorkflowID, "round trip: %+v", got)
	require.Nil(t, got.StartedAt, "round trip: %+v", got)
	_, err = st.GetRun(ctx, "t2", created.RunID)
	require.ErrorIs(t, err, failure.ErrNotFound, "other tenant: %v", err)
	_, err = st.GetRun(ctx, "t1", "nope")
	require.ErrorIs(t, err, failure.ErrNotFound, "missing: %v", err)
}

func TestListRunsKeysetAndFilters(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	var ids []string
	for i := range 5 {
		key := "a"
		if i%2 == 1 {
			key = "b"
		}
		r, _, err := st.CreateRun(ctx, newRunValue("t1", key, fmt.Sprint(i)), fmt.Sprint(i))
		require.NoError(t, err)
		ids = append(ids, r.RunID)
	}
	createRun(t, st, "t2")

	var seen []string
	var before *store.RunCursor
	for {
		page, err := st.ListRuns(ctx, "t1", store.RunFilter{Before: before, Limit: 2})
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			seen = append(seen, r.RunID)
		}
		c := page[len(page)-1].Cursor()
		before = &c
	}
	require.Len(t, seen, 5, "paged %d runs, want 5: %v", len(seen), seen)
	require.Equal(t, ids[4], seen[0], "not newest first: %v vs %v", seen, ids)
	require.Equal(t, ids[0], seen[4], "not newest first: %v vs %v", seen, ids)
	b, err := st.ListRuns(ctx, "t1", store.RunFilter{WorkflowKey: "b"})
	require.NoError(t, err, "filter by key: %d", len(b))
	require.Len(t, b, 2, "filter by key: %d %v", len(b), err)
	none, err := st.ListRuns(ctx, "t1", store.RunFilter{Status: execution.StatusRunning})
	require.NoError(t, err, "filter by status: %d", len(none))
	require.Empty(t, none, "filter by status: %d %v", len(none), err)
}

func TestQueuedRunsAndTemporalRunID(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	old := createRun(t, st, "t1")
	running := createRun(t, st, "t2")
	_, err := st.Pool.Exec(ctx, `UPDATE runs SET created_at = now() - interval '1 minute', admitted_at = now() - interval '1 minute'`)
	require.NoError(t, err)
	fresh := createRun(t, st, "t1")
	_ = fresh
	require.NoError(t, st.AppendEvents(ctx, "t2", running.RunID, nil, &execution.RunUpdate{Status: execution.StatusRunning}))
	q, err := st.QueuedRuns(ctx, 30*time.Second, 10)
	require.NoError(t, err)
	require.Len(t, q, 1, "queued: %+v", q)
	require.Equal(t, old.RunID, q[0].RunID, "queued: %+v", q)
	require.NoError(t, st.SetTemporalRunID(ctx, old.RunID, "tr-1"))
	require.NoError(t, st.SetTemporalRunID(ctx, old.RunID, "tr-2"))
	got, _ := st.GetRun(ctx, "t1", old.RunID)
	require.Equal(t, "tr-1", got.TemporalRunID, "temporal run id %q, want the first", got.TemporalRunID)
	err = st.SetTemporalRunID(ctx, "missing", "x")
	require.ErrorIs(t, err, failure.ErrNotFound, "missing run: %v", err)
}

func TestBoundRunAndTenantName(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	_, ok, err := st.BoundRun(ctx, "t1", "wf", "k")
	require.NoError(t, err, "unbound key: ok=%v", ok)
	require.False(t, ok, "unbound key: ok=%v err=%v", ok, err)
	r := newRunValue("t1", "wf", "k")
	r.TenantName = "Acme Corp"
	created, _, err := st.CreateRun(ctx, r, "k")
	require.NoError(t, err)
	require.Equal(t, "Acme Corp", created.TenantName, "created tenant name %q", created.TenantName)
	bound, ok, err := st.BoundRun(ctx, "t1", "wf", "k")
	require.NoError(t, err, "bound = %+v ok=%v err", bound, ok)
	require.True(t, ok, "bound = %+v ok=%v err=%v", bound, ok, err)
	require.Equal(t, created.RunID, bound.RunID, "bound = %+v ok=%v err=%v", bound, ok, err)
	require.Equal(t, "Acme Corp", bound.TenantName, "bound = %+v ok=%v err=%v", bound, ok, err)
	require.Equal(t, "h1", bound.InputHash, "bound = %+v ok=%v err=%v", bound, ok, err)
	// Bindings are scoped by tenant and workflow key.
	for _, k := range [][2]string{{"t2", "wf"}, {"t1", "other"}} {
		_, ok, err := st.BoundRun(ctx, k[0], k[1], "k")
		require.NoError(t, err, "%v: ok=%v err", k, ok)
		require.False(t, ok, "%v: ok=%v err=%v", k, ok, err)
	}
	// The sweeper reads it back with the queued runs.
	_, err = st.Pool.Exec(ctx, `UPDATE runs SET created_at = now() - interval '1 minute', admitted_at = now() - interval '1 minute'`)
	require.NoError(t, err)
	queued, err := st.QueuedRuns(ctx, time.Second, 10)
	require.NoError(t, err, "queued = %+v err", queued)
	require.Len(t, queued, 1, "queued = %+v err=%v", queued, err)
	require.Equal(t, "Acme Corp", queued[0].TenantName, "queued = %+v err=%v", queued, err)
}

// TestRunsByStatus counts the runs of every tenant by status; statuses
// without runs are absent, and the counts follow the table.
func TestRunsByStatus(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	got, err := st.RunsByStatus(ctx)
	require.NoError(t, err, "empty table: %v,", got)
	require.Empty(t, got, "empty table: %v, %v", got, err)
	for _, r := range []struct{ tenant, status string }{
		{"t1", "succeeded"}, {"t2", "succeeded"}, {"t1", "failed"}, {"t2", "queued"},
	} {
		run := createRun(t, st, r.tenant)
		_, err = st.Pool.Exec(ctx, `UPDATE runs SET status = $2 WHERE run_id = $1`, run.RunID, r.status)
		require.NoError(t, err)
	}
	got, err = st.RunsByStatus(ctx)
	require.NoError(t, err)
	want := map[string]int64{"succeeded": 2, "failed": 1, "queued": 1}
	assert.Equal(t, fmt.Sprint(want), fmt.Sprint(got), "RunsByStatus = %v, want %v", got, want)
}
