package worker_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/worker"
)

// TestRetentionKeepsBindingsForTheNamespaceRetention runs the worker's
// retention pass against real PostgreSQL and a real dev server whose
// namespace keeps closed workflows for 60 days: a run closed 40 days ago
// goes with WEFT_RUN_RETENTION_DAYS=30, but its idempotency binding stays
// until the namespace's retention (plus a day) has passed since the run
// closed, so the key cannot start a run whose workflow id Temporal might
// still hold.
func TestRetentionKeepsBindingsForTheNamespaceRetention(t *testing.T) {
	srv := testinfra.OwnTemporal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ns := "retention-" + uuid.NewString()[:8]
	nsc, err := client.NewNamespaceClient(client.Options{HostPort: srv.FrontendHostPort()})
	require.NoError(t, err)
	defer nsc.Close()
	require.NoError(t, nsc.Register(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: ns,
		WorkflowExecutionRetentionPeriod: durationpb.New(60 * 24 * time.Hour)}))
	tc, err := client.Dial(client.Options{HostPort: srv.FrontendHostPort(), Namespace: ns,
		Logger: nil})
	require.NoError(t, err)
	defer tc.Close()

	// The namespace's retention is what the worker reads.
	var keep time.Duration
	deadline := time.Now().Add(30 * time.Second)
	for { // a new namespace takes a moment to be served
		keep, err = worker.NamespaceRetention(ctx, tc, ns)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.NoError(t, err, "namespace retention %s,", keep)
	require.Equal(t, time.Duration(60*24*time.Hour), keep, "namespace retention %s, %v", keep, err)
	_, err = worker.NamespaceRetention(ctx, tc, "no-such-namespace")
	require.Error(t, err, "a missing namespace has a retention")

	st := testinfra.NewStore(t)
	now := time.Now()
	finished := now.Add(-40 * 24 * time.Hour)
	run := store.Run{RunID: uuid.NewString(), TenantID: "t1", WorkflowKey: "wf", Revision: 1, Checksum: "c", Mode: "live",
		Input: json.RawMessage(`{}`), InputHash: "h", Origin: execution.Origin{Kind: "api"},
		Actor: execution.Actor{Kind: "user", Sub: "ada"}, WorkflowID: "weft-retention-test"}
	_, _, err = st.CreateRun(ctx, run, "key-1")
	require.NoError(t, err)
	require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{{Key: "a", Type: "run.succeeded", At: now}},
		&execution.RunUpdate{Status: execution.StatusSucceeded}))
	_, err = st.Pool.Exec(ctx, `UPDATE runs SET finished_at = $2 WHERE run_id = $1`, run.RunID, finished)
	require.NoError(t, err)
	_, err = st.SaveScheduleFiringInput(ctx, "t1", "sch_x", "sch_x@old", json.RawMessage(`{}`))
	require.NoError(t, err)
	r := worker.Retention{Store: st, Temporal: tc, Namespace: ns, RunDays: 30, EventDays: 30,
		Logger: slog.New(slog.DiscardHandler)}

	// Retention off: nothing goes but week-old schedule firings (none yet).
	off := r
	off.RunDays, off.EventDays = 0, 0
	rep, err := off.Once(ctx, now)
	require.NoError(t, err, "retention off: %+v", rep)
	require.Equal(t, int64(0), rep.Runs.Runs, "retention off: %+v %v", rep, err)
	require.Equal(t, int64(0), rep.ScheduleFirings, "retention off: %+v %v", rep, err)

	rep, err = r.Once(ctx, now)
	require.NoError(t, err)
	require.Equal(t, int64(1), rep.Runs.Runs, "first pass: %+v", rep)
	require.Equal(t, int64(0), rep.Bindings, "first pass: %+v", rep)
	require.Equal(t, keep, rep.NamespaceRetention, "first pass: %+v", rep)
	_, err = st.GetRun(ctx, "t1", run.RunID)
	require.Error(t, err, "the run is still there")
	retry := run
	retry.RunID = uuid.NewString()
	_, _, err = st.CreateRun(ctx, retry, "key-1")
	require.Equal(t, store.CodeRunDeleted, failure.CodeOf(err), "the key while its binding lasts: %v", err)

	// 20 days later the run closed 60 days ago: not yet past the
	// namespace's retention plus the margin.
	rep, err = r.Once(ctx, now.Add(20*24*time.Hour))
	require.NoError(t, err, "pass within the namespace's retention: %+v", rep)
	require.Equal(t, int64(0), rep.Bindings, "pass within the namespace's retention: %+v %v", rep, err)
	require.Equal(t, int64(1), rep.ScheduleFirings, "pass within the namespace's retention: %+v %v", rep, err)
	// 22 days later it closed 62 days ago: past 60 days and the margin;
	// the binding goes and the key is free.
	rep, err = r.Once(ctx, now.Add(22*24*time.Hour))
	require.NoError(t, err, "later pass: %+v", rep)
	require.Equal(t, int64(1), rep.Bindings, "later pass: %+v %v", rep, err)
	_, created, err := st.CreateRun(ctx, retry, "key-1")
	require.NoError(t, err, "the key after its binding expired: %v", created)
	require.True(t, created, "the key after its binding expired: %v %v", created, err)

	// Without the namespace's retention no binding is ever deleted.
	blind := r
	blind.Namespace = "no-such-namespace"
	_, err = blind.Once(ctx, now.Add(400*24*time.Hour))
	require.Error(t, err, "a pass that could not read the namespace's retention reported no error")
}
