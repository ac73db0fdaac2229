package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// A carried suffix (AppendRequest.After) is appended only once appends
// that vouched for the whole prefix (Through) logged every event before
// it; otherwise it is refused with EVENTS_GAP and writes nothing: no event,
// no run update, no vouch. A flush (AppendEvents) never vouches, so a
// suffix after one is refused until a carrier vouches.
func TestAppendCarriedRefusesASuffixAfterAGap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testinfra.NewStore(t)
	run := createRun(t, st, "t1")
	ev := func(key, typ string, ms int) execution.EventDraft {
		return execution.EventDraft{Key: run.RunID + "/" + key, Type: typ, NodeID: "n", Attempt: 1,
			At: t0.Add(time.Duration(ms) * time.Millisecond), Data: json.RawMessage(`{}`)}
	}
	keys := func() []string {
		var out []string
		for _, e := range listAll(t, st, "t1", run.RunID) {
			out = append(out, e.Type)
		}
		return out
	}
	through := func() int {
		var n int
		require.NoError(t, st.Pool.QueryRow(ctx, `SELECT events_through FROM runs WHERE run_id = $1`, run.RunID).Scan(&n))
		return n
	}
	req := func(after, thru int, events ...execution.EventDraft) store.AppendRequest {
		return store.AppendRequest{TenantID: "t1", RunID: run.RunID, Events: events, After: after, Through: thru}
	}

	// Ordinals 1-2 went to a first carrier whose append has not committed;
	// the second carrier's suffix (3) comes first: refused, nothing written,
	// not even its run update.
	suffix := req(2, 3, ev("n/1/node.completed", execution.EventNodeCompleted, 3))
	suffix.Update = &execution.RunUpdate{Status: execution.StatusRunning, TemporalRunID: "tr"}
	err := st.AppendCarried(ctx, suffix)
	require.ErrorIs(t, err, store.ErrEventsGap)
	require.Equal(t, store.CodeEventsGap, failure.CodeOf(err))
	require.Empty(t, keys())
	require.Zero(t, through())
	got, err := st.GetRun(ctx, "t1", run.RunID)
	require.NoError(t, err)
	require.Equal(t, execution.StatusQueued, got.Status)

	// A flush of 1-2 logs them but does not vouch: the suffix is still refused.
	require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{
		ev("-/0/run.started", execution.EventRunStarted, 1), ev("n/1/node.started", execution.EventNodeStarted, 2)}, nil))
	require.ErrorIs(t, st.AppendCarried(ctx, suffix), store.ErrEventsGap)
	require.Zero(t, through())

	// The first carrier's prefix commits (its events already logged by
	// key) and vouches through 2: now the suffix is appended, and vouches 3.
	require.NoError(t, st.AppendCarried(ctx, req(0, 2,
		ev("-/0/run.started", execution.EventRunStarted, 1), ev("n/1/node.started", execution.EventNodeStarted, 2))))
	require.Equal(t, 2, through())
	require.NoError(t, st.AppendCarried(ctx, suffix))
	require.Equal(t, 3, through())
	require.Equal(t, []string{execution.EventRunStarted, execution.EventNodeStarted, execution.EventNodeCompleted}, keys())
	got, err = st.GetRun(ctx, "t1", run.RunID)
	require.NoError(t, err)
	require.Equal(t, execution.StatusRunning, got.Status)

	// A suffix after an ordinal already vouched for (a repeat) is appended;
	// a stale vouch never moves the column back.
	require.NoError(t, st.AppendCarried(ctx, req(1, 3, ev("n/1/node.started", execution.EventNodeStarted, 2), ev("n/1/node.completed", execution.EventNodeCompleted, 3))))
	require.Equal(t, 3, through())

	// In a group, a refused suffix is its request's error alone.
	other := createRun(t, st, "t1")
	errs := st.AppendEventsGroup(ctx, []store.AppendRequest{
		req(9, 10, ev("n/2/node.started", execution.EventNodeStarted, 9)),
		{TenantID: "t1", RunID: other.RunID, Through: 1, Events: []execution.EventDraft{{Key: other.RunID + "/-/0/run.started",
			Type: execution.EventRunStarted, At: t0, Data: json.RawMessage(`{}`)}}},
	})
	require.ErrorIs(t, errs[0], store.ErrEventsGap)
	require.NoError(t, errs[1])
	require.Len(t, listAll(t, st, "t1", other.RunID), 1)
	require.Len(t, keys(), 3)
	require.NoError(t, st.VerifyChain(ctx, "t1", run.RunID))

	// Ordinals that cannot describe the batch are a bad request.
	require.Equal(t, failure.CodeInvalidRequest, failure.CodeOf(st.AppendCarried(ctx, req(3, 3, ev("x/1/node.started", execution.EventNodeStarted, 4)))))
}
