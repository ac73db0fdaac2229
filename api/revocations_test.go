package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/internal/testinfra/inproc"
)

// newRevocationHarness is the API over a fresh database; token is an
// operator of tenant t1 holding only revocations.manage.
func newRevocationHarness(t *testing.T) *wfHarness {
	t.Helper()
	st := testinfra.NewStore(t)
	keys := testinfra.Keys(t, "revocations-test-secret-0123456789")
	h := &wfHarness{t: t, st: st, keys: keys,
		e: inproc.API(t, api.Deps{Store: st, Keys: keys, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})}
	h.token = h.mint("t1", "ops", auth.ScopeRevocationsManage)
	return h
}

func (h *wfHarness) revoke(token, sub, scope string) wfResponse {
	h.t.Helper()
	return h.do(http.MethodPost, "/v1/revocations", token, map[string]any{"sub": sub, "scope": scope})
}

func revocationPath(sub, scope string) string {
	return "/v1/revocations/" + url.PathEscape(sub) + "/" + url.PathEscape(scope)
}

// listed returns the "sub/scope" of each revocation of a list answer.
func listed(t *testing.T, res wfResponse) []string {
	t.Helper()
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	out := []string{}
	for _, r := range res.JSON(t)["revocations"].([]any) {
		m := r.(map[string]any)
		require.Len(t, m, 3, "a revocation is {sub, scope, createdAt}: %v", m)
		out = append(out, m["sub"].(string)+"/"+m["scope"].(string))
	}
	return out
}

func errorDetails(t *testing.T, res wfResponse) map[string]any {
	t.Helper()
	d, _ := res.JSON(t)["error"].(map[string]any)["details"].(map[string]any)
	return d
}

func TestRevocationRoutesNeedATokenAndTheScope(t *testing.T) {
	t.Parallel()
	h := newRevocationHarness(t)
	require.Equal(t, http.StatusCreated, h.revoke(h.token, "alice", auth.ScopeNotesWrite).Status)

	var allBut []string
	for _, s := range auth.AllScopes {
		if s != auth.ScopeRevocationsManage {
			allBut = append(allBut, s)
		}
	}
	lacking := h.mint("t1", "alice", allBut...)
	body := map[string]any{"sub": "alice", "scope": auth.ScopeRunsExecute}
	for _, r := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/v1/revocations", nil},
		{http.MethodPost, "/v1/revocations", body},
		{http.MethodDelete, revocationPath("alice", auth.ScopeNotesWrite), nil},
	} {
		res := h.do(r.method, r.path, "", r.body)
		require.Equal(t, http.StatusUnauthorized, res.Status, "%s %s: %s", r.method, r.path, res.Body)
		require.Equal(t, "UNAUTHENTICATED", res.Code(t))

		res = h.do(r.method, r.path, lacking, r.body)
		require.Equal(t, http.StatusForbidden, res.Status, "%s %s: %s", r.method, r.path, res.Body)
		require.Equal(t, "MISSING_SCOPE", res.Code(t))
		require.Equal(t, map[string]any{"missing": []any{auth.ScopeRevocationsManage}}, errorDetails(t, res))
	}
	// Nothing was added or removed by the refused calls.
	scopes, err := h.st.RevokedScopes(context.Background(), "t1", "alice")
	require.NoError(t, err)
	require.Equal(t, []string{auth.ScopeNotesWrite}, scopes)
}

