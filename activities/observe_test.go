package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

type seenNode struct{ kind, outcome string }

type fakeObserver struct{ seen []seenNode }

func (f *fakeObserver) ObserveNode(kind, outcome string, d time.Duration) {
	f.seen = append(f.seen, seenNode{kind, outcome})
}

// TestObservedNodeAttempts: every attempt is observed by kind and outcome
// and logged as one JSON line carrying the run id.
func TestObservedNodeAttempts(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	obs := &fakeObserver{}
	in := execution.NodeInput{TenantID: "t1", RunID: "run-1", WorkflowKey: "wf", NodeID: "save", Kind: graph.KindAction, Attempt: 2}

	ok := observed(func(context.Context, execution.NodeInput) (execution.NodeResult, error) {
		return execution.NodeResult{Port: "out"}, nil
	}, obs, log)
	failing := observed(func(context.Context, execution.NodeInput) (execution.NodeResult, error) {
		return execution.NodeResult{}, temporal.NewNonRetryableApplicationError("bad", execution.ErrSchemaViolation, nil)
	}, obs, log)
	cancelledCtx, cancel := context.WithCancel(context.Background())
	cancel()
	cancelling := observed(func(ctx context.Context, _ execution.NodeInput) (execution.NodeResult, error) {
		return execution.NodeResult{}, ctx.Err()
	}, obs, log)

	res, err := ok(context.Background(), in)
	require.NoError(t, err, "ok = %+v,", res)
	require.Equal(t, "out", res.Port, "ok = %+v, %v", res, err)
	_, err = failing(context.Background(), in)
	require.Error(t, err, "failing returned no error")
	_, err = cancelling(cancelledCtx, in)
	require.ErrorIs(t, err, context.Canceled, "cancelling = %v", err)
	want := []seenNode{{"action", "succeeded"}, {"action", "failed"}, {"action", "cancelled"}}
	require.Len(t, obs.seen, len(want), "observed %v, want %v", obs.seen, want)
	for i := range want {
		assert.True(t, obs.seen[i] == want[i], "observation %d = %v, want %v", i, obs.seen[i], want[i])
	}

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3, "want 3 log lines, got %d:\n%s", len(lines), buf.String())
	for i, l := range lines {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &rec), "line %d is not JSON: %s", i, l)
		assert.False(t, rec["run"] != "run-1" || rec["node"] != "save" || rec["kind"] != "action" || rec["attempt"] != float64(2) || rec["outcome"] != want[i].outcome, "line %d = %s", i, l)
	}
	assert.Contains(t, lines[1], `"errorType":"SCHEMA_VIOLATION"`, "failure line lacks the error type: %s", lines[1])
}

// TestNilObserver: without an observer attempts are still logged.
func TestNilObserver(t *testing.T) {
	var buf bytes.Buffer
	run := observed(func(context.Context, execution.NodeInput) (execution.NodeResult, error) {
		return execution.NodeResult{Port: "pass"}, nil
	}, nil, slog.New(slog.NewJSONHandler(&buf, nil)))
	_, err := run(context.Background(), execution.NodeInput{RunID: "r", Kind: graph.KindGate})
	require.NoError(t, err)
	assert.Contains(t, buf.String(), `"run":"r"`, "log = %s", buf.String())
}

// TestLoggedAppends: a batch that changes the run status is logged with the run id.
func TestLoggedAppends(t *testing.T) {
	var buf bytes.Buffer
	appendEvents := loggedAppends(func(context.Context, execution.AppendEventsInput) error { return nil },
		slog.New(slog.NewJSONHandler(&buf, nil)))
	require.NoError(t, appendEvents(context.Background(), execution.AppendEventsInput{TenantID: "t", RunID: "r1"}))
	require.Equal(t, 0, buf.Len(), "a batch without a status change logged: %s", buf.String())
	err := appendEvents(context.Background(), execution.AppendEventsInput{TenantID: "t", RunID: "r1",
		Run: &execution.RunUpdate{Status: "failed", Error: &execution.RunError{Code: "NODE_FAILED", NodeID: "save"}}})
	require.NoError(t, err)
	for _, want := range []string{`"msg":"run status"`, `"run":"r1"`, `"status":"failed"`, `"errorCode":"NODE_FAILED"`, `"errorNode":"save"`} {
		assert.Contains(t, buf.String(), want, "log lacks %s: %s", want, buf.String())
	}
}
