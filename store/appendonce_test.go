package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// appendStep is one weft_append_events call of appendScript.
type appendStep struct {
	run          string
	events       []execution.EventDraft
	upd          *execution.RunUpdate
	onlyIfActive bool
	repeatFirst  bool
}

// appendAnswer is what weft_append_events answered to one call.
type appendAnswer struct {
	Found, Closed bool
	Status        string
	Appended      int
	Err           string
}

// Migration 00025 rewrote weft_append_events' body to update the run row
// once per call instead of up to four times. It must answer and write
// exactly what 00023's body did, call for call: the same script of
// appends (keys the run holds, a key repeated in one call, the move to
// running with the Temporal run id, a call with nothing to append, the
// approvals projection, a queued run settled in one call, the
// forward-only terminal projection, the reconciler's only-if-active, a run
// of another tenant) runs on a database migrated to 00024 and on one
// migrated to the latest, and the answers, the event rows, the run rows
// (updated_at aside) and the approvals must match. Since migration 00026
// the latest database answers through the third signature, with no
// carried ordinals (what a flush sends): it must write the same. Since
// migration 00029 that signature inserts a call's events in one statement
// (00028's database, the loop's last, is compared too).
func TestAppendEventsOneRunUpdateWritesWhat00023Wrote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	open := func(version int64) *store.Store {
		pool, err := pgxpool.New(ctx, testinfra.NewEmptyDatabase(t))
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		if version > 0 {
			require.NoError(t, store.MigrateTo(ctx, pool, version))
		} else {
			require.NoError(t, store.Migrate(ctx, pool))
		}
		return &store.Store{Pool: pool}
	}
	before, prev, after := open(24), open(28), open(0)

	const tenant = "t1"
	runs := []string{"00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b", "00000000-0000-4000-8000-00000000000c"}
	ev := func(run, key, typ, node string, attempt, ms int, data string) execution.EventDraft {
		return execution.EventDraft{Key: run + "/" + key, Type: typ, NodeID: node, Attempt: attempt,
			At: t0.Add(time.Duration(ms) * time.Millisecond), Data: json.RawMessage(data)}
	}
	a, b, c := runs[0], runs[1], runs[2]
	running := &execution.RunUpdate{Status: execution.StatusRunning, TemporalRunID: "temporal-1"}
	out := execution.Value{Inline: json.RawMessage(`{"n":1}`)}
	script := []appendStep{
		{run: a, events: []execution.EventDraft{
			ev(a, "start", execution.EventRunStarted, "", 0, 1, `{"mode":"live"}`),
			ev(a, "n1/started", execution.EventNodeStarted, "n1", 1, 2, `{"kind":"action"}`),
		}, upd: running, repeatFirst: true},
		// Carried again with one new event; another Temporal run id is not taken.
		{run: a, events: []execution.EventDraft{
			ev(a, "start", execution.EventRunStarted, "", 0, 1, `{"mode":"other"}`),
			ev(a, "n1/started", execution.EventNodeStarted, "n1", 1, 2, `{"kind":"action"}`),
			ev(a, "n1/approval", execution.EventNodeApprovalRequested, "n1", 1, 3, `{"request":1,"timeoutMs":5000}`),
		}, upd: &execution.RunUpdate{Status: execution.StatusRunning, TemporalRunID: "temporal-2"}, repeatFirst: true},
		// Nothing new.
		{run: a, events: []execution.EventDraft{ev(a, "n1/started", execution.EventNodeStarted, "n1", 1, 2, `{}`)},
			upd: &execution.RunUpdate{Status: execution.StatusRunning, TemporalRunID: "temporal-3"}},
		{run: a, events: []execution.EventDraft{
			ev(a, "n1/decided", execution.EventNodeApprovalDecided, "n1", 1, 4, `{"request":1,"decision":"approve","comment":"ok"}`),
			ev(a, "n1/completed", execution.EventNodeCompleted, "n1", 1, 5, `{"port":"out"}`),
			ev(a, "n2/approval", execution.EventNodeApprovalRequested, "n2", 1, 6, `{"request":1}`),
		}},
		{run: a, events: []execution.EventDraft{
			ev(a, "n1/completed", execution.EventNodeCompleted, "n1", 1, 5, `{"port":"out"}`),
			ev(a, "end", execution.EventRunSucceeded, "", 0, 7, `{"output":{"n":1}}`),
		}, upd: &execution.RunUpdate{Status: execution.StatusSucceeded, Output: &out}},
		// Forward only: a terminal run keeps its status; its events still land.
		{run: a, events: []execution.EventDraft{ev(a, "late", execution.EventNodeCompleted, "n3", 1, 8, `{}`)},
			upd: &execution.RunUpdate{Status: execution.StatusFailed, Error: &execution.RunError{Code: "X", Message: "late"}}},
		// The reconciler appends nothing to a closed run.
		{run: a, events: []execution.EventDraft{ev(a, "reconciled", execution.EventRunFailed, "", 0, 9, `{}`)},
			upd: &execution.RunUpdate{Status: execution.StatusFailed}, onlyIfActive: true},
		// A queued run started and settled in one call.
		{run: b, events: []execution.EventDraft{
			ev(b, "start", execution.EventRunStarted, "", 0, 1, `{}`),
			ev(b, "end", execution.EventRunFailed, "", 0, 2, `{"error":{"code":"E"}}`),
		}, upd: &execution.RunUpdate{Status: execution.StatusFailed, TemporalRunID: "temporal-b",
			Error: &execution.RunError{Code: "E", Message: "boom"}}},
		// Only the Temporal run id, then the reconciler's append to an open run.
		{run: c, upd: &execution.RunUpdate{Status: execution.StatusRunning, TemporalRunID: "temporal-c"}},
		{run: c, events: []execution.EventDraft{ev(c, "cancel", execution.EventRunCancelled, "", 0, 3, `{}`)},
			upd: &execution.RunUpdate{Status: execution.StatusCancelled}, onlyIfActive: true},
		// Another tenant's run is not found.
		{run: "00000000-0000-4000-8000-0000000000ff", events: []execution.EventDraft{ev(a, "x", execution.EventNodeStarted, "n", 1, 1, `{}`)}},
	}

	play := func(st *store.Store) (answers []appendAnswer) {
		for _, id := range runs {
			_, _, err := st.CreateRun(ctx, store.Run{RunID: id, TenantID: tenant, WorkflowKey: "wf", Checksum: "c",
				Mode: "live", Input: json.RawMessage(`{}`), InputHash: "h", WorkflowID: "weft-" + id}, "idem-"+id)
			require.NoError(t, err)
		}
		for i, s := range script {
			var ans appendAnswer
			var err error
			ans.Found, ans.Status, ans.Appended, ans.Closed, err = store.AppendAnswer(ctx, st, tenant, s.run, s.events, s.upd, s.onlyIfActive, s.repeatFirst)
			if err != nil {
				ans.Err = err.Error()
			}
			require.Empty(t, ans.Err, "step %d", i)
			answers = append(answers, ans)
		}
		return answers
	}
	rows := func(st *store.Store, sql string) []string {
		r, err := st.Pool.Query(ctx, sql)
		require.NoError(t, err)
		defer r.Close()
		var got []string
		for r.Next() {
			v, err := r.Values()
			require.NoError(t, err)
			got = append(got, fmt.Sprint(v))
		}
		require.NoError(t, r.Err())
		return got
	}
	const (
		eventRows = `SELECT run_id, tenant_id, seq, event_key, type, schema_version, at, node_id, attempt, data::text, prev_hash, hash
			FROM run_events ORDER BY run_id, seq`
		// A run update without events happens at now(): compared as such.
		runRows = `SELECT run_id, status, last_seq, last_hash,
			CASE WHEN started_at > now() - interval '1 hour' THEN 'now' ELSE started_at::text END, finished_at, output::text, error::text, temporal_run_id
			FROM runs ORDER BY run_id`
		approvalRows = `SELECT run_id, node_id, request, status, attempt, timeout_ms, requested_at, decided_at, decision, comment, requested_seq
			FROM approvals ORDER BY run_id, node_id, request`
	)

	wantAnswers := play(before)
	want := rows(before, eventRows)
	require.Len(t, want, 11) // the script appends eleven events: the test is not comparing two empty logs
	for _, st := range []*store.Store{prev, after} {
		require.Equal(t, wantAnswers, play(st))
		require.Equal(t, want, rows(st, eventRows))
		require.Equal(t, rows(before, runRows), rows(st, runRows))
		require.Equal(t, rows(before, approvalRows), rows(st, approvalRows))
		for _, id := range runs {
			require.NoError(t, st.VerifyChain(ctx, tenant, id), "run %s", id)
		}
	}
}

