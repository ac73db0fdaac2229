package bridges_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/bridges"
	"github.com/weftworks/weft/execution"
)

// hook is a created webhook.
type hook struct {
	id, secret, url string
}

func (v *env) createWebhook(key, token string) hook {
	v.t.Helper()
	res := v.do(http.MethodPost, "/v1/workflows/"+key+"/webhooks", token, nil)
	require.Equal(v.t, http.StatusCreated, res.Status, "%s", res.Body)
	b := res.JSON(v.t)
	return hook{id: b["webhookId"].(string), secret: b["secret"].(string), url: b["url"].(string)}
}

// deliver posts body to url with the given signature and event id headers
// (omitted when empty).
func (v *env) deliver(url, signature, eventID string, body []byte) response {
	req := httptest.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if signature != "" {
		req.Header.Set(bridges.SignatureHeader, signature)
	}
	if eventID != "" {
		req.Header.Set(bridges.EventIDHeader, eventID)
	}
	return v.request(req)
}

// signed delivers body signed with secret at now.
func (v *env) signed(h hook, eventID string, body []byte) response {
	return v.deliver(h.url, bridges.SignatureHeaderValue(h.secret, time.Now(), body), eventID, body)
}

func TestWebhookDeliveries(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.publish("items", itemGraph)
	h := v.createWebhook("items", v.token)
	require.Regexp(t, `^[0-9a-f]{64}$`, h.secret)
	require.Equal(t, "/hooks/"+h.id, h.url)

	// The secret is stored encrypted and never listed again.
	var ct []byte
	require.NoError(t, v.st.Pool.QueryRow(context.Background(),
		`SELECT secret_ciphertext FROM webhooks WHERE webhook_id = $1`, h.id).Scan(&ct))
	require.NotContains(t, string(ct), h.secret)
	res := v.do(http.MethodGet, "/v1/workflows/items/webhooks", v.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.NotContains(t, string(res.Body), h.secret)
	require.Contains(t, string(res.Body), h.id)

	body := []byte(`{"id":"hooked"}`)
	before := v.countRuns()

	// Good: 202 and a run with origin webhook and the service actor.
	res = v.signed(h, "evt-1", body)
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	runID := res.JSON(t)["runId"].(string)
	require.Equal(t, execution.StatusQueued, res.JSON(t)["status"])
	run, err := v.st.GetRun(context.Background(), v.tenant, runID)
	require.NoError(t, err)
	require.Equal(t, execution.Origin{Kind: "webhook", ID: h.id}, run.Origin)
	require.Equal(t, execution.Actor{Kind: "service", Sub: "webhook:" + h.id, ConfiguredBy: "alice"}, run.Actor)
	require.JSONEq(t, string(body), string(run.Input))
	require.Equal(t, h.id+":evt-1", func() string {
		for k, r := range v.idempotencyKeys("items") {
			if r == runID {
				return k
			}
		}
		return ""
	}())

	// Replayed event id (the same signed request again, or re-signed):
	// 200 with the same run, never a second run.
	for range 2 {
		res = v.signed(h, "evt-1", body)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, runID, res.JSON(t)["runId"])
	}
	require.Equal(t, before+1, v.countRuns())

	// Wrong secret, stale, future, unsigned, malformed: 401 with a code.
	wrong := bridges.SignatureHeaderValue(strings.Repeat("0", 64), time.Now(), body)
	for _, c := range []struct {
		name, sig, code string
	}{
		{"wrong secret", wrong, bridges.CodeSignatureInvalid},
		{"stale", bridges.SignatureHeaderValue(h.secret, time.Now().Add(-6*time.Minute), body), bridges.CodeSignatureStale},
		{"future", bridges.SignatureHeaderValue(h.secret, time.Now().Add(6*time.Minute), body), bridges.CodeSignatureStale},
		{"unsigned", "", bridges.CodeSignatureMissing},
		{"malformed", "sha256=abc", bridges.CodeSignatureInvalid},
	} {
		res = v.deliver(h.url, c.sig, "evt-new", body)
		require.Equal(t, http.StatusUnauthorized, res.Status, "%s: %s", c.name, res.Body)
		require.Equal(t, c.code, res.Code(t), c.name)
	}
	// A signature over another body does not authenticate this one.
	res = v.deliver(h.url, bridges.SignatureHeaderValue(h.secret, time.Now(), []byte(`{"id":"other"}`)), "evt-new", body)
	require.Equal(t, http.StatusUnauthorized, res.Status)

	// Weft-Event-Id is required; the body must be JSON.
	res = v.signed(h, "", body)
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Equal(t, "INVALID_REQUEST", res.Code(t))
	res = v.signed(h, strings.Repeat("e", 201), body)
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	res = v.signed(h, "evt-bad", []byte(`{"id":`))
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Equal(t, "INVALID_JSON", res.Code(t))

	// Over 256 KiB: 413 before anything else.
	big := []byte(`{"id":"` + strings.Repeat("x", bridges.MaxWebhookBody) + `"}`)
	res = v.signed(h, "evt-big", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, res.Status, "%s", res.Body)
	require.Equal(t, "DOCUMENT_TOO_LARGE", res.Code(t))

	// The starter's checks apply: the input schema, and the event id bound
	// to its first body. Both are kept as evidence of the webhook.
	res = v.signed(h, "evt-2", []byte(`{"nope":1}`))
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	require.Equal(t, "INVALID_INPUT", res.Code(t))
	res = v.signed(h, "evt-1", []byte(`{"id":"changed"}`))
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	require.Equal(t, "IDEMPOTENCY_CONFLICT", res.Code(t))
	require.Equal(t, before+1, v.countRuns(), "refused deliveries started runs")
	res = v.do(http.MethodGet, "/v1/workflows/items/webhooks", v.token, nil)
	last := res.JSON(t)["webhooks"].([]any)[0].(map[string]any)["lastRefusal"].(map[string]any)
	require.Contains(t, []any{"INVALID_INPUT", "IDEMPOTENCY_CONFLICT"}, last["code"])

	// Unknown and malformed ids: 404, the same answer as a deleted one.
	fake := "/hooks/whk_" + strings.Repeat("a", 24)
	for _, url := range []string{fake, "/hooks/nope"} {
		res = v.deliver(url, bridges.SignatureHeaderValue(h.secret, time.Now(), body), "evt-3", body)
		require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
		require.Equal(t, "NOT_FOUND", res.Code(t))
	}
	notFound := string(res.Body)

	// Another tenant cannot delete it; its creator can, and then it is gone.
	require.Equal(t, http.StatusNotFound, v.do(http.MethodDelete, "/v1/workflows/items/webhooks/"+h.id, v.otherToken, nil).Status)
	require.Equal(t, http.StatusNoContent, v.do(http.MethodDelete, "/v1/workflows/items/webhooks/"+h.id, v.token, nil).Status)
	res = v.signed(h, "evt-4", body)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	require.Equal(t, notFound, string(res.Body), "a deleted webhook answers like an unknown one")
	require.Equal(t, http.StatusNotFound, v.do(http.MethodDelete, "/v1/workflows/items/webhooks/"+h.id, v.token, nil).Status)
	require.Equal(t, before+1, v.countRuns())
}

