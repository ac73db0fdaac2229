package activities_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/activities"
	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// durabilityDoc holds one node per test action below.
const durabilityDoc = `{"schemaVersion":1,"nodes":[
 {"id":"in","kind":"input","outputs":{"out":"any"}},
 {"id":"deaf","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"test.deaf","version":1},"timeoutMs":300},
 {"id":"pgdown","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"test.pgdown","version":1}},
 {"id":"nap","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"core.sleep","version":1}},
 {"id":"out","kind":"output","inputs":{"in":"any"}}],
 "edges":[{"from":"in.out","to":"deaf.in"},{"from":"in.out","to":"pgdown.in"},{"from":"in.out","to":"nap.in"},{"from":"deaf.out","to":"out.in"}]}`

func testAction(id string, h catalog.Handler) catalog.Action {
	return catalog.Action{
		Contract: graph.ActionContract{ID: id, Version: 1, Risk: graph.RiskRead,
			InputSchema: json.RawMessage(`{}`), OutputSchema: json.RawMessage(`{}`),
			RequiredPermissions: []string{}, TimeoutMs: 1000, Idempotency: catalog.IdempotencyNone},
		Handler: h,
	}
}

var (
	// deafAction ignores its context: only the attempt's own deadline stops it.
	deafAction = testAction("test.deaf", func(context.Context, catalog.Call) (json.RawMessage, error) {
		time.Sleep(10 * time.Second)
		return json.RawMessage(`{}`), nil
	})
	// pgDownAction fails the way a store call does when PostgreSQL drops the connection.
	pgDownAction = testAction("test.pgdown", func(context.Context, catalog.Call) (json.RawMessage, error) {
		return nil, fmt.Errorf("store: write note: %w", io.ErrUnexpectedEOF)
	})
)

// The node's deadline is the activity's own, even for a handler that
// ignores its context: ACTION_TIMEOUT (an attempt of the node) soon after
// the deadline, never Temporal's start-to-close timeout (a lost worker).
func TestDeadlineHoldsForAHandlerThatIgnoresIt(t *testing.T) {
	t.Parallel()
	b := newBundle(t, durabilityDoc, withActions(deafAction, pgDownAction))
	start := time.Now()
	_, err := b.runNode(b.input("deaf", graph.KindAction, map[string]string{"in": `{}`}))
	wantAppErr(t, err, execution.ErrActionTimeout, false)
	d := time.Since(start)
	require.LessOrEqual(t, d, time.Duration(5*time.Second), "took %v with a 300 ms node timeout", d)
}

// An unreachable PostgreSQL inside an attempt is an infrastructure fault,
// whatever the handler wrapped it in: the interpreter re-dispatches it
// without spending an attempt.
func TestStoreOutageIsAnInfrastructureFault(t *testing.T) {
	t.Parallel()
	b := newBundle(t, durabilityDoc, withActions(deafAction, pgDownAction))
	_, err := b.runNode(b.input("pgdown", graph.KindAction, map[string]string{"in": `{}`}))
	wantAppErr(t, err, execution.ErrStoreUnavailable, true)
}

// A stopping worker lets a running attempt go on for its drain window
// (minus the hand-back margin), then hands it back as WORKER_DRAINED.
func TestDrainingWorkerHandsBackRunningAttempts(t *testing.T) {
	t.Parallel()
	const drain = 800 * time.Millisecond
	b := newBundle(t, durabilityDoc, withActions(deafAction, pgDownAction), withDrain(drain))
	stop := make(chan struct{})
	b.env.SetWorkerStopChannel(stop)
	time.AfterFunc(100*time.Millisecond, func() { close(stop) })
	start := time.Now()
	_, err := b.runNode(b.input("nap", graph.KindAction, map[string]string{"in": `{"ms":20000}`}))
	wantAppErr(t, err, execution.ErrWorkerDrained, true)
	took := time.Since(start)
	handback := 100*time.Millisecond + drain - activities.HandbackBefore(drain)
	require.GreaterOrEqual(t, took, handback, "handed back after %v, want about %v", took, handback)
	require.LessOrEqual(t, took, handback+3*time.Second, "handed back after %v, want about %v", took, handback)

	// An attempt that finishes within the window is not disturbed.
	stop2 := make(chan struct{})
	b.env.SetWorkerStopChannel(stop2)
	close(stop2)
	res, err := b.runNode(b.input("nap", graph.KindAction, map[string]string{"in": `{"ms":50}`}))
	require.NoError(t, err, "%+v", res)
	require.Equal(t, `{"sleptMs":50}`, b.value(res.Value), "%+v %v", res, err)
}

// The agent harness reports an unreachable model provider with the
// provider's code; the interpreter must recognise it as an infrastructure
// fault.
func TestProviderOutageCodeIsAnInfrastructureFault(t *testing.T) {
	require.True(t, provider.CodeUnavailable == execution.ErrProviderUnavailable, "provider.CodeUnavailable %q is not execution.ErrProviderUnavailable", provider.CodeUnavailable)
	require.True(t, execution.IsInfraError(provider.CodeUnavailable), "provider.CodeUnavailable %q is not execution.ErrProviderUnavailable", provider.CodeUnavailable)
}

func TestHandbackBefore(t *testing.T) {
	for drain, want := range map[time.Duration]time.Duration{
		25 * time.Second: 2 * time.Second, 4 * time.Second: time.Second, time.Second: 250 * time.Millisecond, 0: 0,
	} {
		got := activities.HandbackBefore(drain)
		require.Equal(t, want, got, "HandbackBefore(%v) = %v, want %v", drain, got, want)
	}
}
