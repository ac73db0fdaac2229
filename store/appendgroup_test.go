package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// runDrafts is n events of run's node "n", keyed per run.
func runDrafts(runID string, first, n int) []execution.EventDraft {
	var out []execution.EventDraft
	for i := first; i < first+n; i++ {
		out = append(out, draft(fmt.Sprintf("%s/n/%d/node.started", runID, i), execution.EventNodeStarted, fmt.Sprintf(`{"i":%d}`, i)))
	}
	return out
}

// transactionsOf is the distinct transactions (xmin) that wrote runs' events.
func transactionsOf(t *testing.T, st *store.Store, runIDs ...string) int {
	t.Helper()
	var n int
	require.NoError(t, st.Pool.QueryRow(context.Background(),
		`SELECT count(DISTINCT xmin::text) FROM run_events WHERE run_id = ANY($1)`, runIDs).Scan(&n))
	return n
}

// A group's runs commit together, in one transaction, each exactly as
// AppendEvents would append it (seq, hash chain, run update); a request
// that is malformed, or whose run the tenant does not have, gets its own
// error and takes nothing of the others with it.
func TestAppendEventsGroupCommitsRunsInOneTransaction(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	a, b, c := createRun(t, st, "t1"), createRun(t, st, "t1"), createRun(t, st, "t1")
	errs := st.AppendEventsGroup(ctx, []store.AppendRequest{
		{TenantID: "t1", RunID: c.RunID, Events: runDrafts(c.RunID, 1, 2)},
		{TenantID: "t1", RunID: a.RunID, Events: runDrafts(a.RunID, 1, 3), Update: &execution.RunUpdate{Status: execution.StatusRunning}},
		{TenantID: "t1", RunID: b.RunID, Events: []execution.EventDraft{draft("", execution.EventNodeStarted, "")}}, // no key
		{TenantID: "t2", RunID: b.RunID, Events: runDrafts(b.RunID, 1, 1)},                                          // another tenant's run
		{TenantID: "t1", RunID: b.RunID, Events: runDrafts(b.RunID, 1, 1)},
	})
	require.Len(t, errs, 5)
	assert.NoError(t, errs[0])
	assert.NoError(t, errs[1])
	assert.Equal(t, failure.CodeInvalidRequest, failure.CodeOf(errs[2]), "malformed draft: %v", errs[2])
	assert.ErrorIs(t, errs[3], failure.ErrNotFound)
	assert.NoError(t, errs[4])
	for run, n := range map[string]int{a.RunID: 3, b.RunID: 1, c.RunID: 2} {
		ev := listAll(t, st, "t1", run)
		require.Len(t, ev, n, "run %s", run)
		for i, e := range ev {
			assert.Equal(t, int64(i+1), e.Seq)
		}
		require.NoError(t, st.VerifyChain(ctx, "t1", run))
	}
	assert.Equal(t, 1, transactionsOf(t, st, a.RunID, b.RunID, c.RunID), "the group's events were not committed in one transaction")
	got, err := st.GetRun(ctx, "t1", a.RunID)
	require.NoError(t, err)
	assert.Equal(t, execution.StatusRunning, got.Status)

	// Again, with what is committed plus more: keys already held are
	// skipped, the chains go on.
	errs = st.AppendEventsGroup(ctx, []store.AppendRequest{
		{TenantID: "t1", RunID: a.RunID, Events: runDrafts(a.RunID, 1, 4)},
		{TenantID: "t1", RunID: c.RunID, Events: runDrafts(c.RunID, 1, 2)},
	})
	require.Equal(t, []error{nil, nil}, errs)
	assert.Len(t, listAll(t, st, "t1", a.RunID), 4)
	assert.Len(t, listAll(t, st, "t1", c.RunID), 2)
	require.NoError(t, st.VerifyChain(ctx, "t1", a.RunID))
}

// Two requests of one run in a group are appended in the order given.
func TestAppendEventsGroupKeepsARunsRequestsInOrder(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	a, b := createRun(t, st, "t1"), createRun(t, st, "t1")
	errs := st.AppendEventsGroup(ctx, []store.AppendRequest{
		{TenantID: "t1", RunID: b.RunID, Events: runDrafts(b.RunID, 1, 2)},
		{TenantID: "t1", RunID: a.RunID, Events: runDrafts(a.RunID, 1, 1)},
		{TenantID: "t1", RunID: b.RunID, Events: runDrafts(b.RunID, 2, 2)}, // repeats 2, adds 3
	})
	require.Equal(t, []error{nil, nil, nil}, errs)
	ev := listAll(t, st, "t1", b.RunID)
	require.Len(t, ev, 3)
	for i, e := range ev {
		assert.JSONEq(t, fmt.Sprintf(`{"i":%d}`, i+1), string(e.Data), "seq %d", e.Seq)
	}
	require.NoError(t, st.VerifyChain(ctx, "t1", b.RunID))
}

// When the database refuses one request of a group, the transaction
// commits nothing, and every request is then appended on its own: the
// refused one gets the error and appends nothing, the others commit.
func TestAppendEventsGroupFallsBackToAppendsOfItsOwn(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	// A trigger in this test's own database refuses one event key.
	_, err := st.Pool.Exec(ctx, `
CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.event_key LIKE '%/poison' THEN RAISE EXCEPTION 'poisoned event %', NEW.event_key; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_poison BEFORE INSERT ON run_events FOR EACH ROW EXECUTE FUNCTION refuse_poison();`)
	require.NoError(t, err)
	a, b, c := createRun(t, st, "t1"), createRun(t, st, "t1"), createRun(t, st, "t1")
	errs := st.AppendEventsGroup(ctx, []store.AppendRequest{
		{TenantID: "t1", RunID: a.RunID, Events: runDrafts(a.RunID, 1, 2)},
		{TenantID: "t1", RunID: b.RunID, Events: append(runDrafts(b.RunID, 1, 1), draft(b.RunID+"/poison", execution.EventNodeStarted, ""))},
		{TenantID: "t1", RunID: c.RunID, Events: runDrafts(c.RunID, 1, 3)},
	})
	require.Len(t, errs, 3)
	assert.NoError(t, errs[0])
	require.Error(t, errs[1])
	assert.Contains(t, errs[1].Error(), "poisoned event")
	assert.NoError(t, errs[2])
	assert.Len(t, listAll(t, st, "t1", a.RunID), 2)
	assert.Empty(t, listAll(t, st, "t1", b.RunID), "the refused request appended part of its batch")
	assert.Len(t, listAll(t, st, "t1", c.RunID), 3)
	require.NoError(t, st.VerifyChain(ctx, "t1", a.RunID))
	require.NoError(t, st.VerifyChain(ctx, "t1", c.RunID))
}
