package bridges_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/bridges"
)

// TestToolPolicyIsCheckedWhenSetAndAtEveryFiring: a tool policy names
// runnable catalog actions whose permissions the creator holds; narrowing it
// needs only schedules.manage, widening it needs the added tools' scopes
// from both the creator and the caller; and a firing whose policy the
// creator's scopes no longer cover is refused with evidence.
func TestToolPolicyIsCheckedWhenSetAndAtEveryFiring(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.publish("items", itemGraph)
	create := func(token string, policy any) response {
		return v.do(http.MethodPost, "/v1/workflows/items/schedules", token, map[string]any{"every": "1h", "paused": true, "toolPolicy": policy,
			"input": map[string]any{"id": "x"}})
	}

	// Refusals at creation.
	res := create(v.token, []string{"core.echo@1", "nope"})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Equal(t, "INVALID_REQUEST", res.Code(t))
	res = create(v.token, []string{"core.http.fetch@1", "crm.unknown@1", "core.echo@1"})
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	require.Equal(t, bridges.CodeInvalidToolPolicy, res.Code(t))
	issues := res.JSON(t)["error"].(map[string]any)["details"].(map[string]any)["issues"].([]any)
	require.Len(t, issues, 2)
	codes := map[string]any{}
	for _, i := range issues {
		codes[i.(map[string]any)["tool"].(string)] = i.(map[string]any)["code"]
	}
	require.Equal(t, map[string]any{"core.http.fetch@1": "UNSUPPORTED_ACTION_RISK", "crm.unknown@1": "MISSING_DEPENDENCY"}, codes)
	noNotes := v.mint(v.tenant, "bob", auth.ScopeSchedulesManage, auth.ScopeRunsExecute)
	res = create(noNotes, []string{"workspace.notes.write@1"})
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	require.Equal(t, "MISSING_SCOPE", res.Code(t))
	// A scope revoked from the creator counts as not held.
	require.Equal(t, http.StatusCreated, v.revoke(v.token, "alice", auth.ScopeNotesWrite).Status)
	res = create(v.token, []string{"workspace.notes.write@1"})
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	require.Equal(t, http.StatusNoContent, v.unrevoke(v.token, "alice", auth.ScopeNotesWrite).Status)

	// Created with a policy (normalized); without one it is empty.
	res = create(v.token, []string{"workspace.notes.write@1", "core.echo@1", "core.echo@1"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	sched := res.JSON(t)
	id := sched["scheduleId"].(string)
	require.Equal(t, []any{"core.echo@1", "workspace.notes.write@1"}, sched["toolPolicy"])
	require.Equal(t, "alice", sched["toolPolicyUpdatedBy"])
	res = create(v.token, nil)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Equal(t, []any{}, res.JSON(t)["toolPolicy"])

	// Replacing it.
	put := func(token string, policy any) response {
		return v.do(http.MethodPut, "/v1/workflows/items/schedules/"+id+"/tool-policy", token, map[string]any{"toolPolicy": policy})
	}
	res = put(noNotes, []string{"core.echo@1"})
	require.Equal(t, http.StatusOK, res.Status, "narrowing needs no tool scope: %s", res.Body)
	require.Equal(t, []any{"core.echo@1"}, res.JSON(t)["toolPolicy"])
	require.Equal(t, "bob", res.JSON(t)["toolPolicyUpdatedBy"])
	res = put(noNotes, []string{"core.echo@1", "workspace.notes.write@1"})
	require.Equal(t, http.StatusForbidden, res.Status, "bob cannot grant what he does not hold: %s", res.Body)
	require.Contains(t, res.JSON(t)["error"].(map[string]any)["message"], "you")
	carol := v.mint(v.tenant, "carol", auth.AllScopes...)
	require.Equal(t, http.StatusCreated, v.revoke(v.token, "alice", auth.ScopeNotesWrite).Status)
	res = put(carol, []string{"workspace.notes.write@1"})
	require.Equal(t, http.StatusForbidden, res.Status, "nor can carol give alice's schedule what alice lost: %s", res.Body)
	require.Contains(t, res.JSON(t)["error"].(map[string]any)["message"], "its creator alice")
	require.Equal(t, http.StatusNoContent, v.unrevoke(v.token, "alice", auth.ScopeNotesWrite).Status)
	res = put(carol, []string{"workspace.notes.write@1"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = v.do(http.MethodPut, "/v1/workflows/items/schedules/"+id+"/tool-policy", v.token, map[string]any{})
	require.Equal(t, http.StatusBadRequest, res.Status, "toolPolicy is required: %s", res.Body)
	require.Equal(t, http.StatusNotFound, v.do(http.MethodPut, "/v1/workflows/items/schedules/"+id+"/tool-policy", v.otherToken,
		map[string]any{"toolPolicy": []string{}}).Status, "another tenant's schedule")

	// At every firing: alice loses notes.write, the firing is refused and
	// recorded, naming the tool; narrowing the policy lets it fire again.
	enq, err := bridges.NewEnqueuer(v.st, v.starter, v.vars, v.log)
	require.NoError(t, err)
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	require.Equal(t, http.StatusCreated, v.revoke(v.token, "alice", auth.ScopeNotesWrite).Status)
	fired, err := enq.FireSchedule(ctx, v.tenant, id, at)
	require.NoError(t, err)
	require.NotNil(t, fired.Refusal, "%+v", fired)
	require.Equal(t, "PERMISSION_DENIED", fired.Refusal.Code)
	require.Equal(t, []string{auth.ScopeNotesWrite}, fired.Refusal.Missing)
	require.Contains(t, fired.Refusal.Message, "workspace.notes.write@1")
	res = v.do(http.MethodGet, "/v1/workflows/items/schedules/"+id, v.token, nil)
	require.Equal(t, "PERMISSION_DENIED", res.JSON(t)["lastRefusal"].(map[string]any)["code"])
	require.Equal(t, http.StatusOK, put(v.token, []string{}).Status)
	fired, err = enq.FireSchedule(ctx, v.tenant, id, at.Add(time.Hour))
	require.NoError(t, err)
	require.Nil(t, fired.Refusal)
	run, err := v.st.GetRun(ctx, v.tenant, fired.RunID)
	require.NoError(t, err)
	require.Equal(t, []string{}, run.ToolPolicy, "the run keeps the policy it fired with")
	require.Nil(t, run.ToolGrants)

	// A deleted schedule's policy cannot be replaced.
	require.Equal(t, http.StatusNoContent, v.do(http.MethodDelete, "/v1/workflows/items/schedules/"+id, v.token, nil).Status)
	require.Equal(t, http.StatusNotFound, put(v.token, []string{}).Status)
}

// TestWebhookToolPolicy: a webhook takes a policy at creation, shows it on
// GET (one webhook, never its secret) and in the list, and replaces it.
func TestWebhookToolPolicy(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.publish("items", itemGraph)
	res := v.do(http.MethodPost, "/v1/workflows/items/webhooks", v.token, map[string]any{"toolPolicy": []string{"core.echo@1"}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	id := res.JSON(t)["webhookId"].(string)
	require.Equal(t, []any{"core.echo@1"}, res.JSON(t)["toolPolicy"])
	res = v.do(http.MethodPost, "/v1/workflows/items/webhooks", v.token, map[string]any{"other": true})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)

	res = v.do(http.MethodGet, "/v1/workflows/items/webhooks/"+id, v.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	got := res.JSON(t)
	require.NotContains(t, got, "secret")
	require.Equal(t, []any{"core.echo@1"}, got["toolPolicy"])
	require.Empty(t, got["refusals"])
	require.Equal(t, http.StatusNotFound, v.do(http.MethodGet, "/v1/workflows/items/webhooks/"+id, v.otherToken, nil).Status)
	require.Equal(t, http.StatusNotFound, v.do(http.MethodGet, "/v1/workflows/items/webhooks/whk_nope", v.token, nil).Status)

	res = v.do(http.MethodPut, "/v1/workflows/items/webhooks/"+id+"/tool-policy", v.token,
		map[string]any{"toolPolicy": []string{"core.echo@1", "workspace.notes.write@1"}})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = v.do(http.MethodGet, "/v1/workflows/items/webhooks", v.token, nil)
	require.Equal(t, []any{"core.echo@1", "workspace.notes.write@1"}, res.JSON(t)["webhooks"].([]any)[0].(map[string]any)["toolPolicy"])
	w, err := v.st.GetWebhook(context.Background(), v.tenant, id)
	require.NoError(t, err)
	require.Equal(t, []string{"core.echo@1", "workspace.notes.write@1"}, w.ToolPolicy)

	require.Equal(t, http.StatusNoContent, v.do(http.MethodDelete, "/v1/workflows/items/webhooks/"+id, v.token, nil).Status)
	require.Equal(t, http.StatusNotFound, v.do(http.MethodGet, "/v1/workflows/items/webhooks/"+id, v.token, nil).Status)
}
