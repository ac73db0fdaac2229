package api_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/internal/testinfra/inproc"
	"github.com/weftworks/weft/metrics"
)

// loadOpenAPI parses and validates the served document with kin-openapi
// (OpenAPI 3.1 rules, JSON Schema 2020-12 schemas, resolved $refs).
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	raw, err := api.OpenAPI()
	require.NoError(t, err)
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(loader.Context))
	return doc
}

// routeKey is "METHOD /path/{param}".
type routeKey string

var echoParam = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

// openAPIPath turns an Echo path (/v1/runs/:id) into an OpenAPI one (/v1/runs/{id}).
func openAPIPath(echoPath string) string { return echoParam.ReplaceAllString(echoPath, "{$1}") }

// allRoutesApp is the application with every route group registered:
// /metrics needs Metrics, every other route is registered whatever the
// dependencies.
func allRoutesApp(t *testing.T) (*echo.Echo, *auth.Keys) {
	t.Helper()
	keys, err := auth.NewKeys("openapi-test-secret-0123456789")
	require.NoError(t, err)
	e := inproc.API(t, api.Deps{Store: testinfra.NewStore(t), Keys: keys, Metrics: metrics.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return e, keys
}

// registeredRoutes lists the application's routes, without Echo's own
// not-found catch-alls (which group middleware adds).
func registeredRoutes(e *echo.Echo) map[routeKey]bool {
	out := map[routeKey]bool{}
	for _, r := range e.Routes() {
		if r.Method == echo.RouteNotFound {
			continue
		}
		out[routeKey(r.Method+" "+openAPIPath(r.Path))] = true
	}
	return out
}

func documentedRoutes(doc *openapi3.T) map[routeKey]*openapi3.Operation {
	out := map[routeKey]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			out[routeKey(method+" "+path)] = op
		}
	}
	return out
}

func sortedKeys[V any](m map[routeKey]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}

// TestOpenAPIDocumentIsValid: the embedded document is OpenAPI 3.1 and
// valid, and is what GET /v1/openapi.json serves, to any valid token.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc := loadOpenAPI(t)
	require.True(t, doc.IsOpenAPI31OrLater(), "openapi = %s", doc.OpenAPI)
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3.1."), "openapi = %s", doc.OpenAPI)

	e, keys := allRoutesApp(t)
	get := func(token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/v1/openapi.json", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	require.Equal(t, http.StatusUnauthorized, get("").Code, "the document is under /v1: a token is required")
	noScopes, err := keys.Mint(auth.Principal{Tenant: "t", Sub: "s"}, time.Hour)
	require.NoError(t, err)
	rec := get(noScopes)
	require.Equal(t, http.StatusOK, rec.Code, "%s", rec.Body)
	require.Equal(t, echo.MIMEApplicationJSON, rec.Header().Get(echo.HeaderContentType))
	want, err := api.OpenAPI()
	require.NoError(t, err)
	require.Equal(t, string(want), rec.Body.String())
	var v map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v))
	require.Equal(t, "3.1.0", v["openapi"])
}

// TestOpenAPICoversEveryRoute: every route Echo registers is documented
// and every documented operation is a route. When this fails after a route
// was added, document it in api/openapi.yaml (see the comment at its top).
func TestOpenAPICoversEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	e, _ := allRoutesApp(t)
	routes := registeredRoutes(e)
	documented := documentedRoutes(doc)

	var undocumented, missing []string
	for _, k := range sortedKeys(routes) {
		if documented[routeKey(k)] == nil {
			undocumented = append(undocumented, k)
		}
	}
	for _, k := range sortedKeys(documented) {
		if !routes[routeKey(k)] {
			missing = append(missing, k)
		}
	}
	require.Empty(t, undocumented, "routes missing from api/openapi.yaml (add a path/operation for each)")
	require.Empty(t, missing, "operations in api/openapi.yaml that are not routes (remove them or register the route)")

	// The routes SPEC §8 and §10 name are among them.
	for _, k := range []string{
		"GET /healthz", "GET /readyz", "GET /metrics", "GET /v1/openapi.json",
		"POST /v1/workflows", "GET /v1/workflows", "GET /v1/workflows/{key}", "PUT /v1/workflows/{key}/draft",
		"POST /v1/workflows/{key}/dry-run", "POST /v1/workflows/{key}/publish", "GET /v1/workflows/{key}/revisions/{n}",
		"POST /v1/workflows/{key}/runs", "GET /v1/runs", "GET /v1/runs/{id}", "GET /v1/runs/{id}/events",
		"POST /v1/runs/{id}/cancel", "GET /v1/notes", "GET /v1/variables", "POST /v1/variables/resolve",
		"POST /v1/workflows/{key}/schedules", "GET /v1/workflows/{key}/schedules",
		"POST /v1/workflows/{key}/webhooks", "POST /hooks/{id}",
	} {
		require.True(t, routes[routeKey(k)], "route %s is not registered", k)
	}
	t.Logf("%d routes, all documented", len(routes))
}