func TestWebhookServiceActorRule(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.publish("notes", notesGraph)

	// Creating needs schedules.manage, and runs.execute (the webhook runs
	// the workflow as its creator).
	res := v.do(http.MethodPost, "/v1/workflows/notes/webhooks", v.mint(v.tenant, "bob", auth.ScopeRunsExecute), nil)
	require.Equal(t, http.StatusForbidden, res.Status)
	require.Equal(t, "MISSING_SCOPE", res.Code(t))
	res = v.do(http.MethodPost, "/v1/workflows/notes/webhooks", v.mint(v.tenant, "bob", auth.ScopeSchedulesManage), nil)
	require.Equal(t, http.StatusForbidden, res.Status)
	require.Equal(t, "MISSING_SCOPE", res.Code(t))
	require.Equal(t, http.StatusNotFound, v.do(http.MethodPost, "/v1/workflows/notes/webhooks", v.otherToken, nil).Status)
	require.Equal(t, http.StatusBadRequest, v.do(http.MethodPost, "/v1/workflows/notes/webhooks", v.token, map[string]any{"x": 1}).Status)

	// Dave's snapshot lacks notes.write: his webhook is refused with
	// evidence (the starter lists what is missing), not run.
	dave := v.mint(v.tenant, "dave", auth.ScopeSchedulesManage, auth.ScopeRunsExecute)
	hd := v.createWebhook("notes", dave)
	res = v.signed(hd, "e1", []byte(`{"n":1}`))
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	require.Equal(t, "PERMISSION_DENIED", res.Code(t))
	require.Equal(t, []any{auth.ScopeNotesWrite}, res.JSON(t)["error"].(map[string]any)["details"].(map[string]any)["missing"])

	// Alice holds it, until it is revoked.
	h := v.createWebhook("notes", v.token)
	res = v.signed(h, "e1", []byte(`{"n":1}`))
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	res = v.revoke(v.token, "alice", auth.ScopeNotesWrite)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	res = v.signed(h, "e2", []byte(`{"n":2}`))
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	require.Equal(t, "PERMISSION_DENIED", res.Code(t))
	require.Equal(t, 1, len(v.runs("notes")))

	res = v.do(http.MethodGet, "/v1/workflows/notes/webhooks", v.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	byID := map[string]map[string]any{}
	for _, w := range res.JSON(t)["webhooks"].([]any) {
		byID[w.(map[string]any)["webhookId"].(string)] = w.(map[string]any)
	}
	for _, id := range []string{hd.id, h.id} {
		r := byID[id]["lastRefusal"].(map[string]any)
		require.Equal(t, "PERMISSION_DENIED", r["code"])
		require.Equal(t, []any{auth.ScopeNotesWrite}, r["missing"])
	}
	require.Equal(t, id2key(h.id, "e2"), byID[h.id]["lastRefusal"].(map[string]any)["firingKey"])
}

// TestRevocationsAPIWithdrawsAndRestoresAWebhookScope drives a revocation
// end to end through the HTTP API: an operator holding only
// revocations.manage revokes notes.write from alice, and the next delivery
// of her webhook is refused with evidence (403 PERMISSION_DENIED, the
// refusal recorded as the webhook's lastRefusal, no run); another tenant's
// revocation of the same sub changes nothing; removing the revocation lets
// the next delivery run again.
func TestRevocationsAPIWithdrawsAndRestoresAWebhookScope(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.publish("notes", notesGraph)
	ops := v.mint(v.tenant, "ops", auth.ScopeRevocationsManage)
	h := v.createWebhook("notes", v.token)
	deliver := func(event string, want int) response {
		t.Helper()
		res := v.signed(h, event, []byte(`{"event":"`+event+`"}`))
		require.Equal(t, want, res.Status, "delivery %s: %s", event, res.Body)
		return res
	}
	deliver("before", http.StatusAccepted)

	// The same sub revoked in another tenant is that tenant's business.
	res := v.revoke(v.otherToken, "alice", auth.ScopeNotesWrite)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	deliver("other-tenant", http.StatusAccepted)
	require.Len(t, v.runs("notes"), 2)

	// Revoked in alice's tenant: refused, with evidence, and not run.
	res = v.revoke(ops, "alice", auth.ScopeNotesWrite)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Equal(t, "alice", res.JSON(t)["sub"])
	res = deliver("revoked", http.StatusForbidden)
	require.Equal(t, "PERMISSION_DENIED", res.Code(t))
	require.Equal(t, []any{auth.ScopeNotesWrite}, res.JSON(t)["error"].(map[string]any)["details"].(map[string]any)["missing"])
	require.Len(t, v.runs("notes"), 2, "a refused delivery started a run")
	_, bound := v.idempotencyKeys("notes")[id2key(h.id, "revoked")]
	require.False(t, bound, "a refused delivery bound its key to a run")
	res = v.do(http.MethodGet, "/v1/workflows/notes/webhooks", v.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	hooks := res.JSON(t)["webhooks"].([]any)
	require.Len(t, hooks, 1)
	refusal := hooks[0].(map[string]any)["lastRefusal"].(map[string]any)
	require.Equal(t, "PERMISSION_DENIED", refusal["code"])
	require.Equal(t, []any{auth.ScopeNotesWrite}, refusal["missing"])
	require.Equal(t, id2key(h.id, "revoked"), refusal["firingKey"])

	// The operator sees it; revoking again is 200, and still refused.
	res = v.do(http.MethodGet, "/v1/revocations?sub=alice", ops, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	listed := res.JSON(t)["revocations"].([]any)
	require.Len(t, listed, 1)
	require.Equal(t, auth.ScopeNotesWrite, listed[0].(map[string]any)["scope"])
	require.Equal(t, http.StatusOK, v.revoke(ops, "alice", auth.ScopeNotesWrite).Status)
	deliver("still-revoked", http.StatusForbidden)

	// Removed: the next delivery runs again.
	res = v.unrevoke(ops, "alice", auth.ScopeNotesWrite)
	require.Equal(t, http.StatusNoContent, res.Status, "%s", res.Body)
	deliver("restored", http.StatusAccepted)
	require.Len(t, v.runs("notes"), 3)
	require.Equal(t, http.StatusNotFound, v.unrevoke(ops, "alice", auth.ScopeNotesWrite).Status)
}

func id2key(id, event string) string { return bridges.DeliveryKey(id, event) }
