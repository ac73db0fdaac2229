package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/bridges"
	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/internal/testinfra/inproc"
	"github.com/weftworks/weft/metrics"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/worker"
)

// The event stream is text; its schema is a string (the document describes
// the messages in prose).
func init() {
	openapi3filter.RegisterBodyDecoder("text/event-stream",
		func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
			b, err := io.ReadAll(body)
			return string(b), err
		})
}

// contractHarness serves the whole application (real PostgreSQL, a real
// Temporal dev server with weft's tuning and search attributes, and a worker
// registering what production registers) and checks every request and
// response against the OpenAPI document.
type contractHarness struct {
	t      *testing.T
	h      *echo.Echo
	doc    *openapi3.T
	router routers.Router
	keys   *auth.Keys
	token  string
	st     *store.Store
	// seen counts the responses validated per "METHOD path status".
	seen map[string]int
}

func newContractHarness(t *testing.T) *contractHarness {
	t.Helper()
	tc := testinfra.OwnTemporal(t).Client()
	st := testinfra.NewStore(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	queue := "openapi-" + uuid.NewString()
	keys := testinfra.Keys(t, "openapi-contract-secret-0123456789")
	cfg, err := config.FromEnv(func(string) string { return "" })
	require.NoError(t, err)
	cfg.TaskQueue, cfg.DatabaseURL = queue, ""

	m := metrics.New()
	require.NoError(t, m.RegisterRuns(st, 0, logger))
	inproc.Worker(t, worker.Deps{Config: cfg, Store: st, Temporal: tc, Logger: logger, Metrics: m})
	runs, err := inproc.NewStarter(starter.Deps{Store: st, Temporal: tc, TaskQueue: queue, UIURL: "http://ui.test",
		Namespace: "default", Logger: logger})
	require.NoError(t, err)

	doc := loadOpenAPI(t)
	router, err := gorillamux.NewRouter(doc)
	require.NoError(t, err)
	// A model provider whose endpoint is down: /readyz reports it apart.
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	openai, err := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: down.URL, APIKey: "sk-contract"})
	require.NoError(t, err)
	ready := provider.NewReadiness([]provider.Provider{openai}, provider.ReadinessOptions{Logger: logger})
	c := &contractHarness{t: t, doc: doc, router: router, keys: keys, seen: map[string]int{}, st: st,
		h: inproc.API(t, api.Deps{Config: cfg, Store: st, Keys: keys, Temporal: tc, Logger: logger, Metrics: m, Starter: runs,
			Providers: ready})}
	c.token = c.mint("acme", "alice", auth.AllScopes...)
	return c
}

func (c *contractHarness) mint(tenant, sub string, scopes ...string) string {
	c.t.Helper()
	return testinfra.TokenFor(c.t, c.keys, auth.Principal{Tenant: tenant, Sub: sub, Scopes: scopes, Name: "Alice"})
}

// call describes one request.
type call struct {
	method, path string
	token        string
	body         any // marshalled unless string or []byte
	contentType  string
	header       http.Header
	// malformed: the request itself breaks the document on purpose (to
	// provoke an error answer); only the response is validated.
	malformed bool
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	require.NoError(t, json.Unmarshal(a.body, &v), "body: %s", a.body)
	return v
}

// do serves one request and validates it and its answer against the
// document: the route must be documented, the request must match it
// (unless malformed), and the status, headers and body must be documented
// for that operation.
func (c *contractHarness) do(r call) answer {
	c.t.Helper()
	var raw []byte
	switch b := r.body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		raw, err = json.Marshal(b)
		require.NoError(c.t, err)
	}
	newReq := func() *http.Request {
		req := httptest.NewRequest(r.method, r.path, bytes.NewReader(raw))
		if raw != nil {
			ct := r.contentType
			if ct == "" {
				ct = "application/json"
			}
			req.Header.Set("Content-Type", ct)
		}
		if r.token != "" {
			req.Header.Set("Authorization", "Bearer "+r.token)
		}
		for k, v := range r.header {
			req.Header[k] = v
		}
		return req
	}

	req := newReq()
	route, params, err := c.router.FindRoute(req)
	require.NoError(c.t, err, "%s %s is not in the OpenAPI document", r.method, r.path)
	opts := &openapi3filter.Options{MultiError: true, IncludeResponseStatus: true,
		AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	if !r.malformed {
		require.NoError(c.t, openapi3filter.ValidateRequest(context.Background(), in),
			"request %s %s does not match the document", r.method, r.path)
	}

	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, newReq())
	out := answer{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	rin := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: out.status, Header: out.header, Options: opts}
	rin.SetBodyBytes(out.body)
	require.NoError(c.t, openapi3filter.ValidateResponse(context.Background(), rin),
		"response %d of %s %s does not match the document: %s", out.status, r.method, r.path, out.body)
	c.seen[fmt.Sprintf("%s %s %d", r.method, route.Path, out.status)]++
	return out
}

// expect is do requiring a status.
func (c *contractHarness) expect(status int, r call) answer {
	c.t.Helper()
	a := c.do(r)
	require.Equal(c.t, status, a.status, "%s %s: %s", r.method, r.path, a.body)
	return a
}

const contractGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "check", "kind": "gate", "inputs": {"in": "any"}, "outputs": {"pass": "any", "fail": "any"},
     "language": "cel/v1", "expression": "has(input.title)"},
    {"id": "save", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"},
     "action": {"id": "workspace.notes.write", "version": 1},
     "mapping": {"title": {"template": "Note {{ item.title }}", "bindings": {"item.title": "/in/title"}}, "body": {"pointer": "/in"}}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}},
    {"id": "rejected", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [
    {"from": "in.out", "to": "check.in"}, {"from": "check.pass", "to": "save.in"},
    {"from": "save.out", "to": "out.in"}, {"from": "check.fail", "to": "rejected.in"}
  ]
}`

const sleepyGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "nap", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"},
     "action": {"id": "core.sleep", "version": 1}, "mapping": {"ms": {"literal": 60000}}, "timeoutMs": 90000},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "nap.in"}, {"from": "nap.out", "to": "out.in"}]
}`

