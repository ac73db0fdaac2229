package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/internal/testinfra/inproc"
	"github.com/weftworks/weft/publication"
	"github.com/weftworks/weft/variables"
	"github.com/weftworks/weft/variables/graphcheck"
)

// varHarness is the API over a fresh database with a variable registry.
type varHarness struct {
	t    *testing.T
	e    *echo.Echo
	keys *auth.Keys
	logs *bytes.Buffer
}

// failingAgents is an AgentLookup whose backend is down.
type failingAgents struct{}

func (failingAgents) AgentName(context.Context, string, string) (string, error) {
	return "", errors.New("dial tcp 10.0.0.7:5432: connection refused")
}

// newVarHarness builds the API with variables.Builtin(lookup) behind both
// /v1/variables and graph validation, as production wires it.
func newVarHarness(t *testing.T, lookup variables.AgentLookup) *varHarness {
	t.Helper()
	reg, err := variables.Builtin(lookup)
	require.NoError(t, err)
	keys := testinfra.Keys(t, "variables-test-secret-0123456789")
	logs := &bytes.Buffer{}
	st := testinfra.NewStore(t)
	e := inproc.API(t, api.Deps{Store: st, Keys: keys, Variables: reg,
		Publication: inproc.Publication(t, st, &publication.Resolver{Templates: graphcheck.New(reg)}),
		Logger:      slog.New(slog.NewTextHandler(logs, nil))})
	return &varHarness{t: t, e: e, keys: keys, logs: logs}
}

func (h *varHarness) token(p auth.Principal) string {
	h.t.Helper()
	if p.Tenant == "" {
		p.Tenant = "t1"
	}
	if p.Sub == "" {
		p.Sub = "alice"
	}
	return testinfra.TokenFor(h.t, h.keys, p)
}

func (h *varHarness) tokenWith(scopes ...string) string {
	return h.token(auth.Principal{Scopes: scopes})
}

type varResponse struct {
	Status int
	Body   map[string]any
	Raw    string
}

