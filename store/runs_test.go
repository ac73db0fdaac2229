package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

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
	if err != nil || !created {
		t.Fatalf("create run: created=%v err=%v", created, err)
	}
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
		if r.err != nil {
			t.Fatalf("caller %d: %v", i, r.err)
		}
		if r.created {
			createdCount++
		}
		if runID == "" {
			runID = r.run.RunID
		}
		if r.run.RunID != runID {
			t.Fatalf("caller %d got run %s, others %s", i, r.run.RunID, runID)
		}
		if r.run.Status != execution.StatusQueued {
			t.Fatalf("status %q", r.run.Status)
		}
	}
	if createdCount != 1 {
		t.Fatalf("created=%d, want exactly 1", createdCount)
	}
	var runs, bindings int
	if err := st.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM idempotency_bindings)`).Scan(&runs, &bindings); err != nil {
		t.Fatal(err)
	}
	if runs != 1 || bindings != 1 {
		t.Fatalf("runs=%d bindings=%d, want 1 and 1", runs, bindings)
	}
}

func TestCreateRunReturnsBoundRunForOtherInput(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	first, created, err := st.CreateRun(ctx, newRunValue("t1", "wf", "k"), "k")
	if err != nil || !created {
		t.Fatal(created, err)
	}
	other := newRunValue("t1", "wf", "k")
	other.InputHash = "h2"
	got, created, err := st.CreateRun(ctx, other, "k")
	if err != nil || created {
		t.Fatalf("created=%v err=%v", created, err)
	}
	if got.RunID != first.RunID || got.InputHash != "h1" {
		t.Fatalf("bound run %+v", got)
	}
	// The same key in another tenant is another binding.
	_, created, err = st.CreateRun(ctx, newRunValue("t2", "wf", "k"), "k")
	if err != nil || !created {
		t.Fatalf("other tenant: created=%v err=%v", created, err)
	}
}

func TestCreateRunRefusesIncompleteRun(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	r := newRunValue("t1", "wf", "k")
	r.WorkflowID = ""
	_, _, err := st.CreateRun(context.Background(), r, "k")
	if failure.CodeOf(err) != failure.CodeInvalidRequest {
		t.Fatalf("err = %v", err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.GetRun(ctx, "t1", created.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Actor != in.Actor || got.Origin != in.Origin || *got.DraftRevision != 3 || string(got.Usage) != "{}" ||
		len(got.Permissions) != 1 || got.WorkflowID != in.WorkflowID || got.StartedAt != nil {
		t.Fatalf("round trip: %+v", got)
	}
	if _, err := st.GetRun(ctx, "t2", created.RunID); !errors.Is(err, failure.ErrNotFound) {
		t.Fatalf("other tenant: %v", err)
	}
	if _, err := st.GetRun(ctx, "t1", "nope"); !errors.Is(err, failure.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
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
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.RunID)
	}
	createRun(t, st, "t2")

	var seen []string
	var before *store.RunCursor
	for {
		page, err := st.ListRuns(ctx, "t1", store.RunFilter{Before: before, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			seen = append(seen, r.RunID)
		}
		c := page[len(page)-1].Cursor()
		before = &c
	}
	if len(seen) != 5 {
		t.Fatalf("paged %d runs, want 5: %v", len(seen), seen)
	}
	if seen[0] != ids[4] || seen[4] != ids[0] {
		t.Fatalf("not newest first: %v vs %v", seen, ids)
	}
	b, err := st.ListRuns(ctx, "t1", store.RunFilter{WorkflowKey: "b"})
	if err != nil || len(b) != 2 {
		t.Fatalf("filter by key: %d %v", len(b), err)
	}
	none, err := st.ListRuns(ctx, "t1", store.RunFilter{Status: execution.StatusRunning})
	if err != nil || len(none) != 0 {
		t.Fatalf("filter by status: %d %v", len(none), err)
	}
}

func TestQueuedRunsAndTemporalRunID(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	old := createRun(t, st, "t1")
	running := createRun(t, st, "t2")
	if _, err := st.Pool.Exec(ctx, `UPDATE runs SET created_at = now() - interval '1 minute', admitted_at = now() - interval '1 minute'`); err != nil {
		t.Fatal(err)
	}
	fresh := createRun(t, st, "t1")
	_ = fresh
	if err := st.AppendEvents(ctx, "t2", running.RunID, nil, &execution.RunUpdate{Status: execution.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	q, err := st.QueuedRuns(ctx, 30*time.Second, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 1 || q[0].RunID != old.RunID {
		t.Fatalf("queued: %+v", q)
	}
	if err := st.SetTemporalRunID(ctx, old.RunID, "tr-1"); err != nil {
		t.Fatal(err)
	}
	if err := st.SetTemporalRunID(ctx, old.RunID, "tr-2"); err != nil {
		t.Fatal(err)
	}
	got, _ := st.GetRun(ctx, "t1", old.RunID)
	if got.TemporalRunID != "tr-1" {
		t.Fatalf("temporal run id %q, want the first", got.TemporalRunID)
	}
	if err := st.SetTemporalRunID(ctx, "missing", "x"); !errors.Is(err, failure.ErrNotFound) {
		t.Fatalf("missing run: %v", err)
	}
}

func TestBoundRunAndTenantName(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	if _, ok, err := st.BoundRun(ctx, "t1", "wf", "k"); err != nil || ok {
		t.Fatalf("unbound key: ok=%v err=%v", ok, err)
	}
	r := newRunValue("t1", "wf", "k")
	r.TenantName = "Acme Corp"
	created, _, err := st.CreateRun(ctx, r, "k")
	if err != nil {
		t.Fatal(err)
	}
	if created.TenantName != "Acme Corp" {
		t.Fatalf("created tenant name %q", created.TenantName)
	}
	bound, ok, err := st.BoundRun(ctx, "t1", "wf", "k")
	if err != nil || !ok || bound.RunID != created.RunID || bound.TenantName != "Acme Corp" || bound.InputHash != "h1" {
		t.Fatalf("bound = %+v ok=%v err=%v", bound, ok, err)
	}
	// Bindings are scoped by tenant and workflow key.
	for _, k := range [][2]string{{"t2", "wf"}, {"t1", "other"}} {
		if _, ok, err := st.BoundRun(ctx, k[0], k[1], "k"); err != nil || ok {
			t.Fatalf("%v: ok=%v err=%v", k, ok, err)
		}
	}
	// The sweeper reads it back with the queued runs.
	if _, err := st.Pool.Exec(ctx, `UPDATE runs SET created_at = now() - interval '1 minute', admitted_at = now() - interval '1 minute'`); err != nil {
		t.Fatal(err)
	}
	queued, err := st.QueuedRuns(ctx, time.Second, 10)
	if err != nil || len(queued) != 1 || queued[0].TenantName != "Acme Corp" {
		t.Fatalf("queued = %+v err=%v", queued, err)
	}
}

// TestRunsByStatus counts the runs of every tenant by status; statuses
// without runs are absent, and the counts follow the table.
func TestRunsByStatus(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	got, err := st.RunsByStatus(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("empty table: %v, %v", got, err)
	}
	for _, r := range []struct{ tenant, status string }{
		{"t1", "succeeded"}, {"t2", "succeeded"}, {"t1", "failed"}, {"t2", "queued"},
	} {
		run := createRun(t, st, r.tenant)
		if _, err := st.Pool.Exec(ctx, `UPDATE runs SET status = $2 WHERE run_id = $1`, run.RunID, r.status); err != nil {
			t.Fatal(err)
		}
	}
	got, err = st.RunsByStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"succeeded": 2, "failed": 1, "queued": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("RunsByStatus = %v, want %v", got, want)
	}
}