func TestRevocationsCreateRepeatListDelete(t *testing.T) {
	t.Parallel()
	h := newRevocationHarness(t)
	ctx := context.Background()

	res := h.revoke(h.token, "alice", auth.ScopeNotesWrite)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	first := res.JSON(t)
	require.Equal(t, "alice", first["sub"])
	require.Equal(t, auth.ScopeNotesWrite, first["scope"])
	created, err := time.Parse(time.RFC3339Nano, first["createdAt"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), created, time.Minute)

	// The same revocation again: 200 with the original row.
	res = h.revoke(h.token, "alice", auth.ScopeNotesWrite)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, first, res.JSON(t))

	// It is what the bridges read.
	scopes, err := h.st.RevokedScopes(ctx, "t1", "alice")
	require.NoError(t, err)
	require.Equal(t, []string{auth.ScopeNotesWrite}, scopes)

	require.Equal(t, http.StatusCreated, h.revoke(h.token, "bob", auth.ScopeRunsExecute).Status)
	require.Equal(t, []string{"alice/notes.write", "bob/runs.execute"}, listed(t, h.do(http.MethodGet, "/v1/revocations", h.token, nil)))
	require.Equal(t, []string{"bob/runs.execute"}, listed(t, h.do(http.MethodGet, "/v1/revocations?sub=bob", h.token, nil)))
	require.Equal(t, []string{}, listed(t, h.do(http.MethodGet, "/v1/revocations?sub=carol", h.token, nil)))

	res = h.do(http.MethodDelete, revocationPath("alice", auth.ScopeNotesWrite), h.token, nil)
	require.Equal(t, http.StatusNoContent, res.Status, "%s", res.Body)
	require.Empty(t, res.Body)
	scopes, err = h.st.RevokedScopes(ctx, "t1", "alice")
	require.NoError(t, err)
	require.Empty(t, scopes)
	res = h.do(http.MethodDelete, revocationPath("alice", auth.ScopeNotesWrite), h.token, nil)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	require.Equal(t, "NOT_FOUND", res.Code(t))
	require.Equal(t, []string{"bob/runs.execute"}, listed(t, h.do(http.MethodGet, "/v1/revocations", h.token, nil)))

	// Path segments are unescaped: a sub with '/', ' ' and '%' round-trips.
	odd := "team/ops 100%"
	require.Equal(t, http.StatusCreated, h.revoke(h.token, odd, auth.ScopeRunsRead).Status)
	require.Equal(t, []string{odd + "/runs.read"}, listed(t, h.do(http.MethodGet, "/v1/revocations?sub="+url.QueryEscape(odd), h.token, nil)))
	res = h.do(http.MethodDelete, revocationPath(odd, auth.ScopeRunsRead), h.token, nil)
	require.Equal(t, http.StatusNoContent, res.Status, "%s", res.Body)
	require.Equal(t, []string{}, listed(t, h.do(http.MethodGet, "/v1/revocations?sub="+url.QueryEscape(odd), h.token, nil)))

	// A scope outside weft's (a row an operator inserted by SQL) can still
	// be removed.
	require.NoError(t, h.st.Revoke(ctx, "t1", "carol", "crm.write"))
	require.Equal(t, http.StatusNoContent, h.do(http.MethodDelete, revocationPath("carol", "crm.write"), h.token, nil).Status)
}

func TestRevocationsAreTenantScoped(t *testing.T) {
	t.Parallel()
	h := newRevocationHarness(t)
	ctx := context.Background()
	require.Equal(t, http.StatusCreated, h.revoke(h.token, "alice", auth.ScopeNotesWrite).Status)
	require.Equal(t, http.StatusCreated, h.revoke(h.token, "alice", auth.ScopeRunsExecute).Status)
	other := h.mint("t2", "mallory", auth.AllScopes...)

	// Tenant t2 sees none of t1's revocations and cannot delete them.
	require.Equal(t, []string{}, listed(t, h.do(http.MethodGet, "/v1/revocations", other, nil)))
	require.Equal(t, []string{}, listed(t, h.do(http.MethodGet, "/v1/revocations?sub=alice", other, nil)))
	res := h.do(http.MethodDelete, revocationPath("alice", auth.ScopeNotesWrite), other, nil)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	require.Equal(t, "NOT_FOUND", res.Code(t))
	scopes, err := h.st.RevokedScopes(ctx, "t1", "alice")
	require.NoError(t, err)
	require.Equal(t, []string{auth.ScopeNotesWrite, auth.ScopeRunsExecute}, scopes)

	// The tenant comes from the token, never from the body.
	res = h.do(http.MethodPost, "/v1/revocations", other, map[string]any{"sub": "alice", "scope": auth.ScopeRunsRead, "tenant": "t1"})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Equal(t, "tenant", errorDetails(t, res)["field"])

	// t2 revoking the same sub is its own row, created in t2 (201, not 200).
	res = h.revoke(other, "alice", auth.ScopeNotesWrite)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Equal(t, []string{"alice/notes.write"}, listed(t, h.do(http.MethodGet, "/v1/revocations", other, nil)))
	require.Equal(t, []string{"alice/notes.write", "alice/runs.execute"}, listed(t, h.do(http.MethodGet, "/v1/revocations", h.token, nil)))

	// A t1 cursor is no use to t2.
	res = h.do(http.MethodGet, "/v1/revocations?limit=1", h.token, nil)
	cursor, _ := res.JSON(t)["nextCursor"].(string)
	require.NotEmpty(t, cursor)
	res = h.do(http.MethodGet, "/v1/revocations?limit=1&cursor="+cursor, other, nil)
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Equal(t, "CURSOR_INVALID", res.Code(t))
}