func (r varResponse) code() string {
	e, _ := r.Body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (r varResponse) message() string {
	e, _ := r.Body["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

func (h *varHarness) request(ctx context.Context, method, path, token string, body any) varResponse {
	h.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(h.t, err)
		r = bytes.NewReader(raw)
	}
	req := httptest.NewRequest(method, path, r).WithContext(ctx)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.e.ServeHTTP(rec, req)
	out := varResponse{Status: rec.Code, Raw: rec.Body.String()}
	require.NoError(h.t, json.Unmarshal(rec.Body.Bytes(), &out.Body), "body: %s", rec.Body)
	return out
}

func (h *varHarness) do(method, path, token string, body any) varResponse {
	h.t.Helper()
	return h.request(context.Background(), method, path, token, body)
}

func (h *varHarness) resolve(token string, body any) varResponse {
	h.t.Helper()
	return h.do(http.MethodPost, "/v1/variables/resolve", token, body)
}

func listedKeys(t *testing.T, r varResponse) []string {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	require.Contains(t, r.Body, "nextCursor")
	require.Nil(t, r.Body["nextCursor"])
	items, ok := r.Body["variables"].([]any)
	require.True(t, ok, r.Raw)
	keys := []string{}
	for _, it := range items {
		keys = append(keys, it.(map[string]any)["key"].(string))
	}
	return keys
}

func TestListVariablesIsFilteredByScopes(t *testing.T) {
	h := newVarHarness(t, variables.NoAgents{})
	scopeless := []string{"context.tenantName", "context.today", "context.user.displayName",
		"context.user.email", "run.id", "workflow.key"}

	keys := listedKeys(t, h.do(http.MethodGet, "/v1/variables", h.tokenWith(auth.ScopeVariablesRead), nil))
	require.Equal(t, scopeless, keys, "a token without agents.read must not see agent.name")

	r := h.do(http.MethodGet, "/v1/variables", h.tokenWith(auth.ScopeVariablesRead, auth.ScopeAgentsRead), nil)
	require.Equal(t, append([]string{"agent.name"}, scopeless...), listedKeys(t, r))
	agent := r.Body["variables"].([]any)[0].(map[string]any)
	require.Equal(t, "agents.read", agent["scope"])
	require.Equal(t, []any{"agentId"}, agent["requiredBindings"])
	require.Equal(t, "text", agent["kind"])
	require.NotEmpty(t, agent["label"])

	r = h.do(http.MethodGet, "/v1/variables?cursor=abc", h.tokenWith(auth.ScopeVariablesRead), nil)
	require.Equal(t, http.StatusBadRequest, r.Status, r.Raw)
	require.Equal(t, "CURSOR_INVALID", r.code())
}

func TestResolveVariablesHappyPath(t *testing.T) {
	h := newVarHarness(t, variables.NoAgents{})
	tok := h.token(auth.Principal{Tenant: "t1", Sub: "u-7", Name: "Ada Lovelace", Email: "ada@example.com",
		TenantName: "Acme Corp", Scopes: []string{auth.ScopeVariablesRead}})

	before := time.Now().UTC().Format("2006-01-02")
	r := h.resolve(tok, map[string]any{
		"template": "Hi {{ context.user.displayName }} <{{context.user.email}}> of {{ context.tenantName }} on {{ context.today }}: " +
			"{{ item.id }} {{ item.count }} {{ item.tags }} \\{{ literal }}",
		"values": map[string]any{"item.id": "A-1", "item.count": 2.50, "item.tags": map[string]any{"b": []int{1}, "a": true}},
	})
	after := time.Now().UTC().Format("2006-01-02")
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	text := r.Body["text"].(string)
	want := "Hi Ada Lovelace <ada@example.com> of Acme Corp on %s: A-1 2.5 {\"a\":true,\"b\":[1]} {{ literal }}"
	require.Contains(t, []string{strings.Replace(want, "%s", before, 1), strings.Replace(want, "%s", after, 1)}, text)

	// Values win over the registry, and the principal fills the context:
	// nothing in the body can name another tenant or user.
	r = h.resolve(tok, map[string]any{"template": "{{ context.user.displayName }}|{{ context.tenantName }}",
		"values": map[string]any{"context.user.displayName": "Override"}})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	require.Equal(t, "Override|Acme Corp", r.Body["text"])

	// Without name claims the context falls back to sub and tenant id.
	r = h.resolve(h.tokenWith(auth.ScopeVariablesRead), map[string]any{
		"template": "{{ context.user.displayName }}@{{ context.tenantName }} [{{ context.user.email }}]"})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	require.Equal(t, "alice@t1 []", r.Body["text"])

	r = h.resolve(tok, map[string]any{"template": ""})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	require.Equal(t, "", r.Body["text"])

	// The template limit is inclusive.
	r = h.resolve(tok, map[string]any{"template": strings.Repeat("é", 8000)})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
}

func TestResolveVariablesRefusals(t *testing.T) {
	h := newVarHarness(t, variables.NoAgents{})
	read := h.tokenWith(auth.ScopeVariablesRead)
	withAgents := h.tokenWith(auth.ScopeVariablesRead, auth.ScopeAgentsRead)
	agent := map[string]any{"template": "{{ agent.name }}", "bindings": map[string]any{"agentId": "support-bot"}}

	cases := []struct {
		name   string
		token  string
		body   any
		status int
		code   string
		msg    string
	}{
		{"unknown variable", read, map[string]any{"template": "{{ nope }} and {{ Not A Key }}"},
			422, "UNKNOWN_VARIABLE", `"nope"`},
		{"missing scope", read, agent, 403, "MISSING_SCOPE", "agents.read"},
		{"missing binding", withAgents, map[string]any{"template": "{{ agent.name }}"},
			422, "MISSING_BINDING", "agentId"},
		{"empty binding is missing", withAgents, map[string]any{"template": "{{ agent.name }}",
			"bindings": map[string]any{"agentId": ""}}, 422, "MISSING_BINDING", "agentId"},
		{"no agents are stored yet", withAgents, agent, 422, "RECORD_NOT_FOUND", "agent.name"},
		{"no run outside a run", read, map[string]any{"template": "{{ run.id }}"}, 422, "RECORD_NOT_FOUND", "run.id"},
		{"template over 8,000 characters", read, map[string]any{"template": strings.Repeat("é", 8001)},
			422, "LIMIT_EXCEEDED", "8000"},
		{"rendering over 1 MiB", read, map[string]any{"template": strings.Repeat("{{ v }}", 5),
			"values": map[string]any{"v": strings.Repeat("x", 250<<10)}}, 422, "LIMIT_EXCEEDED", "larger than"},
		{"unknown field", read, map[string]any{"template": "x", "tenant": "t2"}, 400, "INVALID_REQUEST", "tenant"},
		{"case-folded field", read, map[string]any{"Template": "x"}, 400, "INVALID_REQUEST", "Template"},
		{"repeated field", read, `{"template": "a", "template": "b"}`, 400, "INVALID_REQUEST", "twice"},
		{"missing template", read, map[string]any{"values": map[string]any{}}, 400, "INVALID_REQUEST", "template"},
		{"template not a string", read, map[string]any{"template": 7}, 400, "INVALID_REQUEST", "template"},
		{"bindings not an object", read, map[string]any{"template": "x", "bindings": []string{"a"}},
			400, "INVALID_REQUEST", "bindings"},
		{"binding not a string", read, map[string]any{"template": "x", "bindings": map[string]any{"agentId": 7}},
			400, "INVALID_REQUEST", "bindings.agentId"},
		{"value name not a key", read, map[string]any{"template": "x", "values": map[string]any{"__proto__": "x"}},
			400, "INVALID_REQUEST", "values.__proto__"},
		{"repeated value name", read, `{"template": "x", "values": {"a": "1", "a": "2"}}`,
			400, "INVALID_REQUEST", "values.a"},
		{"malformed JSON", read, `{"template": `, 400, "INVALID_JSON", ""},
		{"empty body", read, "", 400, "INVALID_REQUEST", ""},
		{"body over 256 KiB", read, map[string]any{"template": "x", "values": map[string]any{"v": strings.Repeat("x", 300<<10)}},
			413, "DOCUMENT_TOO_LARGE", ""},
		{"no token", "", map[string]any{"template": "x"}, 401, "UNAUTHENTICATED", ""},
		{"bad token", "not-a-jwt", map[string]any{"template": "x"}, 401, "TOKEN_MALFORMED", ""},
		{"token without variables.read", h.tokenWith(auth.ScopeAgentsRead), map[string]any{"template": "x"},
			403, "MISSING_SCOPE", "variables.read"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if s, ok := body.(string); ok && s == "" {
				body = " "
			}
			r := h.resolve(tc.token, body)
			require.Equal(t, tc.status, r.Status, r.Raw)
			require.Equal(t, tc.code, r.code(), r.Raw)
			require.Contains(t, r.message()+r.Raw, tc.msg)
		})
	}

	// A non-JSON Content-Type is refused before the body is read.
	req := httptest.NewRequest(http.MethodPost, "/v1/variables/resolve", strings.NewReader("template=x"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+read)
	rec := httptest.NewRecorder()
	h.e.ServeHTTP(rec, req)
	require.Equal(t, http.StatusUnsupportedMediaType, rec.Code, rec.Body.String())

	// GET /v1/variables needs a token and variables.read too.
	r := h.do(http.MethodGet, "/v1/variables", "", nil)
	require.Equal(t, http.StatusUnauthorized, r.Status, r.Raw)
	r = h.do(http.MethodGet, "/v1/variables", h.tokenWith(auth.ScopeAgentsRead, auth.ScopeWorkflowsRead), nil)
	require.Equal(t, http.StatusForbidden, r.Status, r.Raw)
	require.Equal(t, "MISSING_SCOPE", r.code())
}

// The request context ending before the sources answer is CANCELLED (503).
func TestResolveVariablesCancelled(t *testing.T) {
	h := newVarHarness(t, variables.NoAgents{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := h.request(ctx, http.MethodPost, "/v1/variables/resolve", h.tokenWith(auth.ScopeVariablesRead),
		map[string]any{"template": "{{ context.tenantName }}"})
	require.Equal(t, http.StatusServiceUnavailable, r.Status, r.Raw)
	require.Equal(t, "CANCELLED", r.code())

	// Values alone need no source, so nothing can be cancelled.
	r = h.request(ctx, http.MethodPost, "/v1/variables/resolve", h.tokenWith(auth.ScopeVariablesRead),
		map[string]any{"template": "{{ a }}", "values": map[string]any{"a": "1"}})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
}

// A failing source is SOURCE_FAILED (502) with a generic message; its error
// is logged, never shown.
func TestResolveVariablesSourceFailed(t *testing.T) {
	h := newVarHarness(t, failingAgents{})
	r := h.resolve(h.tokenWith(auth.ScopeVariablesRead, auth.ScopeAgentsRead),
		map[string]any{"template": "{{ agent.name }}", "bindings": map[string]any{"agentId": "support-bot"}})
	require.Equal(t, http.StatusBadGateway, r.Status, r.Raw)
	require.Equal(t, "SOURCE_FAILED", r.code())
	require.NotContains(t, r.Raw, "10.0.0.7")
	require.Contains(t, h.logs.String(), "10.0.0.7", "the cause is logged for operators")
}

// Publication validates templates against the same registry: unknown and
// unbound variables are refused with UNKNOWN_VARIABLE at the template's
// path, and the stored revision keeps the raw template with the scopes its
// variables need as node permissions.
func TestPublicationChecksTemplatesAndKeepsThemRaw(t *testing.T) {
	h := newVarHarness(t, variables.NoAgents{})
	tok := h.tokenWith(auth.ScopeWorkflowsRead, auth.ScopeWorkflowsWrite, auth.ScopeWorkflowsPublish)
	graphWith := func(title string, bindings map[string]string) json.RawMessage {
		t.Helper()
		raw, err := json.Marshal(map[string]any{"template": title, "bindings": bindings})
		require.NoError(t, err)
		g := strings.Replace(string(quickstart(t)),
			`{ "template": "Item {{ item.id }}", "bindings": { "item.id": "/in/id" } }`, string(raw), 1)
		require.NotEqual(t, string(quickstart(t)), g)
		return json.RawMessage(g)
	}

	create := func(key string, g json.RawMessage) {
		t.Helper()
		r := h.do(http.MethodPost, "/v1/workflows", tok, map[string]any{"key": key, "graph": g})
		require.Equal(t, http.StatusCreated, r.Status, r.Raw)
	}

	create("bad", graphWith("{{ nope }} by {{ agent.name }}", map[string]string{"item.id": "/in/id"}))
	r := h.do(http.MethodPost, "/v1/workflows/bad/dry-run", tok, map[string]any{})
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	require.Equal(t, false, r.Body["valid"])
	issues := r.Body["issues"].([]any)
	require.Len(t, issues, 2, r.Raw)
	for _, is := range issues {
		require.Equal(t, "UNKNOWN_VARIABLE", is.(map[string]any)["code"])
		require.Equal(t, "/nodes/2/mapping/title/template", is.(map[string]any)["path"])
	}
	r = h.do(http.MethodPost, "/v1/workflows/bad/publish", tok, map[string]any{"expectedRevision": 1})
	require.Equal(t, http.StatusUnprocessableEntity, r.Status, r.Raw)
	require.Equal(t, "INVALID_GRAPH", r.code())
	require.Contains(t, r.Raw, "UNKNOWN_VARIABLE")

	title := "{{ context.user.displayName }} filed {{ item.id }} for {{ agent.name }}"
	create("good", graphWith(title, map[string]string{"item.id": "/in/id", "agentId": "/in/id"}))
	// agent.name needs agents.read: a publisher without it may not embed it
	// (a forbidden variable), in a dry-run, a publication or a simulated draft.
	r = h.do(http.MethodPost, "/v1/workflows/good/dry-run", tok, map[string]any{})
	require.Equal(t, false, r.Body["valid"], r.Raw)
	require.Len(t, r.Body["issues"], 1, r.Raw)
	forbidden := r.Body["issues"].([]any)[0].(map[string]any)
	require.Equal(t, "UNKNOWN_VARIABLE", forbidden["code"])
	require.Equal(t, "/nodes/2/mapping/title/template", forbidden["path"])
	require.Contains(t, forbidden["message"], `needs scope "agents.read"`)
	r = h.do(http.MethodPost, "/v1/workflows/good/publish", tok, map[string]any{"expectedRevision": 1})
	require.Equal(t, http.StatusUnprocessableEntity, r.Status, r.Raw)
	require.Contains(t, r.Raw, `needs scope \"agents.read\"`)

	tok = h.tokenWith(auth.ScopeWorkflowsRead, auth.ScopeWorkflowsWrite, auth.ScopeWorkflowsPublish, auth.ScopeAgentsRead)
	r = h.do(http.MethodPost, "/v1/workflows/good/publish", tok, map[string]any{"expectedRevision": 1})
	require.Equal(t, http.StatusCreated, r.Status, r.Raw)
	r = h.do(http.MethodGet, "/v1/workflows/good/revisions/1", tok, nil)
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	require.Contains(t, r.Raw, `"template":"{{ context.user.displayName }} filed {{ item.id }} for {{ agent.name }}"`)
	perms := r.Body["nodePermissions"].(map[string]any)["save"]
	require.Equal(t, []any{"agents.read", "notes.write"}, perms)
}
