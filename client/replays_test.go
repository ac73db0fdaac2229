package client

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStartReplaySendsTheContractsBody(t *testing.T) {
	ctx := context.Background()
	c, got := server(t, http.StatusAccepted, `{"replayId":"rpl_1","status":"running","workflowKey":"orders","draftRevision":3,"runs":5}`)
	acc, err := c.StartReplay(ctx, "orders", ReplayRequest{DraftRevision: 3, Last: 5, Status: []string{"succeeded", "failed"},
		Fixtures: json.RawMessage(`{"ship":{"output":{"ok":true}}}`)})
	require.NoError(t, err)
	require.Equal(t, ReplayAccepted{ReplayID: "rpl_1", Status: ReplayRunning, WorkflowKey: "orders", DraftRevision: 3, Runs: 5}, acc)
	// Explicit runs; nothing optional is sent when unset (the API defaults last to 20).
	_, err = c.StartReplay(ctx, "a b", ReplayRequest{DraftRevision: 2, Runs: []string{"run_1", "run_2"}})
	require.NoError(t, err)
	_, err = c.StartReplay(ctx, "orders", ReplayRequest{DraftRevision: 1})
	require.NoError(t, err)
	require.Equal(t, []recorded{
		{"POST", "/v1/workflows/orders/replays", "", "application/json", "Bearer tok",
			`{"draftRevision":3,"last":5,"status":["succeeded","failed"],"fixtures":{"ship":{"output":{"ok":true}}}}`},
		{"POST", "/v1/workflows/a%20b/replays", "", "application/json", "Bearer tok", `{"draftRevision":2,"runs":["run_1","run_2"]}`},
		{"POST", "/v1/workflows/orders/replays", "", "application/json", "Bearer tok", `{"draftRevision":1}`},
	}, *got)
}

func TestStartReplayRefusals(t *testing.T) {
	ctx := context.Background()
	c, _ := server(t, http.StatusUnprocessableEntity,
		`{"error":{"code":"INVALID_GRAPH","message":"draft revision 4 has 1 issue(s)","details":{"issues":[{"code":"DANGLING_EDGE","path":"/edges/0","message":"no node x"}]}}}`)
	_, err := c.StartReplay(ctx, "orders", ReplayRequest{DraftRevision: 4})
	require.Equal(t, "INVALID_GRAPH", Code(err))
	require.Len(t, err.(*Error).Issues(), 1)

	c, _ = server(t, http.StatusUnprocessableEntity, `{"error":{"code":"REPLAY_TOO_MANY_RUNS","message":"at most 50 runs","details":{"limit":50}}}`)
	_, err = c.StartReplay(ctx, "orders", ReplayRequest{DraftRevision: 4, Last: 51})
	var ce *Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "REPLAY_TOO_MANY_RUNS", ce.Code)
	require.EqualValues(t, 50, ce.Details["limit"])
}

// replayDoc is a finished replay as the contract's GET answers it.
const replayDoc = `{"replayId":"rpl_1","workflowKey":"orders","draftRevision":3,"status":"done",
 "createdAt":"2026-01-02T03:04:05Z","finishedAt":"2026-01-02T03:04:09Z",
 "summary":{"same":1,"outputChanged":1,"pathChanged":1,"nowFails":0,"nowSucceeds":0,"notReplayable":1,"pending":0},
 "runs":[
  {"runId":"run_a","verdict":"same","simulationRunId":"run_sa","recordedStatus":"succeeded","simulatedStatus":"succeeded","diff":{}},
  {"runId":"run_b","verdict":"path-changed","simulationRunId":"run_sb","recordedStatus":"succeeded","simulatedStatus":"succeeded",
   "diff":{"nodes":[{"nodeId":"ship","recorded":"succeeded","simulated":"skipped"}],"unrecorded":["hold"]}},
  {"runId":"run_c","verdict":"output-changed","simulationRunId":"run_sc","recordedStatus":"succeeded","simulatedStatus":"succeeded",
   "diff":{"output":[{"op":"replace","path":"/total","from":3,"to":4},{"op":"add","path":"/note","to":null},{"op":"remove","path":"/old","from":"x"}],"truncated":true}},
  {"runId":"run_d","verdict":"not-replayable","reason":"RESULTS_DELETED","recordedStatus":"succeeded"}]}`

func TestGetReplayDecodesTheReport(t *testing.T) {
	ctx := context.Background()
	c, got := server(t, http.StatusOK, replayDoc)
	r, err := c.GetReplay(ctx, "rpl/1")
	require.NoError(t, err)
	require.Equal(t, []recorded{{"GET", "/v1/replays/rpl%2F1", "", "", "Bearer tok", ""}}, *got)
	require.True(t, r.Done())
	require.Equal(t, time.Date(2026, 1, 2, 3, 4, 9, 0, time.UTC), r.FinishedAt.UTC())
	require.Equal(t, ReplaySummary{Same: 1, OutputChanged: 1, PathChanged: 1, NotReplayable: 1}, r.Summary)
	require.Equal(t, 2, r.Summary.Changed())
	require.Equal(t, 4, r.Summary.Total())
	require.Len(t, r.Runs, 4)
	require.Equal(t, []ReplayNodeChange{{NodeID: "ship", Recorded: "succeeded", Simulated: "skipped"}}, r.Runs[1].Diff.Nodes)
	require.Equal(t, []string{"hold"}, r.Runs[1].Diff.Unrecorded)
	ops := r.Runs[2].Diff.Output
	require.Equal(t, ReplayDiffOp{Op: "replace", Path: "/total", From: json.RawMessage(`3`), To: json.RawMessage(`4`)}, ops[0])
	// An added null is a value, not an absent one.
	require.Equal(t, json.RawMessage(`null`), ops[1].To)
	require.Nil(t, ops[1].From)
	require.True(t, r.Runs[2].Diff.Truncated)
	require.False(t, r.Runs[1].Diff.Truncated)
	require.Equal(t, "RESULTS_DELETED", r.Runs[3].Reason)
	require.Nil(t, r.Runs[3].Diff)

	var changed []string
	for _, run := range r.Runs {
		if ChangedVerdict(run.Verdict) {
			changed = append(changed, run.RunID)
		}
	}
	require.Equal(t, []string{"run_b", "run_c"}, changed)
	require.False(t, ChangedVerdict(VerdictPending))

	c, _ = server(t, http.StatusNotFound, `{"error":{"code":"NOT_FOUND","message":"replay not found"}}`)
	_, err = c.GetReplay(ctx, "rpl_other_tenant")
	require.True(t, IsNotFound(err))
}

func TestListReplays(t *testing.T) {
	ctx := context.Background()
	c, got := server(t, http.StatusOK, `{"replays":[{"replayId":"rpl_2","workflowKey":"orders","draftRevision":4,"status":"running",
		"createdAt":"2026-01-02T03:04:05Z","summary":{"same":0,"outputChanged":0,"pathChanged":0,"nowFails":0,"nowSucceeds":0,"notReplayable":0,"pending":3}}],"nextCursor":"c2"}`)
	page, err := c.ListReplays(ctx, "orders", 10, "c+1")
	require.NoError(t, err)
	require.Len(t, page.Replays, 1)
	require.Equal(t, 3, page.Replays[0].Summary.Pending)
	require.False(t, page.Replays[0].Done())
	require.Equal(t, "c2", *page.NextCursor)
	require.Equal(t, []recorded{{"GET", "/v1/workflows/orders/replays", "cursor=c%2B1&limit=10", "", "Bearer tok", ""}}, *got)
}