// Migration 00029 replaces the third signature's body (one INSERT per
// call); rolled back to 00028 the body is 00027's again, body for body, and
// up again 00029's; the older signatures keep theirs throughout. What each
// body writes is compared in TestAppendEventsOneRunUpdateWritesWhat00023Wrote.
func TestAppendEventsOneInsertMigrationUpAndDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testinfra.NewStore(t)
	installed := func() (third string, others []string) {
		t.Helper()
		r, err := st.Pool.Query(ctx, `SELECT pronargs, prosrc FROM pg_proc WHERE proname = 'weft_append_events' ORDER BY pronargs`)
		require.NoError(t, err)
		defer r.Close()
		for r.Next() {
			var n int
			var src string
			require.NoError(t, r.Scan(&n, &src))
			if n == 22 {
				third = src
			} else {
				others = append(others, src)
			}
		}
		require.NoError(t, r.Err())
		return third, others
	}
	appendOne := func() {
		t.Helper()
		run := createRun(t, st, "t1").RunID
		require.NoError(t, st.AppendEvents(ctx, "t1", run, []execution.EventDraft{{Key: run + "/a/1/node.started",
			Type: execution.EventNodeStarted, NodeID: "a", Attempt: 1, At: t0, Data: json.RawMessage(`{}`)}}, nil))
		require.NoError(t, st.VerifyChain(ctx, "t1", run))
	}

	third, others := installed()
	require.Equal(t, migrationFunctionBody(t, "00029_append_events_one_insert.sql"), third)
	appendOne()
	require.NoError(t, store.MigrateTo(ctx, st.Pool, 28))
	rolled, rolledOthers := installed()
	require.Equal(t, migrationFunctionBody(t, "00027_notify_watched_runs.sql"), rolled, "rolled back: 00027's body")
	require.Equal(t, others, rolledOthers)
	appendOne()
	require.NoError(t, store.Migrate(ctx, st.Pool))
	third, _ = installed()
	require.Equal(t, migrationFunctionBody(t, "00029_append_events_one_insert.sql"), third)
	appendOne()
}

// migrationFunctionBody is the body (between "LANGUAGE plpgsql AS $$" and
// "$$;") of the first function a migration file's Up section creates: what
// pg_proc.prosrc holds once it is applied.
func migrationFunctionBody(t *testing.T, file string) string {
	t.Helper()
	raw, err := os.ReadFile("migrations/" + file)
	require.NoError(t, err)
	up, _, _ := strings.Cut(string(raw), "-- +goose Down")
	_, fn, ok := strings.Cut(up, "LANGUAGE plpgsql AS $$")
	require.True(t, ok, file)
	fn, _, ok = strings.Cut(fn, "$$;")
	require.True(t, ok, file)
	return fn
}
