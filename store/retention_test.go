package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// closedRun creates a run of tenant keyed idem with an event, a
// transcript, a claim-checked value, two ledger entries (an agent tool
// call's and an action node's) and a note, and settles it as finished at.
func closedRun(t *testing.T, st *store.Store, tenant, idem string, finished time.Time) store.Run {
	t.Helper()
	ctx := context.Background()
	r, created, err := st.CreateRun(ctx, newRunValue(tenant, "wf", idem), idem)
	if err != nil || !created {
		t.Fatalf("create run: %v", err)
	}
	if err := st.AppendEvents(ctx, tenant, r.RunID, []execution.EventDraft{draft("a", "run.started", "")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveAgentTranscript(ctx, store.AgentTranscript{TenantID: tenant, RunID: r.RunID, NodeID: "agent",
		AgentKey: "a", AgentRevision: 1, Attempt: 1, Transcript: json.RawMessage(`{}`)}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutValue(ctx, tenant, r.RunID, "n", "out", json.RawMessage(`{"big":true}`)); err != nil {
		t.Fatal(err)
	}
	agentKey := url.PathEscape(r.RunID) + "/agent/1"
	if _, err := st.LedgerRecord(ctx, tenant, "test.write@1", agentKey, "ih", json.RawMessage(`{"ok":1}`)); err != nil {
		t.Fatal(err)
	}
	actionKey := url.PathEscape(tenant) + "/" + url.PathEscape(r.RunID) + "/save"
	if _, err := st.WriteNoteOnce(ctx, tenant, r.RunID, "save", actionKey, "ih2", "kept", json.RawMessage(`{}`),
		execution.Actor{Kind: "user", Sub: "ada"}); err != nil {
		t.Fatal(err)
	}
	if err := st.AppendEvents(ctx, tenant, r.RunID, []execution.EventDraft{draft("z", "run.succeeded", "")},
		&execution.RunUpdate{Status: execution.StatusSucceeded}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, `UPDATE runs SET finished_at = $2 WHERE run_id = $1`, r.RunID, finished); err != nil {
		t.Fatal(err)
	}
	return r
}

func count(t *testing.T, st *store.Store, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := st.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDeleteRunsClosedBeforeKeepsTheBinding(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	now := time.Now()
	oldFinish := now.Add(-40 * 24 * time.Hour)
	oldKey := "old-" + uuid.NewString()
	old := closedRun(t, st, "t1", oldKey, oldFinish)
	recent := closedRun(t, st, "t1", "recent-"+uuid.NewString(), now.Add(-time.Hour))
	// The same keys in another tenant, and a run still open.
	foreign := closedRun(t, st, "t2", oldKey, now.Add(-time.Hour))
	open := createRun(t, st, "t1")

	res, err := st.DeleteRunsClosedBefore(ctx, now.Add(-30*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if res != (store.RetentionResult{Runs: 1, Events: 2, Transcripts: 1, Values: 1, LedgerEntries: 2}) {
		t.Fatalf("deleted %+v", res)
	}
	if _, err := st.GetRun(ctx, "t1", old.RunID); !errors.Is(err, failure.ErrNotFound) {
		t.Fatalf("old run still there: %v", err)
	}
	for _, r := range []store.Run{recent, open} {
		if _, err := st.GetRun(ctx, "t1", r.RunID); err != nil {
			t.Fatalf("run %s deleted: %v", r.RunID, err)
		}
	}
	if _, err := st.GetRun(ctx, "t2", foreign.RunID); err != nil {
		t.Fatal(err)
	}
	for table, n := range map[string]int{"agent_transcripts": 0, "run_values": 0} {
		if got := count(t, st, `SELECT count(*) FROM `+table+` WHERE run_id = $1`, old.RunID); got != n {
			t.Fatalf("%s rows of the deleted run: %d", table, got)
		}
	}
	// Ledger entries of the other runs are untouched; notes (the tenant's
	// workspace) stay.
	if got := count(t, st, `SELECT count(*) FROM action_ledger`); got != 4 {
		t.Fatalf("%d ledger entries left, want 4 (2 runs x 2)", got)
	}
	if got := count(t, st, `SELECT count(*) FROM notes WHERE run_id = $1`, old.RunID); got != 1 {
		t.Fatalf("the deleted run's note: %d", got)
	}

	// The binding outlives the run: the key cannot start another run.
	if got := count(t, st, `SELECT count(*) FROM idempotency_bindings WHERE run_id = $1 AND run_deleted_at IS NOT NULL
		AND run_finished_at = $2`, old.RunID, oldFinish); got != 1 {
		t.Fatalf("binding of the deleted run: %d", got)
	}
	if _, ok, err := st.BoundRun(ctx, "t1", "wf", oldKey); err != nil || ok {
		t.Fatalf("bound run of a deleted run: ok=%v err=%v", ok, err)
	}
	_, _, err = st.CreateRun(ctx, newRunValue("t1", "wf", oldKey), oldKey)
	if failure.CodeOf(err) != store.CodeRunDeleted {
		t.Fatalf("reused key: %v", err)
	}
	var fe *failure.Error
	if !errors.As(err, &fe) || fe.Details["runId"] != old.RunID {
		t.Fatalf("details %+v", fe)
	}

	// A second pass deletes nothing more.
	if res, err := st.DeleteRunsClosedBefore(ctx, now.Add(-30*24*time.Hour)); err != nil || res.Runs != 0 {
		t.Fatalf("second pass %+v %v", res, err)
	}

	// Bindings go once their run finished before the cutoff the worker
	// computes from the namespace's retention; then the key is free.
	if n, err := st.DeleteExpiredBindings(ctx, oldFinish); err != nil || n != 0 {
		t.Fatalf("expired before the finish: %d %v", n, err)
	}
	if n, err := st.DeleteExpiredBindings(ctx, oldFinish.Add(time.Second)); err != nil || n != 1 {
		t.Fatalf("expired bindings: %d %v", n, err)
	}
	again, created, err := st.CreateRun(ctx, newRunValue("t1", "wf", oldKey), oldKey)
	if err != nil || !created || again.RunID == old.RunID {
		t.Fatalf("key after its binding expired: %+v %v %v", again, created, err)
	}
	// Bindings of live runs are never expired.
	if got := count(t, st, `SELECT count(*) FROM idempotency_bindings WHERE tenant_id = 't1'`); got != 3 {
		t.Fatalf("%d bindings of t1", got)
	}
}

func TestCheckChainReportsTheFirstBreak(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	if err := st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{
		draft("a", "x.y", `{"n":1}`), draft("b", "x.y", `{"n":2}`), draft("c", "x.y", `{"n":3}`), draft("d", "x.y", `{"n":4}`),
	}, nil); err != nil {
		t.Fatal(err)
	}
	rep, err := st.CheckChain(ctx, "t1", run.RunID)
	if err != nil || rep != (store.ChainReport{Intact: true, Events: 4}) {
		t.Fatalf("intact chain: %+v %v", rep, err)
	}
	if _, err := st.CheckChain(ctx, "t2", run.RunID); !errors.Is(err, failure.ErrNotFound) {
		t.Fatalf("another tenant's run: %v", err)
	}
	if _, err := st.Pool.Exec(ctx, `UPDATE run_events SET data = '{"n":20}' WHERE run_id = $1 AND seq = 2`, run.RunID); err != nil {
		t.Fatal(err)
	}
	rep, err = st.CheckChain(ctx, "t1", run.RunID)
	if err != nil || rep.Intact || rep.FirstBrokenSeq != 2 || rep.Events != 4 || rep.Reason == "" {
		t.Fatalf("edited chain: %+v %v", rep, err)
	}
}

func TestScheduleFiringInputFirstOneWins(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	if _, found, err := st.ScheduleFiringInput(ctx, "t1", "sch_a", "k"); err != nil || found {
		t.Fatalf("before: %v %v", found, err)
	}
	got, err := st.SaveScheduleFiringInput(ctx, "t1", "sch_a", "k", json.RawMessage(`{"name":"first"}`))
	if err != nil || string(got) != `{"name": "first"}` {
		t.Fatalf("first save: %s %v", got, err)
	}
	// A second execution of the same firing gets the stored input back.
	got, err = st.SaveScheduleFiringInput(ctx, "t1", "sch_a", "k", json.RawMessage(`{"name":"second"}`))
	if err != nil || string(got) != `{"name": "first"}` {
		t.Fatalf("second save: %s %v", got, err)
	}
	if in, found, err := st.ScheduleFiringInput(ctx, "t1", "sch_a", "k"); err != nil || !found || string(in) != `{"name": "first"}` {
		t.Fatalf("read: %s %v %v", in, found, err)
	}
	if _, found, _ := st.ScheduleFiringInput(ctx, "t2", "sch_a", "k"); found {
		t.Fatal("another tenant reads the firing")
	}
	if n, err := st.DeleteScheduleFiringsBefore(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("prune recent: %d %v", n, err)
	}
	if n, err := st.DeleteScheduleFiringsBefore(ctx, time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("prune: %d %v", n, err)
	}
}