// gatedGraph waits for a person's decision before it settles.
const gatedGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "ok", "kind": "approval", "inputs": {"in": "any"},
     "outputs": {"approved": "any", "rejected": "any", "timedOut": "any"}, "timeoutMs": 3600000},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "ok.in"}, {"from": "ok.approved", "to": "out.in"}]
}`

const brokenGraph = `{
  "schemaVersion": 1,
  "nodes": [{"id": "in", "kind": "input", "outputs": {"out": "any"}}, {"id": "out", "kind": "output", "inputs": {"in": "any"}}],
  "edges": [{"from": "in.out", "to": "nowhere.in"}]
}`

// TestOpenAPIResponsesMatch drives every documented operation through the
// real application, success and error answers, and validates each request
// and answer against the document; then it scrapes /metrics after the runs.
func TestOpenAPIResponsesMatch(t *testing.T) {
	c := newContractHarness(t)
	tok := c.token
	readOnly := c.mint("acme", "bob", auth.ScopeWorkflowsRead)

	// Operations.
	c.expect(200, call{method: "GET", path: "/healthz"})
	ready := c.expect(200, call{method: "GET", path: "/readyz"}).json(t)
	require.Equal(t, map[string]any{"openai": "unreachable"}, ready["providers"])
	c.expect(200, call{method: "GET", path: "/v1/openapi.json", token: tok})
	c.expect(401, call{method: "GET", path: "/v1/openapi.json", malformed: true})

	// Authoring.
	c.expect(201, call{method: "POST", path: "/v1/workflows", token: tok,
		body: map[string]any{"key": "notes", "graph": json.RawMessage(contractGraph)}})
	c.expect(409, call{method: "POST", path: "/v1/workflows", token: tok,
		body: map[string]any{"key": "notes", "graph": json.RawMessage(contractGraph)}})
	c.expect(400, call{method: "POST", path: "/v1/workflows", token: tok, body: `{"key": "x", "graph": `, malformed: true})
	c.expect(400, call{method: "POST", path: "/v1/workflows", token: tok,
		body: map[string]any{"key": "Bad Key", "graph": json.RawMessage(contractGraph)}, malformed: true})
	c.expect(403, call{method: "POST", path: "/v1/workflows", token: readOnly,
		body: map[string]any{"key": "other", "graph": json.RawMessage(contractGraph)}})
	c.expect(201, call{method: "POST", path: "/v1/workflows?key=sleepy", token: tok, contentType: "application/yaml", body: sleepyGraph})
	c.expect(201, call{method: "POST", path: "/v1/workflows", token: tok,
		body: map[string]any{"key": "broken", "graph": json.RawMessage(brokenGraph)}})
	c.expect(200, call{method: "GET", path: "/v1/workflows?limit=1", token: tok})
	list := c.expect(200, call{method: "GET", path: "/v1/workflows", token: tok}).json(t)
	require.Len(t, list["workflows"], 3)
	c.expect(200, call{method: "GET", path: "/v1/workflows/notes", token: tok})
	c.expect(404, call{method: "GET", path: "/v1/workflows/missing", token: tok})
	c.expect(200, call{method: "PUT", path: "/v1/workflows/notes/draft", token: tok,
		body: map[string]any{"expectedRevision": 1, "graph": json.RawMessage(contractGraph)}})
	c.expect(409, call{method: "PUT", path: "/v1/workflows/notes/draft", token: tok,
		body: map[string]any{"expectedRevision": 1, "graph": json.RawMessage(contractGraph)}})
	c.expect(200, call{method: "PUT", path: "/v1/workflows/sleepy/draft?expectedRevision=1", token: tok,
		contentType: "application/yaml", body: sleepyGraph})
	dry := c.expect(200, call{method: "POST", path: "/v1/workflows/notes/dry-run", token: tok}).json(t)
	require.Equal(t, []any{}, dry["warnings"])
	// The editor's routes: the layout beside the draft, the check of an unsaved graph.
	c.expect(200, call{method: "GET", path: "/v1/workflows/notes/layout", token: tok})
	c.expect(200, call{method: "PUT", path: "/v1/workflows/notes/layout", token: tok,
		body: map[string]any{"positions": map[string]any{"in": map[string]any{"x": 1, "y": 2}}}})
	c.expect(200, call{method: "GET", path: "/v1/workflows/notes/layout", token: tok})
	c.expect(400, call{method: "PUT", path: "/v1/workflows/notes/layout", token: tok,
		body: map[string]any{"positions": map[string]any{"": map[string]any{"x": 1, "y": 2}}}})
	c.expect(404, call{method: "GET", path: "/v1/workflows/missing/layout", token: tok})
	checked := c.expect(200, call{method: "POST", path: "/v1/graphs/check", token: tok,
		body: map[string]any{"graph": json.RawMessage(brokenGraph)}}).json(t)
	require.Equal(t, false, checked["valid"])
	c.expect(400, call{method: "POST", path: "/v1/graphs/check", token: tok, body: map[string]any{}, malformed: true})
	// Toolsets: a new one needs a one-line summary.
	toolsetGraph := func(ts string) json.RawMessage {
		return json.RawMessage(`{"schemaVersion": 1, "toolsets": {"ops": ` + ts + `},
		  "nodes": [{"id": "in", "kind": "input", "outputs": {"out": "any"}}, {"id": "out", "kind": "output", "inputs": {"in": "any"}}],
		  "edges": [{"from": "in.out", "to": "out.in"}]}`)
	}
	refused := c.expect(422, call{method: "POST", path: "/v1/workflows", token: tok,
		body: map[string]any{"key": "tools", "graph": toolsetGraph(`{"tools": ["core.echo@1"], "skill": "Echo."}`)}}).json(t)
	require.Equal(t, "MISSING_TOOLSET_SUMMARY", refused["error"].(map[string]any)["code"])
	refused = c.expect(422, call{method: "POST", path: "/v1/workflows", token: tok,
		body: map[string]any{"key": "tools", "graph": toolsetGraph(`{"tools": ["core.echo@1"], "skill": "Echo.", "summary": "two\nlines"}`)}}).json(t)
	require.Equal(t, "INVALID_TOOLSET_SUMMARY", refused["error"].(map[string]any)["code"])
	c.expect(201, call{method: "POST", path: "/v1/workflows", token: tok,
		body: map[string]any{"key": "tools", "graph": toolsetGraph(`{"tools": ["core.echo@1"], "skill": "Echo.", "summary": "Echo values back."}`)}})
	c.expect(200, call{method: "POST", path: "/v1/workflows/broken/dry-run", token: tok, body: map[string]any{"draftRevision": 1}})
	c.expect(415, call{method: "POST", path: "/v1/workflows/notes/publish", token: tok, body: "expectedRevision=2",
		contentType: "application/x-www-form-urlencoded", malformed: true})
	c.expect(409, call{method: "POST", path: "/v1/workflows/notes/publish", token: tok, body: map[string]any{"expectedRevision": 1}})
	pub := c.expect(201, call{method: "POST", path: "/v1/workflows/notes/publish", token: tok, body: map[string]any{"expectedRevision": 2}})
	require.Equal(t, "/v1/workflows/notes/revisions/1", pub.header.Get("Location"))
	c.expect(200, call{method: "POST", path: "/v1/workflows/notes/publish", token: tok, body: map[string]any{"expectedRevision": 2}})
	c.expect(201, call{method: "POST", path: "/v1/workflows/sleepy/publish", token: tok, body: map[string]any{"expectedRevision": 2}})
	// A toolset saved before summaries existed keeps working: publication
	// succeeds and asks for the summary.
	require.NoError(t, pgx.BeginFunc(context.Background(), c.st.Pool, func(tx pgx.Tx) error {
		// Drafts are immutable; as an operator restoring an old dump would,
		// bypass the trigger for this one edit.
		if _, err := tx.Exec(context.Background(), `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		_, err := tx.Exec(context.Background(), `UPDATE workflow_drafts SET document = document #- '{toolsets,ops,summary}'
			WHERE tenant_id = 'acme' AND key = 'tools'`)
		return err
	}))
	oldTools := toolsetGraph(`{"tools": ["core.echo@1"], "skill": "Echo, still."}`)
	c.expect(200, call{method: "PUT", path: "/v1/workflows/tools/draft", token: tok,
		body: map[string]any{"expectedRevision": 1, "graph": oldTools}})
	dry = c.expect(200, call{method: "POST", path: "/v1/workflows/tools/dry-run", token: tok}).json(t)
	require.Equal(t, true, dry["valid"])
	require.Len(t, dry["warnings"], 1)
	pubTools := c.expect(201, call{method: "POST", path: "/v1/workflows/tools/publish", token: tok, body: map[string]any{"expectedRevision": 2}}).json(t)
	warnings := pubTools["warnings"].([]any)
	require.Len(t, warnings, 1)
	require.Equal(t, "MISSING_TOOLSET_SUMMARY", warnings[0].(map[string]any)["code"])
	c.expect(422, call{method: "POST", path: "/v1/workflows/broken/publish", token: tok, body: map[string]any{"expectedRevision": 1}})
	c.expect(200, call{method: "GET", path: "/v1/workflows/notes/revisions/1", token: tok})
	// YAML export: a draft and a revision's graph, by ?format= or Accept.
	c.expect(200, call{method: "GET", path: "/v1/workflows/notes/draft", token: tok})
	draftYAML := c.expect(200, call{method: "GET", path: "/v1/workflows/notes/draft?revision=1&format=yaml", token: tok})
	require.Equal(t, "1", draftYAML.header.Get("Weft-Draft-Revision"))
	revYAML := c.expect(200, call{method: "GET", path: "/v1/workflows/notes/revisions/1", token: tok,
		header: http.Header{"Accept": {"application/yaml"}}})
	require.Equal(t, pub.json(t)["checksum"], revYAML.header.Get("Weft-Checksum"))
	require.Equal(t, "2", revYAML.header.Get("Weft-Draft-Revision"))
	c.expect(404, call{method: "GET", path: "/v1/workflows/notes/draft?revision=9", token: tok})
	c.expect(400, call{method: "GET", path: "/v1/workflows/notes/draft?format=xml", token: tok, malformed: true})
	c.expect(404, call{method: "GET", path: "/v1/workflows/notes/revisions/9", token: tok})

	// Runs.
	enqueue := map[string]any{"input": map[string]any{"title": "hello"}, "idempotencyKey": "k1"}
	acc := c.expect(202, call{method: "POST", path: "/v1/workflows/notes/runs", token: tok, body: enqueue}).json(t)
	accTemporal := acc["temporal"].(map[string]any)
	require.NotEmpty(t, accTemporal["runId"], "the started execution's run id")
	again := c.expect(200, call{method: "POST", path: "/v1/workflows/notes/runs", token: tok, body: enqueue}).json(t)
	require.Equal(t, accTemporal, again["temporal"], "a repeated key names the execution it started")
	c.expect(409, call{method: "POST", path: "/v1/workflows/notes/runs", token: tok,
		body: map[string]any{"input": map[string]any{"title": "other"}, "idempotencyKey": "k1"}})
	c.expect(422, call{method: "POST", path: "/v1/workflows/broken/runs", token: tok, body: map[string]any{"input": 1, "idempotencyKey": "b"}})
	c.expect(202, call{method: "POST", path: "/v1/workflows/notes/runs", token: tok,
		body: map[string]any{"input": map[string]any{"title": "sim"}, "mode": "simulation", "idempotencyKey": "k2"}})
	granted := map[string]any{"input": map[string]any{"title": "granted"}, "idempotencyKey": "k3", "toolGrants": []string{"core.echo@1"}}
	c.expect(202, call{method: "POST", path: "/v1/workflows/notes/runs", token: tok, body: granted})
	c.expect(409, call{method: "POST", path: "/v1/workflows/notes/runs", token: tok,
		body: map[string]any{"input": map[string]any{"title": "granted"}, "idempotencyKey": "k3", "toolGrants": []string{}}})
	c.expect(400, call{method: "POST", path: "/v1/workflows/notes/runs", token: tok, malformed: true,
		body: map[string]any{"input": map[string]any{"title": "x"}, "idempotencyKey": "k4", "toolGrants": []string{"core.echo"}}})
	c.expect(403, call{method: "POST", path: "/v1/workflows/notes/runs", token: c.mint("acme", "eve", auth.ScopeRunsExecute),
		body: map[string]any{"input": map[string]any{"title": "x"}, "idempotencyKey": "e"}})
	runID := acc["runId"].(string)
	run := c.waitRun(runID, "succeeded")
	require.Equal(t, accTemporal["workflowId"], run["temporal"].(map[string]any)["workflowId"])
	require.Equal(t, accTemporal["runId"], run["temporal"].(map[string]any)["runId"], "the execution the enqueue named is the one that ran")
	require.Len(t, run["nodes"], 5)
	// Replays (issue 21): the published draft replayed against the run.
	replayed := c.expect(202, call{method: "POST", path: "/v1/workflows/notes/replays", token: tok,
		body: map[string]any{"draftRevision": 2, "runs": []string{runID}}}).json(t)
	replayPath := "/v1/replays/" + replayed["replayId"].(string)
	deadline := time.Now().Add(time.Minute)
	for c.expect(200, call{method: "GET", path: replayPath, token: tok}).json(t)["status"] != "done" {
		require.True(t, time.Now().Before(deadline), "replay not done")
		time.Sleep(50 * time.Millisecond)
	}
	report := c.expect(200, call{method: "GET", path: replayPath, token: tok}).json(t)
	require.Equal(t, "same", report["runs"].([]any)[0].(map[string]any)["verdict"], "%v", report)
	c.expect(200, call{method: "GET", path: "/v1/workflows/notes/replays?limit=1", token: tok})
	c.expect(404, call{method: "GET", path: replayPath, token: c.mint("globex", "mallory", auth.AllScopes...)})
	c.expect(403, call{method: "GET", path: replayPath, token: readOnly})
	c.expect(404, call{method: "GET", path: "/v1/workflows/ghost/replays", token: tok})
	c.expect(422, call{method: "POST", path: "/v1/workflows/notes/replays", token: tok, body: map[string]any{"draftRevision": 2, "last": 51}})
	c.expect(422, call{method: "POST", path: "/v1/workflows/notes/replays", token: tok, body: map[string]any{"draftRevision": 2, "runs": []string{"nope"}}})
	c.expect(422, call{method: "POST", path: "/v1/workflows/broken/replays", token: tok, body: map[string]any{"draftRevision": 1}})
	c.expect(400, call{method: "POST", path: "/v1/workflows/notes/replays", token: tok,
		body: map[string]any{"draftRevision": 2, "runs": []string{runID}, "last": 1}})
	c.expect(404, call{method: "POST", path: "/v1/workflows/notes/replays", token: tok, body: map[string]any{"draftRevision": 9}})
	c.expect(403, call{method: "POST", path: "/v1/workflows/notes/replays", token: readOnly, body: map[string]any{"draftRevision": 2}})
	c.expect(200, call{method: "GET", path: "/v1/runs?status=succeeded&limit=1", token: tok})
	c.expect(200, call{method: "GET", path: "/v1/runs?workflowKey=notes", token: tok})
	c.expect(400, call{method: "GET", path: "/v1/runs?status=bogus", token: tok, malformed: true})
	c.expect(404, call{method: "GET", path: "/v1/runs/nope", token: tok})
	c.expect(404, call{method: "GET", path: "/v1/runs/" + runID, token: c.mint("globex", "mallory", auth.AllScopes...)})
	page := c.expect(200, call{method: "GET", path: "/v1/runs/" + runID + "/events?limit=2", token: tok}).json(t)
	cursor, _ := page["nextCursor"].(string)
	require.NotEmpty(t, cursor)
	c.expect(200, call{method: "GET", path: "/v1/runs/" + runID + "/events?limit=500&cursor=" + cursor, token: tok})
	c.expect(400, call{method: "GET", path: "/v1/runs/" + runID + "/events?cursor=forged", token: tok})
	c.expect(409, call{method: "POST", path: "/v1/runs/" + runID + "/cancel", token: tok})
	verified := c.expect(200, call{method: "GET", path: "/v1/runs/" + runID + "/verify", token: tok}).json(t)
	require.Equal(t, true, verified["intact"])
	c.expect(404, call{method: "GET", path: "/v1/runs/nope/verify", token: tok})
	c.expect(403, call{method: "GET", path: "/v1/runs/" + runID + "/verify", token: readOnly})
	c.expect(200, call{method: "GET", path: "/v1/notes", token: tok})
	c.expect(200, call{method: "GET", path: "/v1/runs?mode=live&workflowKey=notes", token: tok})
	c.expect(400, call{method: "GET", path: "/v1/runs?mode=bogus", token: tok, malformed: true})

	// The event stream of a finished run: every event, then `end`, then EOF.
	stream := string(c.expect(200, call{method: "GET", path: "/v1/runs/" + runID + "/events/stream", token: tok}).body)
	require.Contains(t, stream, "id: 1\ndata: {\"seq\":1,\"type\":\"run.started\"")
	require.True(t, strings.HasSuffix(stream, "event: end\ndata: {\"status\":\"succeeded\",\"lastSeq\":"+
		fmt.Sprint(len(c.expect(200, call{method: "GET", path: "/v1/runs/" + runID + "/events?limit=500", token: tok}).json(t)["events"].([]any)))+"}\n\n"),
		"stream: %s", stream)
	c.expect(200, call{method: "GET", path: "/v1/runs/" + runID + "/events/stream?after=3", token: tok,
		header: http.Header{"Last-Event-Id": {"2"}}})
	c.expect(400, call{method: "GET", path: "/v1/runs/" + runID + "/events/stream?after=-1", token: tok, malformed: true})
	c.expect(403, call{method: "GET", path: "/v1/runs/" + runID + "/events/stream", token: c.mint("acme", "bob", auth.ScopeWorkflowsRead)})
	c.expect(404, call{method: "GET", path: "/v1/runs/" + runID + "/events/stream", token: c.mint("globex", "mallory", auth.AllScopes...)})

	slow := c.expect(202, call{method: "POST", path: "/v1/workflows/sleepy/runs", token: tok,
		body: map[string]any{"input": map[string]any{}, "idempotencyKey": "slow"}}).json(t)
	slowID := slow["runId"].(string)
	c.waitNode(slowID, "nap", "running")
	c.expect(202, call{method: "POST", path: "/v1/runs/" + slowID + "/cancel", token: tok})
	c.waitRun(slowID, "cancelled")

	// Limits: a run over the cap is accepted throttled with its position,
	// listed by status, and cancelled without starting.
	limitsOK := c.expect(200, call{method: "GET", path: "/v1/limits", token: readOnly}).json(t)
	require.Nil(t, limitsOK["tenant"].(map[string]any)["maxConcurrentRuns"])
	c.expect(403, call{method: "PUT", path: "/v1/limits", token: readOnly, body: map[string]any{"maxConcurrentRuns": 5}})
	c.expect(200, call{method: "PUT", path: "/v1/limits", token: tok, body: map[string]any{"maxConcurrentRuns": 5}})
	c.expect(400, call{method: "PUT", path: "/v1/limits", token: tok, body: map[string]any{"maxConcurrentRuns": 0}, malformed: true})
	c.expect(400, call{method: "PUT", path: "/v1/limits", token: tok, body: map[string]any{"maxRuns": 5}, malformed: true})
	c.expect(200, call{method: "PUT", path: "/v1/workflows/sleepy/limits", token: tok,
		body: map[string]any{"maxConcurrentRuns": 1, "budget": map[string]any{"maxTokens": 5000}}})
	c.expect(400, call{method: "PUT", path: "/v1/workflows/sleepy/limits", token: tok,
		body: map[string]any{"maxStartsPerMinute": -2}, malformed: true})
	c.expect(404, call{method: "PUT", path: "/v1/workflows/missing/limits", token: tok, body: map[string]any{"maxConcurrentRuns": 1}})
	c.expect(403, call{method: "PUT", path: "/v1/workflows/sleepy/limits", token: readOnly, body: map[string]any{}})
	c.expect(404, call{method: "GET", path: "/v1/workflows/missing/limits", token: tok})
	holder := c.expect(202, call{method: "POST", path: "/v1/workflows/sleepy/runs", token: tok,
		body: map[string]any{"input": map[string]any{}, "idempotencyKey": "hold"}}).json(t)
	require.Equal(t, "queued", holder["status"])
	waiting := c.expect(202, call{method: "POST", path: "/v1/workflows/sleepy/runs", token: tok,
		body: map[string]any{"input": map[string]any{}, "idempotencyKey": "wait", "budget": map[string]any{"maxCostUsd": 0.5}}}).json(t)
	require.Equal(t, "throttled", waiting["status"])
	require.Equal(t, 1.0, waiting["position"])
	waitingRun := c.expect(200, call{method: "GET", path: "/v1/runs/" + waiting["runId"].(string), token: tok}).json(t)
	require.Equal(t, "throttled", waitingRun["status"])
	require.Equal(t, map[string]any{"maxCostUsd": 0.5, "maxTokens": 5000.0}, waitingRun["budget"], "the enqueue's over the workflow default")
	throttledList := c.expect(200, call{method: "GET", path: "/v1/runs?status=throttled", token: tok}).json(t)
	require.Len(t, throttledList["runs"], 1)
	wl := c.expect(200, call{method: "GET", path: "/v1/workflows/sleepy/limits", token: tok}).json(t)
	require.Equal(t, 1.0, wl["throttled"])
	require.Equal(t, "alice", wl["updatedBy"])
	detail := c.expect(200, call{method: "GET", path: "/v1/workflows/sleepy", token: tok}).json(t)
	require.Equal(t, 1.0, detail["limits"].(map[string]any)["maxConcurrentRuns"])
	c.expect(409, call{method: "POST", path: "/v1/workflows/sleepy/runs", token: tok,
		body: map[string]any{"input": map[string]any{}, "idempotencyKey": "wait"}})
	cancelled := c.expect(202, call{method: "POST", path: "/v1/runs/" + waiting["runId"].(string) + "/cancel", token: tok}).json(t)
	require.Equal(t, "cancelled", cancelled["status"])
	c.expect(200, call{method: "GET", path: "/v1/limits", token: tok})

	// Approvals: a run waiting for a decision, listed, decided once.
	c.expect(201, call{method: "POST", path: "/v1/workflows", token: tok,
		body: map[string]any{"key": "gated", "graph": json.RawMessage(gatedGraph)}})
	c.expect(201, call{method: "POST", path: "/v1/workflows/gated/publish", token: tok, body: map[string]any{"expectedRevision": 1}})
	gated := c.expect(202, call{method: "POST", path: "/v1/workflows/gated/runs", token: tok,
		body: map[string]any{"input": map[string]any{"n": 1}, "idempotencyKey": "gated"}}).json(t)["runId"].(string)
	c.waitNode(gated, "ok", "awaiting_approval")
	pending := c.expect(200, call{method: "GET", path: "/v1/approvals?status=pending", token: tok}).json(t)
	require.Len(t, pending["approvals"], 1)
	c.expect(200, call{method: "GET", path: "/v1/approvals?runId=" + gated + "&limit=1", token: tok})
	c.expect(400, call{method: "GET", path: "/v1/approvals?status=bogus", token: tok, malformed: true})
	c.expect(403, call{method: "GET", path: "/v1/approvals", token: c.mint("acme", "bob", auth.ScopeWorkflowsRead)})
	decide := "/v1/runs/" + gated + "/approvals/ok"
	c.expect(403, call{method: "POST", path: decide, token: readOnly, body: map[string]any{"decision": "approve"}})
	c.expect(404, call{method: "POST", path: decide, token: c.mint("globex", "mallory", auth.AllScopes...), body: map[string]any{"decision": "approve"}})
	c.expect(404, call{method: "POST", path: "/v1/runs/" + gated + "/approvals/ghost", token: tok, body: map[string]any{"decision": "approve"}})
	c.expect(400, call{method: "POST", path: decide, token: tok, malformed: true, body: map[string]any{"decision": "maybe"}})
	c.expect(415, call{method: "POST", path: decide, token: tok, body: "decision=approve", contentType: "application/x-www-form-urlencoded", malformed: true})
	c.expect(409, call{method: "POST", path: "/v1/runs/" + gated + "/approvals/in", token: tok, body: map[string]any{"decision": "approve"}})
	decided := c.expect(200, call{method: "POST", path: decide, token: tok, body: map[string]any{"decision": "approve", "comment": "fine"}}).json(t)
	require.Equal(t, "approved", decided["status"])
	c.expect(409, call{method: "POST", path: decide, token: tok, body: map[string]any{"decision": "reject"}})
	c.waitRun(gated, "succeeded")

	// Variables.
	c.expect(200, call{method: "GET", path: "/v1/variables", token: tok})
	c.expect(200, call{method: "POST", path: "/v1/variables/resolve", token: tok,
		body: map[string]any{"template": "Hi {{ who }}", "values": map[string]any{"who": "there"}}})
	c.expect(422, call{method: "POST", path: "/v1/variables/resolve", token: tok, body: map[string]any{"template": "{{ no.such.variable }}"}})

	// Agents and actions.
	c.expect(200, call{method: "GET", path: "/v1/actions", token: tok})
	c.expect(201, call{method: "POST", path: "/v1/agents", token: tok,
		body: map[string]any{"key": "helper", "name": "Helper", "definition": map[string]any{"instructions": "Answer briefly."}}})
	c.expect(422, call{method: "POST", path: "/v1/agents", token: tok,
		body: map[string]any{"key": "tooly", "name": "Tooly", "definition": map[string]any{"instructions": "x", "outputSchema": map[string]any{"type": "nonsense"}}}})
	c.expect(200, call{method: "GET", path: "/v1/agents", token: tok})
	c.expect(200, call{method: "GET", path: "/v1/agents/helper", token: tok})
	c.expect(201, call{method: "POST", path: "/v1/agents/helper/revisions", token: tok,
		body: map[string]any{"expectedRevision": 1, "definition": map[string]any{"instructions": "Answer in one line."}}})
	c.expect(409, call{method: "POST", path: "/v1/agents/helper/revisions", token: tok,
		body: map[string]any{"expectedRevision": 1, "definition": map[string]any{"instructions": "stale"}}})
	c.expect(200, call{method: "GET", path: "/v1/agents/helper/revisions/1", token: tok})
	c.expect(404, call{method: "GET", path: "/v1/agents/helper/revisions/7", token: tok})
	// Skills.
	c.expect(201, call{method: "POST", path: "/v1/skills", token: tok,
		body: map[string]any{"key": "tone", "name": "Tone", "text": "Answer in plain words."}})
	c.expect(409, call{method: "POST", path: "/v1/skills", token: tok,
		body: map[string]any{"key": "tone", "name": "Tone", "text": "again"}})
	c.expect(422, call{method: "POST", path: "/v1/skills", token: tok,
		body: map[string]any{"key": "blank", "name": "Blank", "text": "  "}})
	c.expect(400, call{method: "POST", path: "/v1/skills", token: tok, malformed: true,
		body: map[string]any{"key": "x", "name": "X", "text": "t", "extra": 1}})
	c.expect(200, call{method: "GET", path: "/v1/skills", token: tok})
	c.expect(200, call{method: "GET", path: "/v1/skills/tone", token: tok})
	c.expect(404, call{method: "GET", path: "/v1/skills/none", token: tok})
	c.expect(201, call{method: "POST", path: "/v1/skills/tone/revisions", token: tok,
		body: map[string]any{"expectedRevision": 1, "text": "Answer in plainer words."}})
	c.expect(409, call{method: "POST", path: "/v1/skills/tone/revisions", token: tok,
		body: map[string]any{"expectedRevision": 1, "text": "stale"}})
	c.expect(200, call{method: "GET", path: "/v1/skills/tone/revisions/1", token: tok})
	c.expect(404, call{method: "GET", path: "/v1/skills/tone/revisions/5", token: tok})
	c.expect(403, call{method: "POST", path: "/v1/skills", token: readOnly,
		body: map[string]any{"key": "y", "name": "Y", "text": "t"}})
	c.expect(201, call{method: "POST", path: "/v1/agents", token: tok,
		body: map[string]any{"key": "skilled", "name": "Skilled", "definition": map[string]any{"instructions": "Answer.",
			"skills": []any{map[string]any{"key": "tone", "revision": 2}}}}})
	c.expect(422, call{method: "POST", path: "/v1/agents", token: tok,
		body: map[string]any{"key": "unskilled", "name": "Unskilled", "definition": map[string]any{"instructions": "Answer.",
			"skills": []any{map[string]any{"key": "tone", "revision": 9}}}}})
	c.expect(200, call{method: "POST", path: "/v1/skills/tone/archive", token: tok})
	c.expect(409, call{method: "POST", path: "/v1/skills/tone/revisions", token: tok, body: map[string]any{"text": "late"}})
	c.expect(404, call{method: "POST", path: "/v1/skills/none/archive", token: tok})
	c.expect(200, call{method: "POST", path: "/v1/agents/helper/archive", token: tok})
	c.expect(404, call{method: "POST", path: "/v1/agents/nobody/archive", token: tok})

	// Schedules.
	sch := c.expect(201, call{method: "POST", path: "/v1/workflows/notes/schedules", token: tok,
		body: map[string]any{"every": "1h", "input": map[string]any{"title": "hourly"}, "paused": true}}).json(t)
	scheduleID := sch["scheduleId"].(string)
	c.expect(400, call{method: "POST", path: "/v1/workflows/notes/schedules", token: tok, body: map[string]any{"every": "1ms"}})
	templated := c.expect(201, call{method: "POST", path: "/v1/workflows/notes/schedules", token: tok,
		body: map[string]any{"every": "1h", "paused": true, "input": map[string]any{"title": "from {{ agent.name }}"},
			"bindings": map[string]any{"agentId": "helper"}}}).json(t)
	require.Equal(t, true, templated["templated"])
	c.expect(422, call{method: "POST", path: "/v1/workflows/notes/schedules", token: tok,
		body: map[string]any{"every": "1h", "paused": true, "input": map[string]any{"title": "{{ no.such }}"}}})
	c.expect(200, call{method: "GET", path: "/v1/workflows/notes/schedules", token: tok})
	c.expect(200, call{method: "GET", path: "/v1/workflows/notes/schedules/" + scheduleID, token: tok})
	policyPath := "/v1/workflows/notes/schedules/" + scheduleID + "/tool-policy"
	c.expect(200, call{method: "PUT", path: policyPath, token: tok, body: map[string]any{"toolPolicy": []string{"core.echo@1", "workspace.notes.write@1"}}})
	c.expect(400, call{method: "PUT", path: policyPath, token: tok, body: map[string]any{}, malformed: true})
	c.expect(422, call{method: "PUT", path: policyPath, token: tok, body: map[string]any{"toolPolicy": []string{"core.http.fetch@1"}}})
	c.expect(200, call{method: "PUT", path: policyPath, token: tok, body: map[string]any{"toolPolicy": []string{}}})
	c.expect(403, call{method: "PUT", path: policyPath, token: c.mint("acme", "eve", auth.ScopeSchedulesManage),
		body: map[string]any{"toolPolicy": []string{"workspace.notes.write@1"}}})
	c.expect(201, call{method: "POST", path: "/v1/workflows/notes/schedules", token: tok,
		body: map[string]any{"every": "1h", "paused": true, "toolPolicy": []string{"workspace.notes.write@1"}}})
	c.expect(204, call{method: "DELETE", path: "/v1/workflows/notes/schedules/" + scheduleID, token: tok})
	c.expect(404, call{method: "PUT", path: policyPath, token: tok, body: map[string]any{"toolPolicy": []string{}}})
	c.expect(404, call{method: "DELETE", path: "/v1/workflows/notes/schedules?scheduleId=" + scheduleID, token: tok})
	c.expect(404, call{method: "GET", path: "/v1/workflows/notes/schedules/" + scheduleID, token: tok})

	// Webhooks.
	hook := c.expect(201, call{method: "POST", path: "/v1/workflows/notes/webhooks", token: tok}).json(t)
	hookID, secret := hook["webhookId"].(string), hook["secret"].(string)
	c.expect(200, call{method: "GET", path: "/v1/workflows/notes/webhooks", token: tok})
	c.expect(201, call{method: "POST", path: "/v1/workflows/notes/webhooks", token: tok,
		body: map[string]any{"toolPolicy": []string{"core.echo@1"}}})
	c.expect(200, call{method: "GET", path: "/v1/workflows/notes/webhooks/" + hookID, token: tok})
	c.expect(404, call{method: "GET", path: "/v1/workflows/notes/webhooks/whk_nope", token: tok})
	c.expect(200, call{method: "PUT", path: "/v1/workflows/notes/webhooks/" + hookID + "/tool-policy", token: tok,
		body: map[string]any{"toolPolicy": []string{"core.echo@1"}}})
	payload := []byte(`{"title":"from a webhook"}`)
	signed := func(eventID string) http.Header {
		return http.Header{
			bridges.SignatureHeader: {bridges.SignatureHeaderValue(secret, time.Now(), payload)},
			bridges.EventIDHeader:   {eventID},
		}
	}
	delivered := c.expect(202, call{method: "POST", path: "/hooks/" + hookID, body: payload, header: signed("evt-1")}).json(t)
	c.expect(200, call{method: "POST", path: "/hooks/" + hookID, body: payload, header: signed("evt-1")})
	c.expect(401, call{method: "POST", path: "/hooks/" + hookID, body: payload,
		header: http.Header{bridges.EventIDHeader: {"evt-2"}}, malformed: true})
	c.waitRun(delivered["runId"].(string), "succeeded")
	c.expect(204, call{method: "DELETE", path: "/v1/workflows/notes/webhooks/" + hookID, token: tok})
	c.expect(404, call{method: "POST", path: "/hooks/" + hookID, body: payload, header: signed("evt-3")})

	// Revocations.
	revocation := map[string]any{"sub": "dave", "scope": auth.ScopeNotesWrite}
	c.expect(201, call{method: "POST", path: "/v1/revocations", token: tok, body: revocation})
	c.expect(200, call{method: "POST", path: "/v1/revocations", token: tok, body: revocation})
	c.expect(201, call{method: "POST", path: "/v1/revocations", token: tok, body: map[string]any{"sub": "dave", "scope": auth.ScopeRunsExecute}})
	c.expect(400, call{method: "POST", path: "/v1/revocations", token: tok,
		body: map[string]any{"sub": "dave", "scope": "root everything"}, malformed: true})
	c.expect(403, call{method: "POST", path: "/v1/revocations", token: readOnly, body: revocation})
	page = c.expect(200, call{method: "GET", path: "/v1/revocations?sub=dave&limit=1", token: tok}).json(t)
	cursor, _ = page["nextCursor"].(string)
	require.NotEmpty(t, cursor)
	c.expect(200, call{method: "GET", path: "/v1/revocations?sub=dave&cursor=" + cursor, token: tok})
	c.expect(400, call{method: "GET", path: "/v1/revocations?cursor=" + cursor, token: tok})
	c.expect(204, call{method: "DELETE", path: "/v1/revocations/dave/" + auth.ScopeNotesWrite, token: tok})

	c.expect(404, call{method: "DELETE", path: "/v1/revocations/dave/" + auth.ScopeNotesWrite, token: tok})

	// Metrics after the runs: runs by status from PostgreSQL, node
	// durations from the worker, API latency by route template.
	metricsText := string(c.expect(200, call{method: "GET", path: "/metrics"}).body)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^weft_runs\{status="succeeded"\} [3-9]$`),
		regexp.MustCompile(`(?m)^weft_runs\{status="cancelled"\} 2$`),
		regexp.MustCompile(`(?m)^weft_runs\{status="throttled"\} 0$`),
		regexp.MustCompile(`(?m)^weft_runs\{status="failed"\} 0$`),
		regexp.MustCompile(`(?m)^weft_runs_collector_up 1$`),
		regexp.MustCompile(`(?m)^weft_node_duration_seconds_count\{kind="action",outcome="succeeded"\} [1-9]\d*$`),
		regexp.MustCompile(`(?m)^weft_node_duration_seconds_count\{kind="gate",outcome="succeeded"\} [1-9]\d*$`),
		regexp.MustCompile(`(?m)^weft_node_duration_seconds_count\{kind="action",outcome="cancelled"\} 1$`),
		regexp.MustCompile(`(?m)^weft_api_request_duration_seconds_count\{method="POST",route="/v1/workflows/:key/runs",status="202"\} [1-9]\d*$`),
		regexp.MustCompile(`(?m)^go_goroutines \d+$`),
		regexp.MustCompile(`(?m)^process_resident_memory_bytes \S+$`),
	} {
		require.Regexp(t, want, metricsText)
	}

	// Retention: a run whose events were deleted cannot be verified, and a
	// key whose run was deleted cannot start another.
	_, err := c.st.Pool.Exec(context.Background(), `UPDATE runs SET events_deleted_at = now() WHERE run_id = $1`, runID)
	require.NoError(t, err)
	c.expect(410, call{method: "GET", path: "/v1/runs/" + runID + "/verify", token: tok})
	res, err := c.st.DeleteRunsClosedBefore(context.Background(), time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Positive(t, res.Runs)
	c.expect(410, call{method: "POST", path: "/v1/workflows/notes/runs", token: tok, body: enqueue})

	// The fully wired application registers exactly the documented routes.
	routes := registeredRoutes(c.h)
	for k := range documentedRoutes(c.doc) {
		require.True(t, routes[k], "%s is documented but not registered", k)
	}
	for k := range routes {
		require.NotNil(t, documentedRoutes(c.doc)[k], "%s is registered but not documented in api/openapi.yaml", k)
	}

	// Every documented operation was exercised.
	exercised := map[string]bool{}
	for k := range c.seen {
		exercised[k[:strings.LastIndex(k, " ")]] = true
	}
	for k := range documentedRoutes(c.doc) {
		require.True(t, exercised[string(k)], "%s was not exercised", k)
	}
	t.Logf("%d distinct (operation, status) answers validated", len(c.seen))
}

// waitRun polls GET /v1/runs/{id} (validating each answer) until status.
func (c *contractHarness) waitRun(id, status string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		run := c.expect(200, call{method: "GET", path: "/v1/runs/" + id, token: c.token}).json(c.t)
		if run["status"] == status {
			return run
		}
		require.True(c.t, time.Now().Before(deadline), "run %s is %v, want %s: %v", id, run["status"], status, run)
		time.Sleep(50 * time.Millisecond)
	}
}

// waitNode polls until node is in status.
func (c *contractHarness) waitNode(id, node, status string) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		run := c.expect(200, call{method: "GET", path: "/v1/runs/" + id, token: c.token}).json(c.t)
		for _, n := range run["nodes"].([]any) {
			if n := n.(map[string]any); n["id"] == node && n["status"] == status {
				return
			}
		}
		require.True(c.t, time.Now().Before(deadline), "node %s of run %s never %s: %v", node, id, status, run["nodes"])
		time.Sleep(50 * time.Millisecond)
	}
}
