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
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/internal/testinfra/inproc"
	"github.com/weftworks/weft/publication"
	"github.com/weftworks/weft/store"
)

// wfHarness is an API over a fresh database, driven in-process.
type wfHarness struct {
	t    *testing.T
	e    *echo.Echo
	st   *store.Store
	keys *auth.Keys
	// token holds every workflows scope for tenant t1, sub alice.
	token string
}

func newWFHarness(t *testing.T) *wfHarness {
	t.Helper()
	st := testinfra.NewStore(t)
	keys := testinfra.Keys(t, "workflows-test-secret-0123456789")
	h := &wfHarness{t: t, st: st, keys: keys,
		e: inproc.API(t, api.Deps{Store: st, Keys: keys, Publication: inproc.Publication(t, st, &publication.Resolver{}),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})}
	h.token = h.mint("t1", "alice", auth.ScopeWorkflowsRead, auth.ScopeWorkflowsWrite, auth.ScopeWorkflowsPublish)
	return h
}

func (h *wfHarness) mint(tenant, sub string, scopes ...string) string {
	h.t.Helper()
	return testinfra.Token(h.t, h.keys, tenant, sub, scopes...)
}

// wfResponse is a recorded response.
type wfResponse = testinfra.Response

// do sends a request with token (none when empty) and a JSON body (none when nil).
func (h *wfHarness) do(method, path, token string, body any) wfResponse {
	h.t.Helper()
	return h.serve(testinfra.NewRequest(h.t, method, path, token, body))
}

func (h *wfHarness) serve(req *http.Request) wfResponse { return testinfra.Serve(h.e, req) }

// create makes workflow key with graph and requires 201.
func (h *wfHarness) create(key string, graph json.RawMessage) {
	h.t.Helper()
	res := h.do(http.MethodPost, "/v1/workflows", h.token, map[string]any{"key": key, "graph": graph})
	require.Equal(h.t, http.StatusCreated, res.Status, "%s", res.Body)
}

func quickstart(t *testing.T) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("../examples/quickstart.json")
	require.NoError(t, err)
	return b
}

// withExpression returns the quickstart graph with another gate expression.
func withExpression(t *testing.T, expr string) json.RawMessage {
	t.Helper()
	g := string(quickstart(t))
	out := strings.Replace(g, `"input.id != ''"`, fmt.Sprintf("%q", expr), 1)
	require.NotEqual(t, g, out)
	return json.RawMessage(out)
}

