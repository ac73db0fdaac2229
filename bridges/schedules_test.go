package bridges_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/bridges"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/store"
)

// scheduleRuns returns the runs of key started by schedule id.
func (v *env) scheduleRuns(key, id string) []store.Run {
	var out []store.Run
	for _, r := range v.runs(key) {
		if r.Origin.Kind == "schedule" && r.Origin.ID == id {
			out = append(out, r)
		}
	}
	return out
}

func (v *env) listSchedules(key, token string) []map[string]any {
	v.t.Helper()
	res := v.do(http.MethodGet, "/v1/workflows/"+key+"/schedules", token, nil)
	require.Equal(v.t, http.StatusOK, res.Status, "%s", res.Body)
	body := res.JSON(v.t)
	require.Contains(v.t, body, "nextCursor")
	var out []map[string]any
	for _, s := range body["schedules"].([]any) {
		out = append(out, s.(map[string]any))
	}
	return out
}

func TestScheduleFiresAsServiceActorAndDeleteStopsIt(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.publish("items", itemGraph)

	res := v.do(http.MethodPost, "/v1/workflows/items/schedules", v.token,
		map[string]any{"every": "2s", "input": map[string]any{"id": "scheduled"}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	created := res.JSON(t)
	id := created["scheduleId"].(string)
	require.Equal(t, "2s", created["every"])
	require.Equal(t, false, created["paused"])
	require.Equal(t, map[string]any{"kind": "service", "sub": "schedule:" + id, "configuredBy": "alice"}, created["actor"])
	temporalID := bridges.TemporalScheduleID(v.tenant, id)
	require.Equal(t, temporalID, created["temporal"].(map[string]any)["scheduleId"])

	// The schedule fires at least twice within ~10 s.
	start := time.Now()
	eventually(t, 12*time.Second, "two scheduled runs", func() bool { return len(v.scheduleRuns("items", id)) >= 2 })
	t.Logf("two firings after %s", time.Since(start).Round(time.Millisecond))

	// Every run carries origin schedule and the service actor configured by
	// alice, with her snapshot as its permissions, keyed by the firing's
	// scheduled time.
	keys := v.idempotencyKeys("items")
	for _, r := range v.scheduleRuns("items", id) {
		require.Equal(t, execution.Origin{Kind: "schedule", ID: id}, r.Origin)
		require.Equal(t, execution.Actor{Kind: "service", Sub: "schedule:" + id, ConfiguredBy: "alice"}, r.Actor)
		require.Equal(t, bridges.Effective(auth.AllScopes, nil), r.Permissions)
		require.JSONEq(t, `{"id":"scheduled"}`, string(r.Input))
		var key string
		for k, runID := range keys {
			if runID == r.RunID {
				key = k
			}
		}
		at, ok := strings.CutPrefix(key, id+"@")
		require.True(t, ok, "idempotency key %q", key)
		ts, err := time.Parse(time.RFC3339, at)
		require.NoError(t, err)
		require.Zero(t, ts.Unix()%2, "an every-2s firing is scheduled on an even second: %s", at)
	}
	// The interpreter runs them like any other run.
	eventually(t, 10*time.Second, "a scheduled run to succeed", func() bool {
		for _, r := range v.scheduleRuns("items", id) {
			if r.Status == execution.StatusSucceeded {
				return true
			}
		}
		return false
	})

	// The firing's key comes from TemporalScheduledStartTime, not the
	// workflow start time: the activity input equals the schedule's
	// nominal time exactly.
	desc, err := v.tc.ScheduleClient().GetHandle(context.Background(), temporalID).Describe(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, desc.Info.RecentActions)
	action := desc.Info.RecentActions[0]
	hist := v.tc.GetWorkflowHistory(context.Background(), action.StartWorkflowResult.WorkflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var in execution.EnqueueScheduledInput
	for hist.HasNext() {
		ev, err := hist.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			require.Equal(t, execution.ActivityEnqueueScheduled, a.GetActivityType().GetName())
			require.NoError(t, json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &in))
		}
	}
	require.True(t, in.ScheduledAt.Equal(action.ScheduleTime), "scheduledAt %s, schedule time %s", in.ScheduledAt, action.ScheduleTime)
	require.Equal(t, id, in.ScheduleID)

	// GET lists it with Temporal's next action times and no refusal.
	list := v.listSchedules("items", v.token)
	require.Len(t, list, 1)
	require.Equal(t, id, list[0]["scheduleId"])
	require.Nil(t, list[0]["lastRefusal"])
	require.NotEmpty(t, list[0]["temporal"].(map[string]any)["nextActionTimes"])

	// Another tenant cannot see or delete it; neither can another workflow's path.
	require.Equal(t, http.StatusNotFound, v.do(http.MethodGet, "/v1/workflows/items/schedules", v.otherToken, nil).Status)
	require.Equal(t, http.StatusNotFound, v.do(http.MethodGet, "/v1/workflows/items/schedules/"+id, v.otherToken, nil).Status)
	require.Equal(t, http.StatusNotFound, v.do(http.MethodDelete, "/v1/workflows/items/schedules/"+id, v.otherToken, nil).Status)
	require.Equal(t, http.StatusNotFound, v.do(http.MethodDelete, "/v1/workflows/other/schedules/"+id, v.token, nil).Status)
	// A token without schedules.manage is refused.
	noManage := v.mint(v.tenant, "bob", auth.ScopeWorkflowsRead, auth.ScopeRunsExecute)
	res = v.do(http.MethodGet, "/v1/workflows/items/schedules", noManage, nil)
	require.Equal(t, http.StatusForbidden, res.Status)
	require.Equal(t, "MISSING_SCOPE", res.Code(t))

	// DELETE stops it: the Temporal Schedule is gone and no firing
	// scheduled after the DELETE makes a run. A firing scheduled before it
	// may still be under way and finish (on a loaded machine, seconds
	// later), so the check is on the firing's nominal time, not on a count.
	deleted := time.Now()
	res = v.do(http.MethodDelete, "/v1/workflows/items/schedules/"+id, v.token, nil)
	require.Equal(t, http.StatusNoContent, res.Status, "%s", res.Body)
	_, err = v.tc.ScheduleClient().GetHandle(context.Background(), temporalID).Describe(context.Background())
	var nf *serviceerror.NotFound
	require.True(t, errors.As(err, &nf), "describe after delete: %v", err)
	// The schedule is gone, so only firings already under way can still
	// enqueue: wait until none of its ScheduledEnqueue workflows runs.
	eventually(t, 30*time.Second, "the deleted schedule's firings to settle", func() bool {
		n, err := v.tc.CountWorkflow(context.Background(), &workflowservice.CountWorkflowExecutionsRequest{
			Query: fmt.Sprintf("TemporalScheduledById = '%s' AND ExecutionStatus = 'Running'", temporalID)})
		return err == nil && n.GetCount() == 0
	})
	for key := range v.idempotencyKeys("items") {
		at, ok := strings.CutPrefix(key, id+"@")
		require.True(t, ok, "idempotency key %q", key)
		ts, err := time.Parse(time.RFC3339, at)
		require.NoError(t, err)
		// Keys have second precision: a firing within the DELETE's
		// second is not evidence either way.
		require.True(t, ts.Before(deleted.Add(time.Second)), "a deleted schedule fired at %s (deleted at %s)", at, deleted.Format(time.RFC3339Nano))
	}
	require.Empty(t, v.listSchedules("items", v.token))
	require.Equal(t, http.StatusNotFound, v.do(http.MethodDelete, "/v1/workflows/items/schedules/"+id, v.token, nil).Status)
}

func TestScheduleRevocationRefusesFiringWithEvidence(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.publish("notes", notesGraph)

	res := v.do(http.MethodPost, "/v1/workflows/notes/schedules", v.token, map[string]any{"every": "2s", "input": map[string]any{"n": 1}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	id := res.JSON(t)["scheduleId"].(string)
	eventually(t, 8*time.Second, "a first scheduled run", func() bool { return len(v.scheduleRuns("notes", id)) >= 1 })

	// Revoking notes.write from alice (POST /v1/revocations) withdraws it
	// from her schedule's service actor: the next firing is refused at
	// enqueue and recorded.
	res = v.revoke(v.token, "alice", auth.ScopeNotesWrite)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	var refusal map[string]any
	eventually(t, 8*time.Second, "a refused firing", func() bool {
		list := v.listSchedules("notes", v.token)
		require.Len(t, list, 1)
		refusal, _ = list[0]["lastRefusal"].(map[string]any)
		return refusal != nil
	})
	require.Equal(t, "PERMISSION_DENIED", refusal["code"])
	require.Equal(t, []any{auth.ScopeNotesWrite}, refusal["missing"])
	firingKey := refusal["firingKey"].(string)
	require.True(t, strings.HasPrefix(firingKey, id+"@"), firingKey)

	// No run exists for a refused firing, and none follows while the
	// revocation stands.
	_, bound := v.idempotencyKeys("notes")[firingKey]
	require.False(t, bound, "a refused firing bound its key to a run")
	n := len(v.scheduleRuns("notes", id))
	refused := func() int {
		res := v.do(http.MethodGet, "/v1/workflows/notes/schedules/"+id, v.token, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		return len(res.JSON(t)["refusals"].([]any))
	}
	before := refused()
	eventually(t, 20*time.Second, "two more refused firings", func() bool { return refused() >= before+2 })
	require.Equal(t, n, len(v.scheduleRuns("notes", id)), "a firing ran without notes.write")

	// GET of the schedule lists every refusal as evidence.
	res = v.do(http.MethodGet, "/v1/workflows/notes/schedules/"+id, v.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	refusals := res.JSON(t)["refusals"].([]any)
	require.GreaterOrEqual(t, len(refusals), 2)
	for _, r := range refusals {
		require.Equal(t, "PERMISSION_DENIED", r.(map[string]any)["code"])
	}

	// Revoking runs.execute is refused by the bridge itself.
	res = v.unrevoke(v.token, "alice", auth.ScopeNotesWrite)
	require.Equal(t, http.StatusNoContent, res.Status, "%s", res.Body)
	res = v.revoke(v.token, "alice", auth.ScopeRunsExecute)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	eventually(t, 8*time.Second, "a refusal for runs.execute", func() bool {
		r, _ := v.listSchedules("notes", v.token)[0]["lastRefusal"].(map[string]any)
		m, _ := r["missing"].([]any)
		return len(m) == 1 && m[0] == auth.ScopeRunsExecute
	})
	require.Equal(t, http.StatusNoContent, v.do(http.MethodDelete, "/v1/workflows/notes/schedules?scheduleId="+id, v.token, nil).Status)
}

func TestScheduleRequests(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.publish("items", itemGraph)
	post := func(token string, body any) response {
		return v.do(http.MethodPost, "/v1/workflows/items/schedules", token, body)
	}

	for _, body := range []any{
		map[string]any{},
		map[string]any{"cron": "* * * * *", "every": "5s"},
		map[string]any{"every": "500ms"},
		map[string]any{"every": "soon"},
		map[string]any{"cron": "not a cron"},
		map[string]any{"every": "5s", "unknown": true},
	} {
		res := post(v.token, body)
		require.Equal(t, http.StatusBadRequest, res.Status, "%v: %s", body, res.Body)
		require.Equal(t, "INVALID_REQUEST", res.Code(t), "%v", body)
	}
	require.Equal(t, http.StatusNotFound, v.do(http.MethodPost, "/v1/workflows/missing/schedules", v.token,
		map[string]any{"every": "5s"}).Status)
	res := post(v.otherToken, map[string]any{"every": "5s"})
	require.Equal(t, http.StatusNotFound, res.Status, "another tenant's workflow: %s", res.Body)
	res = post(v.mint(v.tenant, "carol", auth.ScopeSchedulesManage), map[string]any{"every": "5s"})
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	require.Equal(t, "MISSING_SCOPE", res.Code(t))
	require.Equal(t, http.StatusUnauthorized, post("", map[string]any{"every": "5s"}).Status)

	// A paused cron schedule: created, listed paused, never fired.
	res = post(v.token, map[string]any{"cron": "0 12 * * MON", "paused": true, "input": map[string]any{"id": "x"}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	id := res.JSON(t)["scheduleId"].(string)
	list := v.listSchedules("items", v.token)
	require.Len(t, list, 1)
	require.Equal(t, "0 12 * * MON", list[0]["cron"])
	require.Equal(t, true, list[0]["paused"])

	// Paging with a cursor bound to the tenant and workflow.
	res = post(v.token, map[string]any{"every": "1h", "paused": true})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	id2 := res.JSON(t)["scheduleId"].(string)
	res = v.do(http.MethodGet, "/v1/workflows/items/schedules?limit=1", v.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	page := res.JSON(t)
	require.Len(t, page["schedules"], 1)
	cursor := page["nextCursor"].(string)
	res = v.do(http.MethodGet, "/v1/workflows/items/schedules?limit=1&cursor="+cursor, v.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	page2 := res.JSON(t)
	require.Equal(t, id2, page2["schedules"].([]any)[0].(map[string]any)["scheduleId"])
	require.Nil(t, page2["nextCursor"])
	require.Equal(t, id, page["schedules"].([]any)[0].(map[string]any)["scheduleId"])
	v.publishOther("items")
	res = v.do(http.MethodGet, "/v1/workflows/items/schedules?cursor="+cursor, v.otherToken, nil)
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Equal(t, "CURSOR_INVALID", res.Code(t))

	for _, s := range []string{id, id2} {
		require.Equal(t, http.StatusNoContent, v.do(http.MethodDelete, "/v1/workflows/items/schedules/"+s, v.token, nil).Status)
	}
	require.Equal(t, http.StatusNotFound, v.do(http.MethodDelete, "/v1/workflows/items/schedules/sch_nope", v.token, nil).Status)
	require.Equal(t, http.StatusBadRequest, v.do(http.MethodDelete, "/v1/workflows/items/schedules", v.token, nil).Status)
}

// publishOther publishes itemGraph as key in the other tenant.
func (v *env) publishOther(key string) {
	v.t.Helper()
	res := v.do(http.MethodPost, "/v1/workflows", v.otherToken, map[string]any{"key": key, "graph": json.RawMessage(itemGraph)})
	require.Equal(v.t, http.StatusCreated, res.Status, "create: %s", res.Body)
}
