package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/weftworks/weft/execution"
)

// TestLeanInputsEndToEnd: with WEFT_LEAN_INPUTS on, a run's attempts reach
// the worker without the run's constants (the history's inputs say lean
// and hold no permissions, checksum or actor) and run exactly as before:
// the live run writes its note with the permissions of its record, and a
// simulated run of the same workflow, whose inputs do not say simulation
// either, calls no action.
func TestLeanInputsEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.LeanInputs = true
	e.serveAPI(e.st)
	e.startWorker()
	e.publish("notes", notesGraph)

	id := e.run("notes", map[string]any{"title": "lean", "n": 1})
	v := e.wait(id, 60*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status, "%+v %v", v.Error, e.eventTypes(id))
	e.checkChain(id)
	e.requireLeanInputs(v.Temporal.WorkflowID)

	res := e.do(http.MethodPost, "/v1/workflows/notes/runs", e.token, map[string]any{"input": map[string]any{"title": "sim"},
		"idempotencyKey": uuid.NewString(), "mode": "simulation"})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	sim := res.JSON(t)["runId"].(string)
	sv := e.wait(sim, 60*time.Second)
	require.Equal(t, execution.StatusSucceeded, sv.Status, "%+v %v", sv.Error, e.eventTypes(sim))
	e.requireLeanInputs(sv.Temporal.WorkflowID)

	notes := e.do(http.MethodGet, "/v1/notes", e.token, nil).JSON(t)["notes"].([]any)
	require.Len(t, notes, 1, "the simulated run wrote a note")
	require.Equal(t, id, notes[0].(map[string]any)["runId"])
}

// requireLeanInputs checks every node attempt scheduled in the workflow's
// history carries a lean input.
func (e *env) requireLeanInputs(workflowID string) {
	e.t.Helper()
	it := e.tc.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	attempts := 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(e.t, err)
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil {
			continue
		}
		attempts++
		raw := a.GetInput().GetPayloads()[0].GetData()
		var in map[string]json.RawMessage
		require.NoError(e.t, json.Unmarshal(raw, &in))
		require.JSONEq(e.t, `true`, string(in["lean"]), "%s", raw)
		for _, member := range []string{"permissions", "checksum", "actor", "mode", "workflowKey"} {
			require.NotContains(e.t, in, member, "%s", raw)
		}
	}
	require.Positive(e.t, attempts)
}
