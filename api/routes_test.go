package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/internal/testinfra"
)

// A request no route answers says which of two things went wrong: a path
// none serves, or a method the path's routes do not answer.
func TestUnknownRoutesAndMethods(t *testing.T) {
	t.Parallel()
	h := newWFHarness(t)

	res := h.do(http.MethodGet, "/v1/workflowz", h.token, nil)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	require.Equal(t, "ROUTE_NOT_FOUND", res.Code(t))
	require.Contains(t, string(res.Body), "/v1/workflowz")

	res = h.do(http.MethodDelete, "/v1/workflows/quickstart", h.token, nil)
	require.Equal(t, http.StatusMethodNotAllowed, res.Status, "%s", res.Body)
	require.Equal(t, "METHOD_NOT_ALLOWED", res.Code(t))
	require.Equal(t, "GET", res.Header.Get("Allow"))

	res = h.do(http.MethodPatch, "/v1/workflows", h.token, nil)
	require.Equal(t, http.StatusMethodNotAllowed, res.Status, "%s", res.Body)
	require.Equal(t, "GET, POST", res.Header.Get("Allow"))

	// A missing resource keeps its own code.
	res = h.do(http.MethodGet, "/v1/workflows/absent", h.token, nil)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	require.Equal(t, "NOT_FOUND", res.Code(t))
}

// Token refusals say why, never with what key.
func TestTokenRefusalsSayWhy(t *testing.T) {
	t.Parallel()
	h := newWFHarness(t)
	other := testinfra.Keys(t, "another-deployment-secret-0123456789")
	foreign := testinfra.Token(t, other, "t1", "alice", auth.ScopeWorkflowsRead)
	expired, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "alice", "tenant": "t1", "scopes": []string{auth.ScopeWorkflowsRead},
		"exp": time.Now().Add(-time.Minute).Unix(),
	}).SignedString([]byte("workflows-test-secret-0123456789"))
	require.NoError(t, err)
	for token, want := range map[string]string{
		"":          "UNAUTHENTICATED",
		"not-a-jwt": auth.TokenMalformed,
		"a.b.c":     auth.TokenMalformed,
		foreign:     auth.TokenBadSignature,
		expired:     auth.TokenExpired,
	} {
		res := h.do(http.MethodGet, "/v1/workflows", token, nil)
		require.Equal(t, http.StatusUnauthorized, res.Status, "%q: %s", token, res.Body)
		require.Equal(t, want, res.Code(t), "%q", token)
		require.NotContains(t, string(res.Body), "secret")
	}
}

// Posting the graph file instead of {key, graph} gets a hint.
func TestBareGraphBodyGetsAHint(t *testing.T) {
	t.Parallel()
	h := newWFHarness(t)
	res := h.do(http.MethodPost, "/v1/workflows", h.token, map[string]any{"schemaVersion": 1, "nodes": []any{}, "edges": []any{}})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Equal(t, "INVALID_REQUEST", res.Code(t))
	require.Contains(t, res.JSON(t)["error"].(map[string]any)["message"], `this looks like a graph document; send it as {"graph": <the document>}`)
}
