package activities_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/fixtures"
	"github.com/weftworks/weft/graph"
)

// nodeResults returns the node_results rows of run-1 as node/attempt -> value.
func (b *bundle) nodeResults() map[string]string {
	b.t.Helper()
	rows, err := b.st.Pool.Query(context.Background(), `SELECT node_id, attempt, port, value::text, size FROM node_results
		WHERE tenant_id = $1 AND run_id = 'run-1'`, tenant)
	require.NoError(b.t, err)
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var node, port, v string
		var attempt, size int
		require.NoError(b.t, rows.Scan(&node, &attempt, &port, &v, &size))
		out[node+"/"+port] = v
		require.Equal(b.t, 1, attempt)
		require.Greater(b.t, size, execution.MaxEventValueBytes)
	}
	require.NoError(b.t, rows.Err())
	return out
}

// payload is a JSON object of n bytes or more, with a secret.
func payload(n int) string {
	return `{"token":"t0ps3cret","text":"` + strings.Repeat("x", n) + `"}`
}

func TestLiveResultsBetweenTheEventBoundAndTheClaimCheckAreRecorded(t *testing.T) {
	t.Parallel()
	b := newBundle(t, actionDoc, withActions(badAction))

	// 2 KiB: the event carries it; no row.
	res, err := b.runNode(b.input("echo", graph.KindAction, map[string]string{"in": payload(2 << 10)}))
	require.NoError(t, err)
	require.NotNil(t, res.Value.Inline)
	require.Empty(t, b.nodeResults(), "a value the event carries adds no write")

	// 40 KiB: claim-checked; no row.
	res, err = b.runNode(b.input("echo", graph.KindAction, map[string]string{"in": payload(40 << 10)}))
	require.NoError(t, err)
	require.NotNil(t, res.Value.Ref)
	require.Empty(t, b.nodeResults(), "a claim-checked value is not stored twice")

	// 20 KiB: the event leaves it out; recorded, redacted, once.
	in := b.input("echo", graph.KindAction, map[string]string{"in": payload(20 << 10)})
	for redispatch := range 2 { // the same attempt dispatched again
		in.Redispatch = redispatch
		res, err = b.runNode(in)
		require.NoError(t, err)
		require.NotNil(t, res.Value.Inline)
	}
	rows := b.nodeResults()
	require.Len(t, rows, 1)
	want := strings.Replace(payload(20<<10), "t0ps3cret", "[REDACTED]", 1)
	require.JSONEq(t, want, rows["echo/out"])
	var redispatch int
	require.NoError(t, b.st.Pool.QueryRow(context.Background(),
		`SELECT redispatch FROM node_results WHERE run_id = 'run-1' AND node_id = 'echo'`).Scan(&redispatch))
	require.Equal(t, 1, redispatch)
}

func TestRecordedSizeIsTheInterpretersView(t *testing.T) {
	t.Parallel()
	b := newBundle(t, actionDoc, withActions(badAction))
	// 1.5 KiB as the handler returns it, but Temporal's JSON encoding
	// escapes each '<' to six bytes: the event leaves it out, so it is
	// recorded, with the size the event reports.
	v := `{"html":"` + strings.Repeat("<", 1500) + `"}`
	_, err := b.runNode(b.input("echo", graph.KindAction, map[string]string{"in": v}))
	require.NoError(t, err)
	rows := b.nodeResults()
	require.JSONEq(t, v, rows["echo/out"])
	var size int
	require.NoError(t, b.st.Pool.QueryRow(context.Background(),
		`SELECT size FROM node_results WHERE run_id = 'run-1' AND node_id = 'echo'`).Scan(&size))
	enc, err := json.Marshal(json.RawMessage(v))
	require.NoError(t, err)
	require.Equal(t, len(enc), size)
}

func TestLocalNodeResultsAreRecordedToo(t *testing.T) {
	t.Parallel()
	b := newBundle(t, localDoc)
	big := `{"id":"a","n":5,"pad":"` + strings.Repeat("p", 20<<10) + `"}`
	res, err := b.runLocal(b.input("g", graph.KindGate, map[string]string{"in": big}))
	require.NoError(t, err)
	require.Equal(t, "pass", res.Port)
	require.JSONEq(t, big, b.nodeResults()["g/pass"], "a gate's pass-through value")
}

func TestSimulatedResultsAreNotRecorded(t *testing.T) {
	t.Parallel()
	// Fixtures over fixtures.MaxBytes, as a replay derives them from
	// outputs of claim-check sizes, load from the run row.
	huge := `{"id":"h","text":"` + strings.Repeat("h", fixtures.MaxBytes) + `"}`
	mid := `{"text":"` + strings.Repeat("m", 20<<10) + `"}`
	b, calls := simBundle(t, `{"echo":{"output":`+mid+`},"typed":{"output":`+huge+`}}`)
	res, err := b.runNode(b.simInput("echo", graph.KindAction, 1))
	require.NoError(t, err)
	require.JSONEq(t, mid, b.value(res.Value))
	res, err = b.runNode(b.simInput("typed", graph.KindAction, 1))
	require.NoError(t, err)
	require.NotNil(t, res.Value.Ref)
	require.JSONEq(t, huge, b.value(res.Value))
	require.Empty(t, b.nodeResults(), "simulations record nothing")
	require.Zero(t, calls.Load())
}
