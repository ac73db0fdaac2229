package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

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

	if res, err := ok(context.Background(), in); err != nil || res.Port != "out" {
		t.Fatalf("ok = %+v, %v", res, err)
	}
	if _, err := failing(context.Background(), in); err == nil {
		t.Fatal("failing returned no error")
	}
	if _, err := cancelling(cancelledCtx, in); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelling = %v", err)
	}
	want := []seenNode{{"action", "succeeded"}, {"action", "failed"}, {"action", "cancelled"}}
	if len(obs.seen) != len(want) {
		t.Fatalf("observed %v, want %v", obs.seen, want)
	}
	for i := range want {
		if obs.seen[i] != want[i] {
			t.Errorf("observation %d = %v, want %v", i, obs.seen[i], want[i])
		}
	}

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 log lines, got %d:\n%s", len(lines), buf.String())
	}
	for i, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("line %d is not JSON: %s", i, l)
		}
		if rec["run"] != "run-1" || rec["node"] != "save" || rec["kind"] != "action" || rec["attempt"] != float64(2) || rec["outcome"] != want[i].outcome {
			t.Errorf("line %d = %s", i, l)
		}
	}
	if !strings.Contains(lines[1], `"errorType":"SCHEMA_VIOLATION"`) {
		t.Errorf("failure line lacks the error type: %s", lines[1])
	}
}

// TestNilObserver: without an observer attempts are still logged.
func TestNilObserver(t *testing.T) {
	var buf bytes.Buffer
	run := observed(func(context.Context, execution.NodeInput) (execution.NodeResult, error) {
		return execution.NodeResult{Port: "pass"}, nil
	}, nil, slog.New(slog.NewJSONHandler(&buf, nil)))
	if _, err := run(context.Background(), execution.NodeInput{RunID: "r", Kind: graph.KindGate}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"run":"r"`) {
		t.Errorf("log = %s", buf.String())
	}
}

// TestLoggedAppends: a batch that changes the run status is logged with the run id.
func TestLoggedAppends(t *testing.T) {
	var buf bytes.Buffer
	appendEvents := loggedAppends(func(context.Context, execution.AppendEventsInput) error { return nil },
		slog.New(slog.NewJSONHandler(&buf, nil)))
	if err := appendEvents(context.Background(), execution.AppendEventsInput{TenantID: "t", RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Fatalf("a batch without a status change logged: %s", buf.String())
	}
	err := appendEvents(context.Background(), execution.AppendEventsInput{TenantID: "t", RunID: "r1",
		Run: &execution.RunUpdate{Status: "failed", Error: &execution.RunError{Code: "NODE_FAILED", NodeID: "save"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"msg":"run status"`, `"run":"r1"`, `"status":"failed"`, `"errorCode":"NODE_FAILED"`, `"errorNode":"save"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %s: %s", want, buf.String())
		}
	}
}
