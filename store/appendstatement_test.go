package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// An append prepares its statement once per connection. A connection whose
// statement the server no longer holds (dropped, or planned for a
// weft_append_events a migration replaced) prepares it again and sends the
// append once more, instead of failing every append on that connection
// until the pool replaces it.
func TestAppendPreparesItsStatementAgainWhenTheServerLostIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, testinfra.NewDatabase(t)+"&pool_max_conns=1")
	require.NoError(t, err)
	t.Cleanup(st.Close)
	run := createRun(t, st, "t1")
	other := createRun(t, st, "t1")
	ev := func(runID, node string) execution.EventDraft {
		return execution.EventDraft{Key: runID + "/" + node + "/1/node.started", Type: execution.EventNodeStarted, NodeID: node,
			Attempt: 1, At: t0, Data: json.RawMessage(`{}`)}
	}
	// dropStatement makes the server forget the one connection's prepared
	// append statement, behind pgx's back (its cache still names it).
	dropStatement := func() {
		t.Helper()
		c, err := st.Pool.Acquire(ctx)
		require.NoError(t, err)
		defer c.Release()
		var name string
		require.NoError(t, c.QueryRow(ctx, `SELECT name FROM pg_prepared_statements WHERE statement = $1`, store.AppendEventsSQL).Scan(&name))
		require.NoError(t, c.Conn().PgConn().Deallocate(ctx, name))
	}

	require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{ev(run.RunID, "a")}, nil))
	dropStatement()
	require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{ev(run.RunID, "b")}, nil))

	dropStatement()
	errs := st.AppendEventsGroup(ctx, []store.AppendRequest{
		{TenantID: "t1", RunID: run.RunID, Events: []execution.EventDraft{ev(run.RunID, "c")}},
		{TenantID: "t1", RunID: other.RunID, Events: []execution.EventDraft{ev(other.RunID, "a")}},
	})
	require.Equal(t, []error{nil, nil}, errs)

	require.Len(t, listAll(t, st, "t1", run.RunID), 3)
	require.Len(t, listAll(t, st, "t1", other.RunID), 1)
}

// An append PostgreSQL itself refuses (here an event whose time is past
// the last timestamp PostgreSQL can hold) leaves the connection's
// prepared statement in place: the statement is sound, so forgetting it
// would cost every such refusal a DEALLOCATE and a new PREPARE.
func TestAppendRefusedByPostgresKeepsItsStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, testinfra.NewDatabase(t)+"&pool_max_conns=1")
	require.NoError(t, err)
	t.Cleanup(st.Close)
	run := createRun(t, st, "t1")
	tooLate := time.Date(295000, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := func(node string, at time.Time) execution.EventDraft {
		return execution.EventDraft{Key: run.RunID + "/" + node + "/1/node.started", Type: execution.EventNodeStarted, NodeID: node,
			Attempt: 1, At: at, Data: json.RawMessage(`{}`)}
	}
	prepared := func() int {
		t.Helper()
		var n int
		require.NoError(t, st.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE statement = $1`, store.AppendEventsSQL).Scan(&n))
		return n
	}

	require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{ev("a", t0)}, nil))
	require.Equal(t, 1, prepared())

	err = st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{ev("b", tooLate)}, nil)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, 1, prepared(), "a refusal by PostgreSQL dropped the prepared statement")
	errs := st.AppendEventsGroup(ctx, []store.AppendRequest{
		{TenantID: "t1", RunID: run.RunID, Events: []execution.EventDraft{ev("c", t0)}},
		{TenantID: "t1", RunID: run.RunID, Events: []execution.EventDraft{ev("d", tooLate)}},
	})
	require.ErrorAs(t, errs[1], &pgErr)
	require.Equal(t, 1, prepared(), "a refusal by PostgreSQL in a group dropped the prepared statement")

	require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{ev("e", t0)}, nil))
	require.Len(t, listAll(t, st, "t1", run.RunID), 3) // a, c (sent again alone), e
}