func TestWorkflowCreateDryRunPublishRoundTrip(t *testing.T) {
	t.Parallel()
	h := newWFHarness(t)
	g := quickstart(t)

	// The walkthrough's request body, sent as it is.
	createBody, err := os.ReadFile("../examples/quickstart-create.json")
	require.NoError(t, err)
	var envelope struct{ Graph json.RawMessage }
	require.NoError(t, json.Unmarshal(createBody, &envelope))
	require.JSONEq(t, string(g), string(envelope.Graph), "examples/quickstart-create.json wraps examples/quickstart.json")

	res := h.do(http.MethodPost, "/v1/workflows", h.token, createBody)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.JSONEq(t, `{"key":"quickstart","draftRevision":1}`, string(res.Body))
	require.Equal(t, "/v1/workflows/quickstart", res.Header.Get("Location"))

	res = h.do(http.MethodGet, "/v1/workflows/quickstart", h.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	w := res.JSON(t)
	require.EqualValues(t, 1, w["draftRevision"])
	require.Nil(t, w["publishedRevision"])
	require.Nil(t, w["published"])
	require.Equal(t, "alice", w["createdBy"])
	draft := w["draft"].(map[string]any)
	gotGraph, _ := json.Marshal(draft["graph"])
	require.JSONEq(t, string(g), string(gotGraph))
	require.Equal(t, "alice", draft["savedBy"])

	// Dry-run with no body judges the latest draft and stores nothing.
	res = h.do(http.MethodPost, "/v1/workflows/quickstart/dry-run", h.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	dr := res.JSON(t)
	require.Equal(t, true, dr["valid"], "%s", res.Body)
	require.Equal(t, []any{}, dr["issues"])
	require.Equal(t, []any{"in", "check", "save", "out"}, dr["order"])
	require.Equal(t, map[string]any{
		"actions": []any{map[string]any{"id": "workspace.notes.write", "version": float64(1)}},
		"agents":  []any{},
	}, dr["references"])
	require.Equal(t, []any{"notes.write"}, dr["permissions"])
	checksum, _ := dr["checksum"].(string)
	require.Len(t, checksum, 64)
	require.EqualValues(t, 1<<20, dr["limits"].(map[string]any)["maxDocumentBytes"])
	require.EqualValues(t, 1, dr["draftRevision"])
	var compiledRows int
	require.NoError(t, h.st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM compiled_revisions`).Scan(&compiledRows))
	require.Zero(t, compiledRows, "dry-run creates nothing")

	// The explicit form is the same.
	res2 := h.do(http.MethodPost, "/v1/workflows/quickstart/dry-run", h.token, `{"draftRevision": 1}`)
	require.Equal(t, http.StatusOK, res2.Status, "%s", res2.Body)
	require.JSONEq(t, string(res.Body), string(res2.Body))

	res = h.do(http.MethodPost, "/v1/workflows/quickstart/publish", h.token, `{"expectedRevision": 1}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.JSONEq(t, fmt.Sprintf(`{"key":"quickstart","revision":1,"checksum":%q,"draftRevision":1,"warnings":[]}`, checksum), string(res.Body))

	res = h.do(http.MethodGet, "/v1/workflows/quickstart/revisions/1", h.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	rev := res.JSON(t)
	require.Equal(t, checksum, rev["checksum"])
	require.EqualValues(t, 1, rev["revision"])
	require.EqualValues(t, 1, rev["draftRevision"])
	require.Equal(t, "alice", rev["publishedBy"])
	require.NotEmpty(t, rev["publishedAt"])
	require.Equal(t, []any{"in", "check", "save", "out"}, rev["order"])
	require.Equal(t, []any{"notes.write"}, rev["permissions"])
	nodes := rev["graph"].(map[string]any)["nodes"].([]any)
	require.Len(t, nodes, 4)
	require.Equal(t, "input.id != ''", nodes[1].(map[string]any)["expression"])
	deps := rev["dependencies"].(map[string]any)
	actions := deps["actions"].([]any)
	require.Len(t, actions, 1)
	pinned := actions[0].(map[string]any)
	require.Equal(t, "workspace.notes.write", pinned["id"])
	require.EqualValues(t, 1, pinned["version"])
	require.Equal(t, "workspace-write", pinned["risk"])
	require.Len(t, pinned["hash"], 64)
	require.Equal(t, []any{}, deps["agents"])

	res = h.do(http.MethodGet, "/v1/workflows/quickstart", h.token, nil)
	w = res.JSON(t)
	require.EqualValues(t, 1, w["publishedRevision"])
	require.Equal(t, checksum, w["checksum"])
	pub := w["published"].(map[string]any)
	require.EqualValues(t, 1, pub["revision"])
	require.Equal(t, checksum, pub["checksum"])

	res = h.do(http.MethodGet, "/v1/workflows", h.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	l := res.JSON(t)
	require.Nil(t, l["nextCursor"])
	items := l["workflows"].([]any)
	require.Len(t, items, 1)
	require.Equal(t, "quickstart", items[0].(map[string]any)["key"])
	require.Equal(t, checksum, items[0].(map[string]any)["checksum"])
}

// invalidGraph has one problem of many kinds; a draft may hold them all.
const invalidGraph = `{
  "schemaVersion": 1,
  "nodes": [
    { "id": "in", "kind": "input", "outputs": { "out": "any" } },
    { "id": "check", "kind": "gate", "inputs": { "in": "any" }, "outputs": { "pass": "any", "fail": "any" },
      "language": "cel/v1", "expression": "input.id !=" },
    { "id": "fetch", "kind": "action", "inputs": { "in": "any" }, "outputs": { "out": "any" },
      "action": { "id": "core.http.fetch", "version": 1 } },
    { "id": "gone", "kind": "action", "inputs": { "in": "any" }, "outputs": { "out": "any" },
      "action": { "id": "core.echo", "version": 7 } },
    { "id": "out", "kind": "output", "inputs": { "in": "any" } }
  ],
  "edges": [
    { "from": "in.out", "to": "check.in" },
    { "from": "check.pass", "to": "fetch.in" },
    { "from": "check.fail", "to": "gone.in" },
    { "from": "fetch.out", "to": "out.in" },
    { "from": "gone.out", "to": "nowhere.in" }
  ]
}`

func TestPublishInvalidDraftIsRefusedWithEveryIssue(t *testing.T) {
	t.Parallel()
	h := newWFHarness(t)
	h.create("broken", json.RawMessage(invalidGraph))

	res := h.do(http.MethodPost, "/v1/workflows/broken/dry-run", h.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	dr := res.JSON(t)
	require.Equal(t, false, dr["valid"])
	require.Equal(t, "", dr["checksum"])
	issues := dr["issues"].([]any)

	res = h.do(http.MethodPost, "/v1/workflows/broken/publish", h.token, `{"expectedRevision": 1}`)
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	require.Equal(t, "INVALID_GRAPH", res.Code(t))
	details := res.JSON(t)["error"].(map[string]any)["details"].(map[string]any)
	require.Equal(t, issues, details["issues"], "publish lists exactly the issues dry-run lists")

	codes := map[string]bool{}
	for _, is := range issues {
		m := is.(map[string]any)
		codes[m["code"].(string)] = true
		require.NotEmpty(t, m["message"])
		require.True(t, strings.HasPrefix(m["path"].(string), "/"), "issue path is a JSON pointer: %v", m)
	}
	for _, want := range []string{"INVALID_EXPRESSION", "UNSUPPORTED_ACTION_RISK", "MISSING_DEPENDENCY", "DANGLING_EDGE"} {
		require.True(t, codes[want], "missing %s in %v", want, issues)
	}

	res = h.do(http.MethodGet, "/v1/workflows/broken/revisions/1", h.token, nil)
	require.Equal(t, http.StatusNotFound, res.Status)
	var n int
	require.NoError(t, h.st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM compiled_revisions`).Scan(&n))
	require.Zero(t, n)
}

func TestPublishAfterEditMakesNewRevisionAndKeepsTheOld(t *testing.T) {
	t.Parallel()
	h := newWFHarness(t)
	h.create("orders", quickstart(t))
	res := h.do(http.MethodPost, "/v1/workflows/orders/publish", h.token, `{"expectedRevision": 1}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	first := res.JSON(t)

	before := h.do(http.MethodGet, "/v1/workflows/orders/revisions/1", h.token, nil)
	require.Equal(t, http.StatusOK, before.Status)

	res = h.do(http.MethodPut, "/v1/workflows/orders/draft", h.token,
		map[string]any{"expectedRevision": 1, "graph": withExpression(t, "size(input.id) > 0")})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.JSONEq(t, `{"key":"orders","draftRevision":2}`, string(res.Body))

	// Publishing the old draft is stale.
	res = h.do(http.MethodPost, "/v1/workflows/orders/publish", h.token, `{"expectedRevision": 1}`)
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	require.Equal(t, "REVISION_CONFLICT", res.Code(t))
	require.Equal(t, map[string]any{"expectedRevision": float64(1), "currentRevision": float64(2)},
		res.JSON(t)["error"].(map[string]any)["details"])

	res = h.do(http.MethodPost, "/v1/workflows/orders/publish", h.token, `{"expectedRevision": 2}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	second := res.JSON(t)
	require.EqualValues(t, 2, second["revision"])
	require.NotEqual(t, first["checksum"], second["checksum"])

	after := h.do(http.MethodGet, "/v1/workflows/orders/revisions/1", h.token, nil)
	require.Equal(t, string(before.Body), string(after.Body), "revision 1 is untouched byte for byte")
	expression := func(res wfResponse) any {
		return res.JSON(t)["graph"].(map[string]any)["nodes"].([]any)[1].(map[string]any)["expression"]
	}
	r2 := h.do(http.MethodGet, "/v1/workflows/orders/revisions/2", h.token, nil)
	require.Equal(t, http.StatusOK, r2.Status)
	require.Equal(t, "size(input.id) > 0", expression(r2))
	require.Equal(t, "input.id != ''", expression(after))

	// The database refuses to rewrite history, whoever asks.
	_, err := h.st.Pool.Exec(context.Background(), `UPDATE workflow_revisions SET checksum = $1 WHERE revision = 1`, second["checksum"])
	require.ErrorContains(t, err, "immutable")
	again := h.do(http.MethodGet, "/v1/workflows/orders/revisions/1", h.token, nil)
	require.Equal(t, string(before.Body), string(again.Body))
}

func TestPublishSameContentDoesNotDuplicate(t *testing.T) {
	t.Parallel()
	h := newWFHarness(t)
	h.create("dup", quickstart(t))
	res := h.do(http.MethodPost, "/v1/workflows/dup/publish", h.token, `{"expectedRevision": 1}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	first := string(res.Body)

	// A retry answers 200 with the same revision.
	res = h.do(http.MethodPost, "/v1/workflows/dup/publish", h.token, `{"expectedRevision": 1}`)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.JSONEq(t, first, string(res.Body))

	// The same content saved again, with nodes, edges and keys in another
	// order, has the same checksum: still revision 1 (made from draft 1).
	var doc map[string]any
	require.NoError(t, json.Unmarshal(quickstart(t), &doc))
	nodes := doc["nodes"].([]any)
	for i, j := 0, len(nodes)-1; i < j; i, j = i+1, j-1 {
		nodes[i], nodes[j] = nodes[j], nodes[i]
	}
	edges := doc["edges"].([]any)
	edges[0], edges[2] = edges[2], edges[0]
	res = h.do(http.MethodPut, "/v1/workflows/dup/draft", h.token, map[string]any{"expectedRevision": 1, "graph": doc})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = h.do(http.MethodPost, "/v1/workflows/dup/publish", h.token, `{"expectedRevision": 2}`)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.JSONEq(t, first, string(res.Body))

	var n int
	require.NoError(t, h.st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM workflow_revisions`).Scan(&n))
	require.Equal(t, 1, n)
	require.NoError(t, h.st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM compiled_revisions`).Scan(&n))
	require.Equal(t, 1, n)
}

func TestConcurrentDraftSavesNeverLoseOrDuplicate(t *testing.T) {
	t.Parallel()
	h := newWFHarness(t)
	h.create("race", quickstart(t))

	const writers = 50
	statuses := make([]int, writers)
	codes := make([]string, writers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range writers {
		wg.Go(func() {
			<-start
			body, _ := json.Marshal(map[string]any{"expectedRevision": 1,
				"graph": withExpression(t, fmt.Sprintf("input.id != 'writer-%d'", i))})
			req := httptest.NewRequest(http.MethodPut, "/v1/workflows/race/draft", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+h.token)
			rec := httptest.NewRecorder()
			h.e.ServeHTTP(rec, req)
			statuses[i] = rec.Code
			var e struct {
				Error struct{ Code string } `json:"error"`
			}
			_ = json.Unmarshal(rec.Body.Bytes(), &e)
			codes[i] = e.Error.Code
		})
	}
	close(start)
	wg.Wait()

	ok, conflicts := 0, 0
	for i, s := range statuses {
		switch {
		case s == http.StatusOK:
			ok++
		case s == http.StatusConflict && codes[i] == "REVISION_CONFLICT":
			conflicts++
		default:
			t.Errorf("writer %d: status %d code %q", i, s, codes[i])
		}
	}
	require.Equal(t, 1, ok)
	require.Equal(t, writers-1, conflicts)

	rows, err := h.st.Pool.Query(context.Background(),
		`SELECT revision FROM workflow_drafts WHERE tenant_id = 't1' AND key = 'race' ORDER BY revision`)
	require.NoError(t, err)
	var revs []int
	for rows.Next() {
		var r int
		require.NoError(t, rows.Scan(&r))
		revs = append(revs, r)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []int{1, 2}, revs)
}

func TestWorkflowBadInputsAreStable4xx(t *testing.T) {
	t.Parallel()
	h := newWFHarness(t)
	h.create("exists", quickstart(t))

	g := string(quickstart(t))
	huge := `{"key":"huge","graph":{"schemaVersion":1,"nodes":[],"edges":[],"schemas":{"Big":{"description":"` +
		strings.Repeat("x", 2<<20) + `"}}}}`
	// Under the body limit but over the 1 MiB graph limit.
	overGraph := `{"key":"big","graph":{"schemaVersion":1,"nodes":[],"edges":[],"schemas":{"Big":{"description":"` +
		strings.Repeat("x", 1<<20) + `"}}}}`
	withGraph := func(format string, graph string) string { return fmt.Sprintf(format, graph) }

	type tc struct {
		name, method, path, contentType, body string
		status                                int
		code                                  string
	}
	cases := []tc{
		// POST /v1/workflows
		{"malformed JSON", "POST", "/v1/workflows", "", `{"key":"a","graph":{`, 400, "INVALID_JSON"},
		{"trailing garbage", "POST", "/v1/workflows", "", `{"key":"a","graph":{}} x`, 400, "INVALID_JSON"},
		{"missing body", "POST", "/v1/workflows", "", ``, 400, "INVALID_REQUEST"},
		{"body not an object", "POST", "/v1/workflows", "", `[1]`, 400, "INVALID_REQUEST"},
		{"body a string", "POST", "/v1/workflows", "", `"x"`, 400, "INVALID_REQUEST"},
		{"unknown envelope field", "POST", "/v1/workflows", "", withGraph(`{"key":"a","graph":%s,"extra":1}`, g), 400, "INVALID_REQUEST"},
		{"case-folded envelope field", "POST", "/v1/workflows", "", withGraph(`{"Key":"a","graph":%s}`, g), 400, "INVALID_REQUEST"},
		{"repeated envelope field", "POST", "/v1/workflows", "", withGraph(`{"key":"a","key":"b","graph":%s}`, g), 400, "INVALID_REQUEST"},
		{"key not a string", "POST", "/v1/workflows", "", withGraph(`{"key":7,"graph":%s}`, g), 400, "INVALID_REQUEST"},
		{"missing key", "POST", "/v1/workflows", "", withGraph(`{"graph":%s}`, g), 400, "INVALID_REQUEST"},
		{"missing graph", "POST", "/v1/workflows", "", `{"key":"a"}`, 400, "INVALID_REQUEST"},
		{"null graph", "POST", "/v1/workflows", "", `{"key":"a","graph":null}`, 400, "INVALID_REQUEST"},
		{"graph a string", "POST", "/v1/workflows", "", `{"key":"a","graph":"nodes"}`, 400, "INVALID_DOCUMENT"},
		{"graph wrong field type", "POST", "/v1/workflows", "", `{"key":"a","graph":{"schemaVersion":"1","nodes":[],"edges":[]}}`, 400, "INVALID_DOCUMENT"},
		{"graph nodes not a list", "POST", "/v1/workflows", "", `{"key":"a","graph":{"schemaVersion":1,"nodes":{},"edges":[]}}`, 400, "INVALID_DOCUMENT"},
		{"graph unknown field", "POST", "/v1/workflows", "", `{"key":"a","graph":{"schemaVersion":1,"nodes":[],"edges":[],"shell":"rm"}}`, 400, "INVALID_DOCUMENT"},
		{"graph unknown node field", "POST", "/v1/workflows", "", `{"key":"a","graph":{"schemaVersion":1,"nodes":[{"id":"a","kind":"input","code":"x"}],"edges":[]}}`, 400, "INVALID_DOCUMENT"},
		{"graph repeated key", "POST", "/v1/workflows", "", `{"key":"a","graph":{"schemaVersion":1,"nodes":[],"nodes":[],"edges":[]}}`, 400, "INVALID_DOCUMENT"},
		{"graph schemaVersion 2", "POST", "/v1/workflows", "", `{"key":"a","graph":{"schemaVersion":2,"nodes":[],"edges":[]}}`, 400, "INVALID_DOCUMENT"},
		{"graph fractional timeout", "POST", "/v1/workflows", "", `{"key":"a","graph":{"schemaVersion":1,"nodes":[{"id":"a","kind":"action","timeoutMs":1.5}],"edges":[]}}`, 400, "INVALID_DOCUMENT"},
		{"graph NUL character", "POST", "/v1/workflows", "", `{"key":"a","graph":{"schemaVersion":1,"nodes":[],"edges":[],"schemas":{"A":{"description":"\u0000"}}}}`, 400, "INVALID_DOCUMENT"},
		{"graph lone surrogate", "POST", "/v1/workflows", "", `{"key":"a","graph":{"schemaVersion":1,"nodes":[],"edges":[],"schemas":{"A":{"description":"\udc00"}}}}`, 400, "INVALID_JSON"},
		{"graph number beyond range", "POST", "/v1/workflows", "", `{"key":"a","graph":{"schemaVersion":1,"nodes":[],"edges":[],"schemas":{"A":{"maximum":1e999999}}}}`, 400, "INVALID_DOCUMENT"},
		{"huge document", "POST", "/v1/workflows", "", huge, 413, "DOCUMENT_TOO_LARGE"},
		{"graph over 1 MiB", "POST", "/v1/workflows", "", overGraph, 413, "DOCUMENT_TOO_LARGE"},
		{"form encoded", "POST", "/v1/workflows", "application/x-www-form-urlencoded", withGraph(`{"key":"a","graph":%s}`, g), 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"yaml malformed", "POST", "/v1/workflows?key=a", "application/yaml", "schemaVersion: [\n", 400, "INVALID_YAML"},
		{"yaml on publish", "POST", "/v1/workflows/exists/publish", "application/yaml", "expectedRevision: 1\n", 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"existing key", "POST", "/v1/workflows", "", withGraph(`{"key":"exists","graph":%s}`, g), 409, "ALREADY_EXISTS"},
		{"empty key", "POST", "/v1/workflows", "", withGraph(`{"key":"","graph":%s}`, g), 400, "INVALID_KEY"},
		{"uppercase key", "POST", "/v1/workflows", "", withGraph(`{"key":"Orders","graph":%s}`, g), 400, "INVALID_KEY"},
		{"digit-first key", "POST", "/v1/workflows", "", withGraph(`{"key":"1orders","graph":%s}`, g), 400, "INVALID_KEY"},
		{"dash-first key", "POST", "/v1/workflows", "", withGraph(`{"key":"-orders","graph":%s}`, g), 400, "INVALID_KEY"},
		{"underscore key", "POST", "/v1/workflows", "", withGraph(`{"key":"my_orders","graph":%s}`, g), 400, "INVALID_KEY"},
		{"space key", "POST", "/v1/workflows", "", withGraph(`{"key":"my orders","graph":%s}`, g), 400, "INVALID_KEY"},
		{"non-ASCII key", "POST", "/v1/workflows", "", withGraph(`{"key":"ordérs","graph":%s}`, g), 400, "INVALID_KEY"},
		{"64-char key", "POST", "/v1/workflows", "", withGraph(`{"key":"a`+strings.Repeat("b", 63)+`","graph":%s}`, g), 400, "INVALID_KEY"},
		{"newline key", "POST", "/v1/workflows", "", withGraph(`{"key":"orders\n","graph":%s}`, g), 400, "INVALID_KEY"},

		// PUT /v1/workflows/{key}/draft
		{"draft malformed JSON", "PUT", "/v1/workflows/exists/draft", "", `{"expectedRevision":1,`, 400, "INVALID_JSON"},
		{"draft missing body", "PUT", "/v1/workflows/exists/draft", "", ``, 400, "INVALID_REQUEST"},
		{"draft expectedRevision string", "PUT", "/v1/workflows/exists/draft", "", withGraph(`{"expectedRevision":"1","graph":%s}`, g), 400, "INVALID_REQUEST"},
		{"draft expectedRevision fraction", "PUT", "/v1/workflows/exists/draft", "", withGraph(`{"expectedRevision":1.5,"graph":%s}`, g), 400, "INVALID_REQUEST"},
		{"draft expectedRevision exponent", "PUT", "/v1/workflows/exists/draft", "", withGraph(`{"expectedRevision":1e0,"graph":%s}`, g), 400, "INVALID_REQUEST"},
		{"draft expectedRevision bool", "PUT", "/v1/workflows/exists/draft", "", withGraph(`{"expectedRevision":true,"graph":%s}`, g), 400, "INVALID_REQUEST"},
		{"draft expectedRevision huge", "PUT", "/v1/workflows/exists/draft", "", withGraph(`{"expectedRevision":99999999999999999999999,"graph":%s}`, g), 400, "INVALID_REQUEST"},
		{"draft expectedRevision zero", "PUT", "/v1/workflows/exists/draft", "", withGraph(`{"expectedRevision":0,"graph":%s}`, g), 400, "INVALID_REQUEST"},
		{"draft expectedRevision negative", "PUT", "/v1/workflows/exists/draft", "", withGraph(`{"expectedRevision":-1,"graph":%s}`, g), 400, "INVALID_REQUEST"},
		{"draft missing expectedRevision", "PUT", "/v1/workflows/exists/draft", "", withGraph(`{"graph":%s}`, g), 400, "INVALID_REQUEST"},
		{"draft unknown field", "PUT", "/v1/workflows/exists/draft", "", withGraph(`{"expectedRevision":1,"graph":%s,"force":true}`, g), 400, "INVALID_REQUEST"},
		{"draft stale revision", "PUT", "/v1/workflows/exists/draft", "", withGraph(`{"expectedRevision":5,"graph":%s}`, g), 409, "REVISION_CONFLICT"},
		{"draft graph wrong type", "PUT", "/v1/workflows/exists/draft", "", `{"expectedRevision":1,"graph":{"schemaVersion":1,"nodes":[{"id":1}],"edges":[]}}`, 400, "INVALID_DOCUMENT"},
		{"draft huge document", "PUT", "/v1/workflows/exists/draft", "", huge, 413, "DOCUMENT_TOO_LARGE"},
		{"draft missing workflow", "PUT", "/v1/workflows/nope/draft", "", withGraph(`{"expectedRevision":1,"graph":%s}`, g), 404, "NOT_FOUND"},
		{"draft invalid key", "PUT", "/v1/workflows/No_Way/draft", "", withGraph(`{"expectedRevision":1,"graph":%s}`, g), 400, "INVALID_KEY"},

		// dry-run, publish, revisions, list
		{"dry-run malformed JSON", "POST", "/v1/workflows/exists/dry-run", "", `{`, 400, "INVALID_JSON"},
		{"dry-run draftRevision string", "POST", "/v1/workflows/exists/dry-run", "", `{"draftRevision":"1"}`, 400, "INVALID_REQUEST"},
		{"dry-run unknown field", "POST", "/v1/workflows/exists/dry-run", "", `{"revision":1}`, 400, "INVALID_REQUEST"},
		{"dry-run missing draft", "POST", "/v1/workflows/exists/dry-run", "", `{"draftRevision":9}`, 404, "NOT_FOUND"},
		{"dry-run missing workflow", "POST", "/v1/workflows/nope/dry-run", "", ``, 404, "NOT_FOUND"},
		{"dry-run invalid key", "POST", "/v1/workflows/NOPE/dry-run", "", ``, 400, "INVALID_KEY"},
		{"dry-run huge body", "POST", "/v1/workflows/exists/dry-run", "", huge, 413, "DOCUMENT_TOO_LARGE"},
		{"publish missing body", "POST", "/v1/workflows/exists/publish", "", ``, 400, "INVALID_REQUEST"},
		{"publish empty object", "POST", "/v1/workflows/exists/publish", "", `{}`, 400, "INVALID_REQUEST"},
		{"publish expectedRevision string", "POST", "/v1/workflows/exists/publish", "", `{"expectedRevision":"1"}`, 400, "INVALID_REQUEST"},
		{"publish malformed", "POST", "/v1/workflows/exists/publish", "", `{"expectedRevision":}`, 400, "INVALID_JSON"},
		{"publish stale", "POST", "/v1/workflows/exists/publish", "", `{"expectedRevision":3}`, 409, "REVISION_CONFLICT"},
		{"publish missing workflow", "POST", "/v1/workflows/nope/publish", "", `{"expectedRevision":1}`, 404, "NOT_FOUND"},
		{"revision not a number", "GET", "/v1/workflows/exists/revisions/abc", "", ``, 400, "INVALID_REQUEST"},
		{"revision zero", "GET", "/v1/workflows/exists/revisions/0", "", ``, 400, "INVALID_REQUEST"},
		{"revision overflow", "GET", "/v1/workflows/exists/revisions/99999999999999999999", "", ``, 400, "INVALID_REQUEST"},
		{"revision missing", "GET", "/v1/workflows/exists/revisions/7", "", ``, 404, "NOT_FOUND"},
		{"get missing workflow", "GET", "/v1/workflows/nope", "", ``, 404, "NOT_FOUND"},
		{"get invalid key", "GET", "/v1/workflows/a%20b", "", ``, 400, "INVALID_KEY"},
		{"list limit zero", "GET", "/v1/workflows?limit=0", "", ``, 400, "INVALID_REQUEST"},
		{"list limit text", "GET", "/v1/workflows?limit=ten", "", ``, 400, "INVALID_REQUEST"},
		{"list limit too big", "GET", "/v1/workflows?limit=100000", "", ``, 400, "INVALID_REQUEST"},
		{"list garbage cursor", "GET", "/v1/workflows?cursor=not-a-cursor", "", ``, 400, "CURSOR_INVALID"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body io.Reader
			if c.body != "" {
				body = strings.NewReader(c.body)
			}
			req := httptest.NewRequest(c.method, c.path, body)
			ct := c.contentType
			if ct == "" && c.body != "" {
				ct = "application/json"
			}
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			req.Header.Set("Authorization", "Bearer "+h.token)
			res := h.serve(req)
			require.Equal(t, c.status, res.Status, "body: %.300s", res.Body)
			require.Equal(t, c.code, res.Code(t), "body: %.300s", res.Body)
		})
	}

	// A body whose size is unknown up front (chunked) is bounded too.
	req := httptest.NewRequest(http.MethodPost, "/v1/workflows", io.MultiReader(strings.NewReader(huge)))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+h.token)
	res := h.serve(req)
	require.Equal(t, http.StatusRequestEntityTooLarge, res.Status)
	require.Equal(t, "DOCUMENT_TOO_LARGE", res.Code(t))

	// None of it changed the workflow that exists.
	res = h.do(http.MethodGet, "/v1/workflows/exists", h.token, nil)
	require.EqualValues(t, 1, res.JSON(t)["draftRevision"])
	res = h.do(http.MethodGet, "/v1/workflows", h.token, nil)
	require.Len(t, res.JSON(t)["workflows"], 1)
}

func TestWorkflowRoutesAuth(t *testing.T) {
	t.Parallel()
	h := newWFHarness(t)
	h.create("mine", quickstart(t))
	res := h.do(http.MethodPost, "/v1/workflows/mine/publish", h.token, `{"expectedRevision": 1}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)

	createBody := map[string]any{"key": "other", "graph": quickstart(t)}
	draftBody := map[string]any{"expectedRevision": 1, "graph": quickstart(t)}
	routes := []struct {
		method, path string
		body         any
		scope        string
	}{
		{"POST", "/v1/workflows", createBody, auth.ScopeWorkflowsWrite},
		{"GET", "/v1/workflows", nil, auth.ScopeWorkflowsRead},
		{"GET", "/v1/workflows/mine", nil, auth.ScopeWorkflowsRead},
		{"PUT", "/v1/workflows/mine/draft", draftBody, auth.ScopeWorkflowsWrite},
		{"POST", "/v1/workflows/mine/dry-run", nil, auth.ScopeWorkflowsRead},
		{"POST", "/v1/workflows/mine/publish", `{"expectedRevision": 1}`, auth.ScopeWorkflowsPublish},
		{"GET", "/v1/workflows/mine/revisions/1", nil, auth.ScopeWorkflowsRead},
	}
	everyScopeBut := func(scope string) []string {
		var out []string
		for _, s := range auth.AllScopes {
			if s != scope {
				out = append(out, s)
			}
		}
		return out
	}
	for _, r := range routes {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			res := h.do(r.method, r.path, "", r.body)
			require.Equal(t, http.StatusUnauthorized, res.Status, "%s", res.Body)
			require.Equal(t, "UNAUTHENTICATED", res.Code(t))

			res = h.do(r.method, r.path, "not-a-jwt", r.body)
			require.Equal(t, http.StatusUnauthorized, res.Status)
			require.Equal(t, auth.TokenMalformed, res.Code(t))

			other, err := auth.NewKeys("another-secret-entirely-0123456789")
			require.NoError(t, err)
			forged, err := other.Mint(auth.Principal{Tenant: "t1", Sub: "alice", Scopes: auth.AllScopes}, time.Hour)
			require.NoError(t, err)
			res = h.do(r.method, r.path, forged, r.body)
			require.Equal(t, http.StatusUnauthorized, res.Status)
			require.Equal(t, auth.TokenBadSignature, res.Code(t))

			res = h.do(r.method, r.path, h.mint("t1", "bob", everyScopeBut(r.scope)...), r.body)
			require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
			require.Equal(t, "MISSING_SCOPE", res.Code(t))
			require.Equal(t, map[string]any{"missing": []any{r.scope}}, res.JSON(t)["error"].(map[string]any)["details"])

			// Another tenant sees nothing of t1's workflow: 404, never 403.
			if strings.HasPrefix(r.path, "/v1/workflows/mine") {
				res = h.do(r.method, r.path, h.mint("t2", "eve", auth.AllScopes...), r.body)
				require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
				require.Equal(t, "NOT_FOUND", res.Code(t))
			}
		})
	}

	// Another tenant's list is its own, and t1's cursor is no use to it.
	eve := h.mint("t2", "eve", auth.AllScopes...)
	res = h.do(http.MethodGet, "/v1/workflows", eve, nil)
	require.Equal(t, http.StatusOK, res.Status)
	require.Equal(t, []any{}, res.JSON(t)["workflows"])

	h.create("mine2", quickstart(t))
	res = h.do(http.MethodGet, "/v1/workflows?limit=1", h.token, nil)
	cursor, _ := res.JSON(t)["nextCursor"].(string)
	require.NotEmpty(t, cursor)
	res = h.do(http.MethodGet, "/v1/workflows?limit=1&cursor="+cursor, eve, nil)
	require.Equal(t, http.StatusBadRequest, res.Status)
	require.Equal(t, "CURSOR_INVALID", res.Code(t))
}

func TestListWorkflowsPagesWithCursor(t *testing.T) {
	t.Parallel()
	h := newWFHarness(t)
	for _, k := range []string{"delta", "alpha", "echo", "charlie", "bravo"} {
		h.create(k, quickstart(t))
	}
	var keys []string
	path := "/v1/workflows?limit=2"
	for pages := 1; ; pages++ {
		require.LessOrEqual(t, pages, 3)
		res := h.do(http.MethodGet, path, h.token, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		body := res.JSON(t)
		for _, w := range body["workflows"].([]any) {
			keys = append(keys, w.(map[string]any)["key"].(string))
		}
		next, _ := body["nextCursor"].(string)
		if next == "" {
			require.Equal(t, 3, pages)
			break
		}
		path = "/v1/workflows?limit=2&cursor=" + next
	}
	require.Equal(t, []string{"alpha", "bravo", "charlie", "delta", "echo"}, keys)
}

// A cluster with lower limits than Temporal's defaults (config WEFT_HISTORY_*)
// refuses, at publication, a revision whose run could not fit them even with
// continue-as-new; dry-run reports the estimate against that budget.
func TestPublicationRefusesARevisionBeyondTheClusterHistoryBudget(t *testing.T) {
	t.Parallel()
	h := newWFHarness(t)
	budget := graph.HistoryBudget{MaxEvents: 40, SuggestContinueAsNewAt: 30, MaxPendingActivities: 1}
	h.e = inproc.API(t, api.Deps{Store: h.st, Keys: h.keys, Publication: inproc.Publication(t, h.st, &publication.Resolver{HistoryBudget: &budget}),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	h.create("quickstart", quickstart(t))

	res := h.do(http.MethodPost, "/v1/workflows/quickstart/dry-run", h.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var dry struct {
		Valid   bool
		Issues  []graph.Issue
		History graph.HistoryEstimate
	}
	require.NoError(t, json.Unmarshal(res.Body, &dry))
	require.False(t, dry.Valid)
	require.Equal(t, budget, dry.History.Budget)
	require.True(t, dry.History.ContinueAsNew)
	require.Len(t, dry.Issues, 2, "%s", res.Body)
	for _, is := range dry.Issues {
		require.Equal(t, graph.CodeHistoryLimitExceeded, is.Code)
		require.Equal(t, "/nodes", is.Path)
	}
	require.Contains(t, dry.Issues[0].Message, "Temporal allows 40")
	require.Contains(t, dry.Issues[1].Message, "Temporal allows 1")

	res = h.do(http.MethodPost, "/v1/workflows/quickstart/publish", h.token, map[string]any{"expectedRevision": 1})
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	require.Equal(t, "INVALID_GRAPH", res.Code(t))
	require.Contains(t, string(res.Body), graph.CodeHistoryLimitExceeded)

	// The same revision fits Temporal's defaults.
	h2 := newWFHarness(t)
	h2.create("quickstart", quickstart(t))
	res = h2.do(http.MethodPost, "/v1/workflows/quickstart/publish", h2.token, map[string]any{"expectedRevision": 1})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
}