func TestRevocationRequestRefusals(t *testing.T) {
	t.Parallel()
	h := newRevocationHarness(t)
	post := func(body any) wfResponse {
		t.Helper()
		return h.do(http.MethodPost, "/v1/revocations", h.token, body)
	}
	for _, c := range []struct {
		name  string
		body  any
		field string
	}{
		{"scope with a space", map[string]any{"sub": "alice", "scope": "notes write"}, "scope"},
		{"scope with a tab", map[string]any{"sub": "alice", "scope": "notes.write\t"}, "scope"},
		{"scope nothing requires", map[string]any{"sub": "alice", "scope": "notes.wirte"}, "scope"},
		{"permission of no published action", map[string]any{"sub": "alice", "scope": "crm.write"}, "scope"},
		{"unknown field", map[string]any{"sub": "alice", "scope": auth.ScopeNotesWrite, "reason": "left"}, "reason"},
		{"case-folded field", `{"Sub": "alice", "scope": "notes.write"}`, "Sub"},
		{"repeated field", `{"sub": "alice", "sub": "bob", "scope": "notes.write"}`, "sub"},
		{"empty sub", map[string]any{"sub": "", "scope": auth.ScopeNotesWrite}, "sub"},
		{"blank sub", map[string]any{"sub": "   ", "scope": auth.ScopeNotesWrite}, "sub"},
		{"missing sub", map[string]any{"scope": auth.ScopeNotesWrite}, "sub"},
		{"null sub", map[string]any{"sub": nil, "scope": auth.ScopeNotesWrite}, "sub"},
		{"missing scope", map[string]any{"sub": "alice"}, "scope"},
		{"empty scope", map[string]any{"sub": "alice", "scope": ""}, "scope"},
		{"sub not a string", map[string]any{"sub": 7, "scope": auth.ScopeNotesWrite}, "sub"},
		{"sub too long", map[string]any{"sub": strings.Repeat("a", 201), "scope": auth.ScopeNotesWrite}, "sub"},
		{"control character", map[string]any{"sub": "ali\nce", "scope": auth.ScopeNotesWrite}, "sub"},
		{"empty body", "", "sub"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := post(c.body)
			require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
			require.Equal(t, "INVALID_REQUEST", res.Code(t))
			require.Equal(t, c.field, errorDetails(t, res)["field"], "%s", res.Body)
		})
	}
	res := post(map[string]any{"sub": "alice", "scope": "notes.wirte"})
	require.Contains(t, errorDetails(t, res)["known"], auth.ScopeNotesWrite, "the refusal lists what may be revoked")
	// Once a worker published an action requiring crm.write, that business
	// permission is revocable like weft's own.
	crm := graph.ActionContract{ID: "crm.update", Version: 1, Risk: graph.RiskWorkspaceWrite,
		InputSchema: json.RawMessage(`{}`), OutputSchema: json.RawMessage(`{}`), RequiredPermissions: []string{"crm.write"},
		TimeoutMs: 5000, Idempotency: catalog.IdempotencyNone}
	reg, err := catalog.NewRegistry(catalog.Action{Contract: crm,
		Handler: func(context.Context, catalog.Call) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }})
	require.NoError(t, err)
	require.NoError(t, reg.Publish(context.Background(), h.st))
	res = post(map[string]any{"sub": "alice", "scope": "crm.write"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Equal(t, http.StatusCreated, post(map[string]any{"sub": strings.Repeat("a", 200), "scope": auth.ScopeNotesWrite}).Status)

	res = post(`{"sub": "alice",`)
	require.Equal(t, http.StatusBadRequest, res.Status)
	require.Equal(t, "INVALID_JSON", res.Code(t))
	res = post(`["alice", "notes.write"]`)
	require.Equal(t, http.StatusBadRequest, res.Status)
	require.Equal(t, "INVALID_REQUEST", res.Code(t))
	req := testinfra.NewRequest(t, http.MethodPost, "/v1/revocations", h.token, "sub=alice&scope=notes.write")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res = h.serve(req)
	require.Equal(t, http.StatusUnsupportedMediaType, res.Status, "%s", res.Body)
	res = post(map[string]any{"sub": strings.Repeat("a", 8<<10), "scope": auth.ScopeNotesWrite})
	require.Equal(t, http.StatusRequestEntityTooLarge, res.Status, "%s", res.Body)

	for _, q := range []string{"limit=0", "limit=201", "limit=x", "cursor=forged", "sub=" + strings.Repeat("a", 201)} {
		res := h.do(http.MethodGet, "/v1/revocations?"+q, h.token, nil)
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", q, res.Body)
	}
	// Nothing above was stored but crm.write and the 200-character sub.
	require.Len(t, listed(t, h.do(http.MethodGet, "/v1/revocations", h.token, nil)), 2)
}

func TestListRevocationsPagesWithCursor(t *testing.T) {
	t.Parallel()
	h := newRevocationHarness(t)
	var want []string
	for _, sub := range []string{"erin", "bob", "dave", "alice", "carol"} {
		require.Equal(t, http.StatusCreated, h.revoke(h.token, sub, auth.ScopeRunsExecute).Status)
	}
	for _, sub := range []string{"alice", "bob", "carol", "dave", "erin"} {
		want = append(want, sub+"/"+auth.ScopeRunsExecute)
	}
	require.Equal(t, http.StatusCreated, h.revoke(h.token, "bob", auth.ScopeNotesWrite).Status)
	want = append(want[:1], append([]string{"bob/" + auth.ScopeNotesWrite}, want[1:]...)...)

	var got []string
	path := "/v1/revocations?limit=2"
	var bobCursor string
	for pages := 1; ; pages++ {
		require.LessOrEqual(t, pages, 3)
		res := h.do(http.MethodGet, path, h.token, nil)
		got = append(got, listed(t, res)...)
		next, _ := res.JSON(t)["nextCursor"].(string)
		if next == "" {
			require.Equal(t, 3, pages)
			break
		}
		bobCursor = next
		path = "/v1/revocations?limit=2&cursor=" + url.QueryEscape(next)
	}
	require.Equal(t, want, got)

	// A cursor is bound to its sub filter.
	res := h.do(http.MethodGet, "/v1/revocations?sub=bob&limit=1", h.token, nil)
	require.Equal(t, []string{"bob/" + auth.ScopeNotesWrite}, listed(t, res))
	subCursor, _ := res.JSON(t)["nextCursor"].(string)
	require.NotEmpty(t, subCursor)
	res = h.do(http.MethodGet, "/v1/revocations?sub=bob&cursor="+url.QueryEscape(subCursor), h.token, nil)
	require.Equal(t, []string{"bob/" + auth.ScopeRunsExecute}, listed(t, res))
	require.Nil(t, res.JSON(t)["nextCursor"])
	for _, q := range []string{"cursor=" + url.QueryEscape(subCursor), fmt.Sprintf("sub=bob&cursor=%s", url.QueryEscape(bobCursor))} {
		res = h.do(http.MethodGet, "/v1/revocations?"+q, h.token, nil)
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", q, res.Body)
		require.Equal(t, "CURSOR_INVALID", res.Code(t))
	}
}
