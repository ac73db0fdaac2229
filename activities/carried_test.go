package activities_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
)

// carriedDoc: a read action (core.echo) and a workspace-write one.
const carriedDoc = `{"schemaVersion":1,"nodes":[
 {"id":"in","kind":"input","outputs":{"out":"any"}},
 {"id":"echo","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"core.echo","version":1}},
 {"id":"write","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"test.write","version":1}},
 {"id":"out","kind":"output","inputs":{"in":"any"}}],
 "edges":[{"from":"in.out","to":"echo.in"},{"from":"echo.out","to":"write.in"},{"from":"write.out","to":"out.in"}]}`

// carriedRun creates the run row the carried events are appended to.
func carriedRun(t *testing.T, b *bundle) {
	t.Helper()
	_, _, err := b.st.CreateRun(context.Background(), store.Run{RunID: "run-1", TenantID: tenant, WorkflowKey: "wf", Checksum: b.checksum,
		Mode: "live", Input: json.RawMessage(`{}`), InputHash: "h", WorkflowID: "weft-carried"}, "k")
	require.NoError(t, err)
}

// batch is the interpreter's buffer holding events with ordinals 1..through.
func batch(through int) *execution.EventBatch {
	b := &execution.EventBatch{Through: through, Run: &execution.RunUpdate{Status: execution.StatusRunning}}
	for o := 1; o <= through; o++ {
		b.Events = append(b.Events, execution.EventDraft{Key: fmt.Sprintf("run-1/echo/%d/node.started/%d", o, o),
			Type: execution.EventNodeStarted, NodeID: "echo", Attempt: o, At: time.Now().UTC(), Data: json.RawMessage(`{}`)})
	}
	return b
}