// TestOpenAPIOperations: every operation has a unique operationId, a
// success response and JSON error responses; /v1 operations require the
// bearer token and name their scope (x-weft-scope); operations outside /v1
// do not require the bearer token.
func TestOpenAPIOperations(t *testing.T) {
	doc := loadOpenAPI(t)
	ids := map[string]string{}
	for _, k := range sortedKeys(documentedRoutes(doc)) {
		op := documentedRoutes(doc)[routeKey(k)]
		path := strings.SplitN(k, " ", 2)[1]
		require.NotEmpty(t, op.OperationID, "%s has no operationId", k)
		require.Empty(t, ids[op.OperationID], "operationId %s is used by %s and %s", op.OperationID, ids[op.OperationID], k)
		ids[op.OperationID] = k

		success := false
		for code, ref := range op.Responses.Map() {
			if strings.HasPrefix(code, "2") {
				success = true
			}
			if code[0] == '4' || code[0] == '5' {
				mt := ref.Value.Content.Get("application/json")
				require.NotNil(t, mt, "%s %s error response is not JSON", k, code)
				require.Equal(t, "#/components/schemas/Error", mt.Schema.Ref, "%s %s error response is not the error envelope", k, code)
			}
		}
		require.True(t, success, "%s documents no success response", k)

		scope, hasScope := op.Extensions["x-weft-scope"]
		if strings.HasPrefix(path, "/v1/") {
			require.Nil(t, op.Security, "%s overrides the bearer requirement", k)
			require.True(t, hasScope, "%s does not document its scope (x-weft-scope)", k)
			for _, sc := range scopeList(scope) {
				require.Contains(t, auth.AllScopes, sc, "%s names an unknown scope", k)
			}
			require.NotNil(t, op.Responses.Value("401"), "%s does not document 401", k)
			if scope != nil {
				require.NotNil(t, op.Responses.Value("403"), "%s does not document 403", k)
			}
		} else {
			require.False(t, hasScope, "%s is outside /v1 but names a scope", k)
			require.NotNil(t, op.Security, "%s is outside /v1 and must override the bearer requirement", k)
			for _, req := range *op.Security {
				_, bearer := req["bearerAuth"]
				require.False(t, bearer, "%s is outside /v1 but requires the bearer token", k)
			}
		}
	}
}

// TestOpenAPIScopesMatchRoutes: the scope each /v1 operation documents is
// the one its route checks. A token with no scopes gets 403 MISSING_SCOPE
// naming exactly the documented scope (before any body or store is
// touched), and a token with exactly that scope is not refused for scope;
// an operation documented with x-weft-scope null accepts any valid token.
// Without a token every /v1 route is 401.
func TestOpenAPIScopesMatchRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	e, keys := allRoutesApp(t)
	mint := func(scopes ...string) string {
		tok, err := keys.Mint(auth.Principal{Tenant: "t", Sub: "s", Scopes: scopes}, time.Hour)
		require.NoError(t, err)
		return tok
	}
	noScopes := mint()
	concrete := strings.NewReplacer("{key}", "k", "{n}", "1", "{id}", "x", "{sub}", "s", "{scope}", auth.ScopeNotesWrite)
	call := func(method, path, token string) (int, map[string]any) {
		req := httptest.NewRequest(method, concrete.Replace(path), nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		return rec.Code, body
	}
	errCode := func(body map[string]any) string {
		e, _ := body["error"].(map[string]any)
		c, _ := e["code"].(string)
		return c
	}
	checked := 0
	for _, k := range sortedKeys(documentedRoutes(doc)) {
		method, path, _ := strings.Cut(k, " ")
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		op := documentedRoutes(doc)[routeKey(k)]
		code, body := call(method, path, "")
		require.Equal(t, http.StatusUnauthorized, code, "%s without a token", k)
		require.Equal(t, "UNAUTHENTICATED", errCode(body), "%s without a token", k)

		scope := op.Extensions["x-weft-scope"]
		code, body = call(method, path, noScopes)
		if scope == nil {
			require.NotEqual(t, http.StatusForbidden, code, "%s is documented for any token: %v", k, body)
			continue
		}
		require.Equal(t, http.StatusForbidden, code, "%s with no scopes: %v", k, body)
		require.Equal(t, "MISSING_SCOPE", errCode(body), "%s", k)
		details, _ := body["error"].(map[string]any)["details"].(map[string]any)
		want := scopeList(scope)
		missing := make([]any, len(want))
		for i, sc := range want {
			missing[i] = sc
		}
		require.Equal(t, missing, details["missing"], "%s checks other scopes than x-weft-scope %v", k, scope)

		// Exactly the documented scopes pass the scope check (the handler
		// may then fail for lack of a store; it must not be MISSING_SCOPE).
		// A route needing several refuses each one missing.
		_, body = call(method, path, mint(want...))
		require.NotEqual(t, "MISSING_SCOPE", errCode(body), "%s with scope %v: %v", k, scope, body)
		checked++
	}
	require.Greater(t, checked, 20)
	t.Logf("%d scoped /v1 operations match their routes", checked)
}

// scopeList is an operation's x-weft-scope as a list: one scope, or the
// list of scopes a route needs all of.
func scopeList(scope any) []string {
	switch v := scope.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, s := range v {
			str, _ := s.(string)
			out = append(out, str)
		}
		return out
	}
	return nil
}

// TestOpenAPIScopeNamesAllScopes: the Scope schema (what POST
// /v1/revocations accepts) names every one of weft's scopes.
func TestOpenAPIScopeNamesAllScopes(t *testing.T) {
	doc := loadOpenAPI(t)
	ref := doc.Components.Schemas["Scope"]
	require.NotNil(t, ref, "components/schemas/Scope")
	for _, s := range auth.AllScopes {
		require.Contains(t, ref.Value.Description, s, "update components/schemas/Scope in api/openapi.yaml")
	}
}
