package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// fanOutGraph: three echoes run at once between a chain's two ends, so a
// run's attempts append concurrently (the worker's group commits).
const fanOutGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "first", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "a", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "b", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "c", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "join", "kind": "merge", "inputs": {"a": "any", "b": "any", "c": "any"}, "outputs": {"out": "any"}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [
    {"from": "in.out", "to": "first.in"},
    {"from": "first.out", "to": "a.in"}, {"from": "first.out", "to": "b.in"}, {"from": "first.out", "to": "c.in"},
    {"from": "a.out", "to": "join.a"}, {"from": "b.out", "to": "join.b"}, {"from": "c.out", "to": "join.c"},
    {"from": "join.out", "to": "out.in"}
  ]
}`

// TestOnePooledConnectionIsEnough: a process whose PostgreSQL pool holds
// a single connection migrates its database, takes concurrent enqueues
// through the API and runs them all to the end on its worker, whose
// attempts append at once (group commits, flushes, constants read). Every
// holder of a pooled connection must give it back without waiting for
// another (the listener has a connection of its own, outside the pool),
// or the smallest pool WEFT_DB_POOL_MAX_CONNS allows would stall.
func TestOnePooledConnectionIsEnough(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testinfra.NewEmptyDatabase(t)
	st, err := store.OpenWith(ctx, dbURL, store.Options{MaxConns: 1})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.EqualValues(t, 1, st.Pool.Config().MaxConns)
	// goose holds its session lock on one connection while it migrates.
	mctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	require.NoError(t, store.Migrate(mctx, st.Pool))
	tsrv, tc := testinfra.SharedClient(t)
	e := newEnvOnStore(t, st, dbURL, tsrv, tc)
	e.startWorker()
	e.publish("fan", fanOutGraph)

	const n = 12
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := testinfra.Do(t, e.srv.URL, "POST", "/v1/workflows/fan/runs", e.token,
				map[string]any{"input": map[string]any{"i": i}, "idempotencyKey": uuid.NewString()})
			if res.Status != 202 {
				errs[i] = fmt.Errorf("enqueue %d: %d %s", i, res.Status, res.Body)
				return
			}
			ids[i], _ = res.JSON(t)["runId"].(string)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	for i, id := range ids {
		v := e.wait(id, 120*time.Second)
		require.Equal(t, execution.StatusSucceeded, v.Status, "run %d: %+v %v", i, v.Error, e.eventTypes(id))
		require.JSONEq(t, fmt.Sprintf(`{"a": {"i": %d}, "b": {"i": %d}, "c": {"i": %d}}`, i, i, i), string(v.Output))
		e.checkChain(id)
	}
}