// lockRun holds the run row's lock, as a concurrent append does, so no
// append can commit until the returned function releases it.
func lockRun(t *testing.T, b *bundle) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.st.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM runs WHERE run_id = 'run-1' FOR UPDATE`)
	require.NoError(t, err)
	released := false
	release = func() {
		if !released {
			released = true
			require.NoError(t, tx.Rollback(ctx))
		}
	}
	t.Cleanup(release)
	return release
}

// eventKeys lists the run's log; the test fails on an event appended twice.
func eventKeys(t *testing.T, b *bundle) []string {
	t.Helper()
	evs, err := b.st.ListEvents(context.Background(), tenant, "run-1", 0, 100)
	require.NoError(t, err)
	seen := map[string]bool{}
	var keys []string
	for _, e := range evs {
		k := fmt.Sprintf("%s %s#%d", e.Type, e.NodeID, e.Attempt) // unique per event in these tests
		require.False(t, seen[k], "event %s appended twice", k)
		seen[k] = true
		keys = append(keys, k)
	}
	return keys
}

// A read action has no effect the log must precede: its attempt answers
// without waiting for the events it carries, confirming none it cannot
// prove appended; the append commits on its own afterwards, and the next
// attempt confirms it (from this worker's memory) while carrying the same
// events again appends none of them twice.
func TestReadActionDoesNotWaitForItsCarriedEvents(t *testing.T) {
	t.Parallel()
	b := newBundle(t, carriedDoc, withActions(writeAction(func(context.Context) {})))
	carriedRun(t, b)
	release := lockRun(t, b)

	in := b.input("echo", graph.KindAction, map[string]string{"in": `{"x":1}`})
	in.Events = batch(2)
	res, err := b.runNode(in)
	require.NoError(t, err)
	require.Equal(t, `{"x":1}`, b.value(res.Value))
	require.Zero(t, res.EventsThrough, "the append cannot have committed while the run row is locked")
	require.Empty(t, eventKeys(t, b))

	release()
	require.Eventually(t, func() bool { return len(eventKeys(t, b)) == 2 }, 30*time.Second, 20*time.Millisecond,
		"the detached append never committed")

	in.Attempt = 2
	in.Events = batch(3) // the unconfirmed prefix again, and one more
	res, err = b.runNode(in)
	require.NoError(t, err)
	require.GreaterOrEqual(t, res.EventsThrough, 2, "the first batch is known appended")
	require.LessOrEqual(t, res.EventsThrough, 3)
	require.Eventually(t, func() bool { return len(eventKeys(t, b)) == 3 }, 30*time.Second, 20*time.Millisecond)
	require.NoError(t, b.st.VerifyChain(context.Background(), tenant, "run-1"))
	run, err := b.st.GetRun(context.Background(), tenant, "run-1")
	require.NoError(t, err)
	require.Equal(t, execution.StatusRunning, run.Status, "the run update went with the batch")
}

// A workspace-write action's handler runs only once the events its attempt
// carries are in the log (node.started before the effect), and the
// attempt confirms them.
func TestWriteActionRunsAfterItsCarriedEvents(t *testing.T) {
	t.Parallel()
	var called atomic.Bool
	var b *bundle
	var logged []string
	b = newBundle(t, carriedDoc, withActions(writeAction(func(context.Context) {
		logged = eventKeys(t, b)
		called.Store(true)
	})))
	carriedRun(t, b)
	release := lockRun(t, b)

	in := b.input("write", graph.KindAction, map[string]string{"in": `{"x":1}`})
	in.Events = batch(2)
	type outcome struct {
		res execution.NodeResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := b.runNode(in)
		done <- outcome{res, err}
	}()
	// While the append cannot commit, the handler must not run. (A
	// pause, not a synchronisation: it can only hide a bug, never invent one.)
	time.Sleep(300 * time.Millisecond)
	require.False(t, called.Load(), "the handler ran before its attempt's events were in the log")
	release()
	var got outcome
	select {
	case got = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the attempt never finished")
	}
	require.NoError(t, got.err)
	require.True(t, called.Load())
	require.Len(t, logged, 2, "the handler saw the log without the carried events")
	require.Equal(t, 2, got.res.EventsThrough)
}

// writeAction is test.write: a workspace-write action calling seen when it runs.
func writeAction(seen func(context.Context)) catalog.Action {
	a := testAction("test.write", func(ctx context.Context, c catalog.Call) (json.RawMessage, error) {
		seen(ctx)
		return c.Input, nil
	})
	a.Contract.Risk = graph.RiskWorkspaceWrite
	return a
}

// identityBatch is a buffer as interpreter version 4 on keys it (run,
// node, attempt, type, discriminator), times with nanoseconds as workflow
// time has them, through ordinal through (of the first n events below).
func identityBatch(n int) *execution.EventBatch {
	at := time.Date(2026, 12, 2, 8, 2, 13, 628871123, time.UTC)
	all := []execution.EventDraft{
		{Key: "run-1/-/0/run.started", Type: execution.EventRunStarted, Data: json.RawMessage(`{"mode":"live","checksum":"c"}`)},
		{Key: "run-1/echo/1/node.started", Type: execution.EventNodeStarted, NodeID: "echo", Attempt: 1, Data: json.RawMessage(`{"kind":"action"}`)},
		{Key: "run-1/echo/1/node.completed", Type: execution.EventNodeCompleted, NodeID: "echo", Attempt: 1,
			Data: json.RawMessage(`{"port":"out","output":{"x":1,"apiToken":"hidden","z":[3,2,1]}}`)},
		{Key: "run-1/echo/1/edge.taken/echo.out>write.in", Type: execution.EventEdgeTaken, NodeID: "echo", Attempt: 1,
			Data: json.RawMessage(`{"from":"echo.out","to":"write.in"}`)},
		{Key: "run-1/write/1/node.attempt.lease_lost/r1", Type: execution.EventNodeAttemptLeaseLost, NodeID: "write", Attempt: 1},
		{Key: "run-1/write/1/node.started", Type: execution.EventNodeStarted, NodeID: "write", Attempt: 1, Data: json.RawMessage(`{"kind":"action"}`)},
	}
	b := &execution.EventBatch{Through: n + 10, Run: &execution.RunUpdate{Status: execution.StatusRunning, TemporalRunID: "01a235c6-89b9"}}
	for k, e := range all[:n] {
		e.At = at.Add(time.Duration(k*3_141_593) * time.Nanosecond)
		if k == 3 {
			e.At = e.At.Add(-7 * time.Millisecond).In(time.FixedZone("X", 3600)) // earlier than the one before
		}
		b.Events = append(b.Events, e)
	}
	return b
}

// The compact form (interpreter version 6, NodeInput.Carried) leaves the
// log exactly as the plain form of version 5 leaves it for the same
// events: the same rows (keys, types, nodes, attempts, times, redacted
// data) and the same hash chain, and the same run row. Two databases, the
// same run, the same attempts: one worker given plain inputs, the other
// compact ones, each through Temporal's JSON payloads.
func TestCompactCarriedEventsLogWhatThePlainFormLogs(t *testing.T) {
	t.Parallel()
	type rowSet struct {
		events [][]any
		run    []any
	}
	logOf := func(compact bool) rowSet {
		b := newBundle(t, carriedDoc, withActions(writeAction(func(context.Context) {})))
		carriedRun(t, b)
		for _, n := range []int{4, 6} { // the second attempt carries the first's events again
			in := b.input("write", graph.KindAction, map[string]string{"in": `{"x":1}`})
			in.Attempt = n / 2
			batch := identityBatch(n)
			if compact {
				c, ok := execution.CompactBatchOf(in.RunID, batch.Events, batch.Run, batch.Through)
				require.True(t, ok)
				in.Carried = c
			} else {
				in.Events = batch
			}
			res, err := b.runNode(in)
			require.NoError(t, err)
			require.Equal(t, batch.Through, res.EventsThrough, "a write action waits for its append")
		}
		require.NoError(t, b.st.VerifyChain(context.Background(), tenant, "run-1"))
		ctx := context.Background()
		rows, err := b.st.Pool.Query(ctx, `SELECT seq, event_key, type, schema_version, at, node_id, attempt, data::text, prev_hash, hash
			FROM run_events WHERE run_id = 'run-1' ORDER BY seq`)
		require.NoError(t, err)
		var out rowSet
		for rows.Next() {
			v, err := rows.Values()
			require.NoError(t, err)
			out.events = append(out.events, v)
		}
		require.NoError(t, rows.Err())
		var status, temporalRunID string
		var started time.Time
		require.NoError(t, b.st.Pool.QueryRow(ctx, `SELECT status, temporal_run_id, started_at FROM runs WHERE run_id = 'run-1'`).
			Scan(&status, &temporalRunID, &started))
		out.run = []any{status, temporalRunID, started.UTC()}
		return out
	}
	plain, compact := logOf(false), logOf(true)
	require.Len(t, plain.events, 6)
	require.Equal(t, plain, compact)
	require.Contains(t, plain.events[2][7], `"[REDACTED]"`, "the data went through the store's evidence path")
}

// A compact batch that does not name its events is refused before the
// node runs: permanently (the same input cannot succeed), and nothing of
// it is appended.
func TestMalformedCompactBatchIsRefused(t *testing.T) {
	t.Parallel()
	var called atomic.Bool
	b := newBundle(t, carriedDoc, withActions(writeAction(func(context.Context) { called.Store(true) })))
	carriedRun(t, b)
	in := b.input("write", graph.KindAction, map[string]string{"in": `{"x":1}`})
	in.Carried = &execution.CompactBatch{Base: time.Now(), Through: 1,
		Events: []execution.CompactEvent{{Key: "write/01/node.started"}}}
	_, err := b.runNode(in)
	app := wantAppErr(t, err, execution.ErrAppendRefused, true)
	require.Contains(t, app.Message(), execution.CodeCarriedInvalid)
	require.False(t, called.Load())
	require.Empty(t, eventKeys(t, b))
}

// Interpreter version 7: a workspace-write attempt carrying only the
// events after those an earlier read attempt carried (NodeInput.Suffix)
// runs its handler only once both are in the log, each event once and in
// order, though the earlier append was still waiting when it began.
func TestWriteActionCarryingASuffixRunsAfterTheEventsBeforeIt(t *testing.T) {
	t.Parallel()
	var called atomic.Bool
	var b *bundle
	var logged []string
	b = newBundle(t, carriedDoc, withActions(writeAction(func(context.Context) {
		logged = eventKeys(t, b)
		called.Store(true)
	})))
	carriedRun(t, b)
	release := lockRun(t, b)

	read := b.input("echo", graph.KindAction, map[string]string{"in": `{"x":1}`})
	read.Events = batch(2)
	res, err := b.runNode(read)
	require.NoError(t, err)
	require.Zero(t, res.EventsThrough, "the read attempt answered before its append committed")

	all := batch(3)
	suffix, ok := execution.CompactBatchOf("run-1", all.Events[2:], all.Run, 3)
	require.True(t, ok)
	suffix.After = 2
	write := b.input("write", graph.KindAction, map[string]string{"in": `{"x":1}`})
	write.Suffix = suffix
	type outcome struct {
		res execution.NodeResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := b.runNode(write)
		done <- outcome{res, err}
	}()
	// A pause, not a synchronisation: it can only hide a bug, never invent one.
	time.Sleep(300 * time.Millisecond)
	require.False(t, called.Load(), "the handler ran before the events before its own were in the log")
	release()
	var got outcome
	select {
	case got = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the attempt never finished")
	}
	require.NoError(t, got.err)
	require.Equal(t, []string{"node.started echo#1", "node.started echo#2", "node.started echo#3"}, logged)
	require.Equal(t, 3, got.res.EventsThrough)
	require.NoError(t, b.st.VerifyChain(context.Background(), tenant, "run-1"))
}
