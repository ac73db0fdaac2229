package bridges_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/bridges"
	"github.com/weftworks/weft/execution"
)

// TestScheduleTemplatedInputFiresWithTheResolvedName is the variables
// seed's worked example: a schedule whose input says {{ agent.name }} with
// an explicit agentId keeps the raw template and fires runs that receive
// the resolved name; once its creator loses agents.read, firings are
// refused and recorded.
func TestScheduleTemplatedInputFiresWithTheResolvedName(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.publish("items", itemGraph)
	res := v.do(http.MethodPost, "/v1/agents", v.token, map[string]any{"key": "triage", "name": "Support triage",
		"definition": map[string]any{"instructions": "Triage."}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)

	input := map[string]any{"id": "{{ agent.name }}", "day": "{{context.today}}", "note": `literal \{{ braces`, "n": 7}
	res = v.do(http.MethodPost, "/v1/workflows/items/schedules", v.token,
		map[string]any{"every": "1s", "input": input, "bindings": map[string]string{"agentId": "triage"}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	created := res.JSON(t)
	id := created["scheduleId"].(string)
	require.Equal(t, true, created["templated"])
	require.Equal(t, map[string]any{"agentId": "triage"}, created["bindings"])
	require.Equal(t, "{{ agent.name }}", created["input"].(map[string]any)["id"], "the schedule keeps the raw template")

	// It fires; the run receives the resolved input.
	eventually(t, 20*time.Second, "a templated firing's run", func() bool { return len(v.scheduleRuns("items", id)) >= 1 })
	keys := v.idempotencyKeys("items")
	first := v.scheduleRuns("items", id)[0]
	var firingKey string
	for k, runID := range keys {
		if runID == first.RunID {
			firingKey = k
		}
	}
	at, err := time.Parse(time.RFC3339, strings.TrimPrefix(firingKey, id+"@"))
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(first.Input, &got))
	require.Equal(t, map[string]any{"id": "Support triage", "day": at.UTC().Format("2006-01-02"),
		"note": "literal {{ braces", "n": float64(7)}, got)
	eventually(t, 20*time.Second, "the run to succeed", func() bool {
		r, err := v.st.GetRun(context.Background(), v.tenant, first.RunID)
		return err == nil && r.Status == execution.StatusSucceeded
	})
	row, err := v.st.GetSchedule(context.Background(), v.tenant, id)
	require.NoError(t, err)
	require.Contains(t, string(row.Input), "{{ agent.name }}", "the stored schedule is untouched")

	// The input is stored with the firing before its enqueue: an enqueue
	// of the same firing retried after the agent was renamed reuses it and
	// finds its run, not an IDEMPOTENCY_CONFLICT.
	res = v.do(http.MethodPost, "/v1/agents/triage/revisions", v.token, map[string]any{"name": "Renamed triage",
		"definition": map[string]any{"instructions": "Triage."}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	enq, err := bridges.NewEnqueuer(v.st, v.starter, v.vars, v.log)
	require.NoError(t, err)
	again, err := enq.FireSchedule(context.Background(), v.tenant, id, at)
	require.NoError(t, err)
	require.Nil(t, again.Refusal, "%+v", again.Refusal)
	require.Equal(t, first.RunID, again.RunID)
	require.False(t, again.Created)
	// A later firing resolves anew.
	later, err := enq.FireSchedule(context.Background(), v.tenant, id, at.Add(time.Hour))
	require.NoError(t, err)
	require.True(t, later.Created, "%+v", later)
	run, err := v.st.GetRun(context.Background(), v.tenant, later.RunID)
	require.NoError(t, err)
	require.Contains(t, string(run.Input), `"Renamed triage"`)

	// The creator loses agents.read: firings are refused, recorded with
	// the firing key, and start no run.
	require.Equal(t, http.StatusCreated, v.revoke(v.token, "alice", auth.ScopeAgentsRead).Status)
	var refusal map[string]any
	eventually(t, 20*time.Second, "a refused firing", func() bool {
		res := v.do(http.MethodGet, "/v1/workflows/items/schedules/"+id, v.token, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		refusal, _ = res.JSON(t)["lastRefusal"].(map[string]any)
		return refusal != nil
	})
	require.Equal(t, "PERMISSION_DENIED", refusal["code"])
	require.Equal(t, []any{auth.ScopeAgentsRead}, refusal["missing"])
	require.Contains(t, refusal["message"], "/input/id")
	_, bound := v.idempotencyKeys("items")[refusal["firingKey"].(string)]
	require.False(t, bound, "a refused firing started a run")
	fired, err := enq.FireSchedule(context.Background(), v.tenant, id, at.Add(2*time.Hour))
	require.NoError(t, err)
	require.NotNil(t, fired.Refusal)
	require.Equal(t, "PERMISSION_DENIED", fired.Refusal.Code)
	require.Equal(t, http.StatusNoContent, v.do(http.MethodDelete, "/v1/workflows/items/schedules/"+id, v.token, nil).Status)
}

// TestScheduleTemplatesAreCheckedAtCreation: templates are validated
// against the registry and the creator's scopes (minus revocations) before
// anything is stored.
func TestScheduleTemplatesAreCheckedAtCreation(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.publish("items", itemGraph)
	create := func(token string, input any, bindings map[string]string) (int, map[string]any) {
		t.Helper()
		body := map[string]any{"every": "1h", "paused": true, "input": input}
		if bindings != nil {
			body["bindings"] = bindings
		}
		res := v.do(http.MethodPost, "/v1/workflows/items/schedules", token, body)
		return res.Status, res.JSON(t)
	}
	issues := func(body map[string]any) []any {
		return body["error"].(map[string]any)["details"].(map[string]any)["issues"].([]any)
	}
	agentID := map[string]string{"agentId": "triage"}

	status, body := create(v.token, map[string]any{"id": "{{ no.such }}", "x": []any{"a", "{{ agent.name }}"}}, agentID)
	require.Equal(t, http.StatusUnprocessableEntity, status, "%v", body)
	require.Equal(t, "UNKNOWN_VARIABLE", body["error"].(map[string]any)["code"])
	require.Equal(t, "/input/id", issues(body)[0].(map[string]any)["path"])

	status, body = create(v.token, map[string]any{"id": "{{ run.id }}"}, nil)
	require.Equal(t, http.StatusUnprocessableEntity, status, "%v", body)
	require.Contains(t, issues(body)[0].(map[string]any)["message"], "before the run exists")

	status, body = create(v.token, map[string]any{"id": "{{ agent.name }}"}, nil)
	require.Equal(t, http.StatusUnprocessableEntity, status, "%v", body)
	require.Equal(t, "MISSING_BINDING", body["error"].(map[string]any)["code"])

	// A creator who could not read the variable: refused (a forbidden variable).
	bob := v.mint(v.tenant, "bob", auth.ScopeSchedulesManage, auth.ScopeRunsExecute)
	status, body = create(bob, map[string]any{"id": "{{ agent.name }}"}, agentID)
	require.Equal(t, http.StatusUnprocessableEntity, status, "%v", body)
	require.Equal(t, "UNKNOWN_VARIABLE", body["error"].(map[string]any)["code"])
	require.Contains(t, issues(body)[0].(map[string]any)["message"], "needs scope agents.read")
	// The same for a scope revoked from the creator.
	require.Equal(t, http.StatusCreated, v.revoke(v.token, "carol", auth.ScopeAgentsRead).Status)
	carol := v.mint(v.tenant, "carol", auth.AllScopes...)
	status, _ = create(carol, map[string]any{"id": "{{ agent.name }}"}, agentID)
	require.Equal(t, http.StatusUnprocessableEntity, status)

	// Bindings: only names a variable requires, only with templates.
	status, body = create(v.token, map[string]any{"id": "{{ agent.name }}"}, map[string]string{"agentId": "triage", "partyId": "p"})
	require.Equal(t, http.StatusBadRequest, status, "%v", body)
	status, body = create(v.token, map[string]any{"id": "plain"}, agentID)
	require.Equal(t, http.StatusBadRequest, status, "%v", body)
	status, body = create(v.token, map[string]any{"id": "{{ agent.name }}"}, map[string]string{"agentId": " "})
	require.Equal(t, http.StatusBadRequest, status, "%v", body)

	// Scope-less variables and literal input are fine; literal input is
	// not a template.
	status, body = create(bob, map[string]any{"id": "{{ workflow.key }} on {{ context.today }}"}, nil)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	require.Equal(t, true, body["templated"])
	status, body = create(v.token, map[string]any{"id": "plain"}, nil)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	require.Equal(t, false, body["templated"])
	require.Equal(t, map[string]any{}, body["bindings"])

	// Nothing refused was stored.
	require.Len(t, v.listSchedules("items", v.token), 2)
}
