package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/starter"
)

// These tests drive the run routes without a worker: runs stay queued in
// Temporal, which is all enqueue, idempotency, refusals and isolation need.

// itemGraph is input → core.echo@1 → output; its input needs {"id": string}.
const itemGraph = testinfra.ItemGraph

// notesGraph writes one note from its input.
const notesGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "save", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"},
     "action": {"id": "workspace.notes.write", "version": 1},
     "mapping": {"title": {"pointer": "/in/title"}, "body": {"pointer": "/in"}}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "save.in"}, {"from": "save.out", "to": "out.in"}]
}`

func TestEnqueueAnswersAndRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish("items", itemGraph)

	res := e.enqueue("items", map[string]any{"id": "a"}, "k1")
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	body := res.JSON(t)
	require.Equal(t, "queued", body["status"])
	require.EqualValues(t, 1, body["revision"])
	require.NotEmpty(t, body["checksum"])
	runID := body["runId"].(string)

	// The same key and input again: the same run, 200.
	again := e.do(http.MethodPost, "/v1/workflows/items/runs", e.token, `{"idempotencyKey":"k1","input":{ "id" : "a" },"mode":"live"}`)
	require.Equal(t, http.StatusOK, again.Status, "%s", again.Body)
	require.Equal(t, runID, again.JSON(t)["runId"])

	cases := []struct {
		name   string
		path   string
		token  string
		body   string
		status int
		code   string
	}{
		{"other input", "/v1/workflows/items/runs", e.token, `{"idempotencyKey":"k1","input":{"id":"b"}}`, 409, "IDEMPOTENCY_CONFLICT"},
		{"other mode", "/v1/workflows/items/runs", e.token, `{"idempotencyKey":"k1","input":{"id":"a"},"mode":"simulation"}`, 409, "IDEMPOTENCY_CONFLICT"},
		{"no key", "/v1/workflows/items/runs", e.token, `{"input":{"id":"a"}}`, 400, "INVALID_REQUEST"},
		{"long key", "/v1/workflows/items/runs", e.token, `{"idempotencyKey":"` + strings.Repeat("x", 201) + `","input":{"id":"a"}}`, 400, "INVALID_REQUEST"},
		{"unknown field", "/v1/workflows/items/runs", e.token, `{"idempotencyKey":"k2","input":{"id":"a"},"tenantId":"evil"}`, 400, "INVALID_REQUEST"},
		{"wrong type", "/v1/workflows/items/runs", e.token, `{"idempotencyKey":"k2","input":{"id":"a"},"revision":"1"}`, 400, "INVALID_REQUEST"},
		{"malformed", "/v1/workflows/items/runs", e.token, `{"idempotencyKey":`, 400, "INVALID_JSON"},
		{"trailing data", "/v1/workflows/items/runs", e.token, `{"idempotencyKey":"k2","input":{"id":"a"}} {}`, 400, "INVALID_JSON"},
		{"invalid input", "/v1/workflows/items/runs", e.token, `{"idempotencyKey":"k2","input":{"id":""}}`, 422, "INVALID_INPUT"},
		{"live draft revision", "/v1/workflows/items/runs", e.token, `{"idempotencyKey":"k2","input":{"id":"a"},"draftRevision":1}`, 400, "INVALID_REQUEST"},
		{"unknown revision", "/v1/workflows/items/runs", e.token, `{"idempotencyKey":"k2","input":{"id":"a"},"revision":7}`, 404, "NOT_FOUND"},
		{"bad key", "/v1/workflows/Bad_Key/runs", e.token, `{"idempotencyKey":"k2","input":{"id":"a"}}`, 400, "INVALID_KEY"},
		{"unknown workflow", "/v1/workflows/nope/runs", e.token, `{"idempotencyKey":"k2","input":{"id":"a"}}`, 404, "NOT_FOUND"},
		{"no token", "/v1/workflows/items/runs", "", `{"idempotencyKey":"k2","input":{"id":"a"}}`, 401, "UNAUTHENTICATED"},
		{"missing scope", "/v1/workflows/items/runs", e.mint(e.tenant, "bob", auth.ScopeRunsRead), `{"idempotencyKey":"k2","input":{"id":"a"}}`, 403, "MISSING_SCOPE"},
		{"another tenant", "/v1/workflows/items/runs", e.mint(e.other, "eve", auth.AllScopes...), `{"idempotencyKey":"k2","input":{"id":"a"}}`, 404, "NOT_FOUND"},
	}
	for _, c := range cases {
		res := e.do(http.MethodPost, c.path, c.token, c.body)
		require.Equal(t, c.status, res.Status, "%s: %s", c.name, res.Body)
		require.Equal(t, c.code, res.Code(t), c.name)
		if c.code == "INVALID_INPUT" {
			details := res.JSON(t)["error"].(map[string]any)["details"].(map[string]any)
			require.NotEmpty(t, details["errors"], c.name)
		}
	}

	// Only JSON bodies are read.
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/workflows/items/runs", strings.NewReader(`idempotencyKey=k`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+e.token)
	form, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	form.Body.Close()
	require.Equal(t, http.StatusUnsupportedMediaType, form.StatusCode)

	// Never published: 422 NOT_PUBLISHED.
	res = e.do(http.MethodPost, "/v1/workflows", e.token, map[string]any{"key": "drafty", "graph": json.RawMessage(itemGraph)})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	res = e.enqueue("drafty", map[string]any{"id": "a"}, "k")
	require.Equal(t, http.StatusUnprocessableEntity, res.Status)
	require.Equal(t, "NOT_PUBLISHED", res.Code(t))

	var rows int
	require.NoError(t, e.st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM runs`).Scan(&rows))
	require.Equal(t, 1, rows, "refused enqueues must leave no run")
}

func TestEnqueueRefusesMissingNodePermissions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish("notes", notesGraph)
	limited := e.mint(e.tenant, "bob", auth.ScopeRunsExecute)
	res := e.do(http.MethodPost, "/v1/workflows/notes/runs", limited, `{"idempotencyKey":"k","input":{"title":"x"}}`)
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	require.Equal(t, "PERMISSION_DENIED", res.Code(t))
	details := res.JSON(t)["error"].(map[string]any)["details"].(map[string]any)
	require.Equal(t, []any{auth.ScopeNotesWrite}, details["missing"])
	require.Equal(t, []any{auth.ScopeNotesWrite}, details["nodes"].(map[string]any)["save"])
}

func TestConcurrentEnqueuesOverHTTPMakeOneRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish("items", itemGraph)
	const n = 100
	var wg sync.WaitGroup
	statuses := make([]int, n)
	ids := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := e.enqueue("items", map[string]any{"id": "same"}, "burst")
			statuses[i] = res.Status
			var b struct {
				RunID string `json:"runId"`
			}
			_ = json.Unmarshal(res.Body, &b)
			ids[i] = b.RunID
		}()
	}
	wg.Wait()
	accepted := 0
	for i := range n {
		require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, statuses[i])
		require.Equal(t, ids[0], ids[i])
		if statuses[i] == http.StatusAccepted {
			accepted++
		}
	}
	require.Equal(t, 1, accepted, "exactly one request creates the run")
	var rows int
	require.NoError(t, e.st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM runs`).Scan(&rows))
	require.Equal(t, 1, rows)
	// One Temporal workflow: the only execution of the id is the recorded one.
	wid := starter.WorkflowID(e.tenant, "items", "burst")
	run := e.getRun(ids[0])
	require.Equal(t, wid, run.Temporal.WorkflowID)
	desc, err := e.tc.DescribeWorkflow(context.Background(), wid, "")
	require.NoError(t, err)
	require.NotEmpty(t, desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId())
	require.Eventually(t, func() bool {
		c, err := e.tc.CountWorkflow(context.Background(), &workflowservice.CountWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowId = '%s'", wid)})
		return err == nil && c.GetCount() == 1
	}, 10*time.Second, 100*time.Millisecond)
}

func TestRepeatAfterNewerPublishReturnsTheBoundRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish("items", itemGraph)
	first := e.enqueue("items", map[string]any{"id": "a"}, "k")
	require.Equal(t, http.StatusAccepted, first.Status)
	require.Equal(t, 2, e.publish("items", strings.Replace(itemGraph, `"minLength": 1`, `"minLength": 1, "maxLength": 50`, 1)))

	again := e.enqueue("items", map[string]any{"id": "a"}, "k")
	require.Equal(t, http.StatusOK, again.Status, "%s", again.Body)
	require.Equal(t, first.JSON(t)["runId"], again.JSON(t)["runId"])
	require.EqualValues(t, 1, again.JSON(t)["revision"])
	require.Equal(t, first.JSON(t)["checksum"], again.JSON(t)["checksum"])

	other := e.enqueue("items", map[string]any{"id": "b"}, "k")
	require.Equal(t, http.StatusConflict, other.Status)
	require.Equal(t, "IDEMPOTENCY_CONFLICT", other.Code(t))

	fresh := e.enqueue("items", map[string]any{"id": "a"}, "k-new")
	require.Equal(t, http.StatusAccepted, fresh.Status)
	require.EqualValues(t, 2, fresh.JSON(t)["revision"])
}

// TestRepeatIsAnsweredBeforeTheNewerRevisionIsChecked: a repeated key is
// answered by its binding, even once a newer revision's schema refuses its
// input or its nodes need a scope the caller lacks.
func TestRepeatIsAnsweredBeforeTheNewerRevisionIsChecked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish("items", itemGraph)
	input := map[string]any{"id": "abcdef"}
	first := e.enqueue("items", input, "k")
	require.Equal(t, http.StatusAccepted, first.Status, "%s", first.Body)
	runID := first.JSON(t)["runId"]

	require.Equal(t, 2, e.publish("items", strings.Replace(itemGraph, `"minLength": 1`, `"minLength": 1, "maxLength": 3`, 1)))
	fresh := e.enqueue("items", input, "k-new")
	require.Equal(t, "INVALID_INPUT", fresh.Code(t), "r2 refuses the input")
	again := e.enqueue("items", input, "k")
	require.Equal(t, http.StatusOK, again.Status, "%s", again.Body)
	require.Equal(t, runID, again.JSON(t)["runId"])
	require.EqualValues(t, 1, again.JSON(t)["revision"])
	other := e.enqueue("items", map[string]any{"id": "abcdefg"}, "k")
	require.Equal(t, "IDEMPOTENCY_CONFLICT", other.Code(t), "other input under the key conflicts before validation")

	require.Equal(t, 3, e.publish("items", notesGraph))
	limited := e.mint(e.tenant, "alice", auth.ScopeRunsExecute)
	body := map[string]any{"input": input, "idempotencyKey": "k-perm"}
	denied := e.do(http.MethodPost, "/v1/workflows/items/runs", limited, body)
	require.Equal(t, "PERMISSION_DENIED", denied.Code(t), "r3 needs notes.write")
	body["idempotencyKey"] = "k"
	again = e.do(http.MethodPost, "/v1/workflows/items/runs", limited, body)
	require.Equal(t, http.StatusOK, again.Status, "%s", again.Body)
	require.Equal(t, runID, again.JSON(t)["runId"])
	require.EqualValues(t, 1, again.JSON(t)["revision"])
}

func TestRunReadsAreTenantIsolatedAndScoped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish("items", itemGraph)
	id := e.run("items", map[string]any{"id": "a"})

	v := e.getRun(id)
	require.Equal(t, "queued", v.Status)
	require.Equal(t, "items", v.WorkflowKey)
	require.Equal(t, "live", v.Mode)
	require.JSONEq(t, `{"id":"a"}`, string(v.Input))
	require.Equal(t, "api", v.Origin["kind"])
	require.True(t, strings.HasPrefix(v.Temporal.WorkflowID, "weft-"))
	require.Equal(t, "http://ui.test/namespaces/default/workflows/"+v.Temporal.WorkflowID, v.Temporal.UIURL)
	require.Empty(t, v.Temporal.RunID, "the interpreter records its run id with its first append; no worker polls here")
	require.Len(t, v.Nodes, 3)
	for _, n := range v.Nodes {
		require.Equal(t, execution.NodePending, n.Status)
	}

	eve := e.mint(e.other, "eve", auth.AllScopes...)
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/v1/runs/" + id},
		{http.MethodGet, "/v1/runs/" + id + "/events"},
		{http.MethodPost, "/v1/runs/" + id + "/cancel"},
		{http.MethodGet, "/v1/runs/no-such-run"},
	} {
		res := e.do(r.method, r.path, eve, nil)
		require.Equal(t, http.StatusNotFound, res.Status, "%s %s: %s", r.method, r.path, res.Body)
		require.Equal(t, "NOT_FOUND", res.Code(t))
	}
	res := e.do(http.MethodGet, "/v1/runs", eve, nil)
	require.Equal(t, http.StatusOK, res.Status)
	require.Empty(t, res.JSON(t)["runs"])

	noScope := e.mint(e.tenant, "bob", auth.ScopeRunsExecute)
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/v1/runs/" + id},
		{http.MethodGet, "/v1/runs"},
		{http.MethodGet, "/v1/runs/" + id + "/events"},
		{http.MethodPost, "/v1/runs/" + id + "/cancel"},
		{http.MethodGet, "/v1/notes"},
	} {
		res := e.do(r.method, r.path, noScope, nil)
		require.Equal(t, http.StatusForbidden, res.Status, "%s %s", r.method, r.path)
		require.Equal(t, "MISSING_SCOPE", res.Code(t))
		res = e.do(r.method, r.path, "", nil)
		require.Equal(t, http.StatusUnauthorized, res.Status, "%s %s", r.method, r.path)
	}
}

func TestListRunsFiltersAndPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish("items", itemGraph)
	e.publish("other", itemGraph)
	var ids []string
	for i := range 5 {
		ids = append(ids, e.run("items", map[string]any{"id": fmt.Sprint(i)}))
	}
	e.run("other", map[string]any{"id": "x"})

	var seen []string
	cursor := ""
	for page := 0; ; page++ {
		path := "/v1/runs?workflowKey=items&status=queued&limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		res := e.do(http.MethodGet, path, e.token, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		body := res.JSON(t)
		for _, r := range body["runs"].([]any) {
			run := r.(map[string]any)
			require.Equal(t, "items", run["workflowKey"])
			seen = append(seen, run["runId"].(string))
		}
		next, _ := body["nextCursor"].(string)
		if next == "" {
			break
		}
		// A cursor is bound to its filters.
		res = e.do(http.MethodGet, "/v1/runs?workflowKey=other&limit=2&cursor="+next, e.token, nil)
		require.Equal(t, http.StatusBadRequest, res.Status)
		require.Equal(t, "CURSOR_INVALID", res.Code(t))
		cursor = next
		require.Less(t, page, 5)
	}
	require.ElementsMatch(t, ids, seen)
	require.Equal(t, ids[4], seen[0], "newest first")

	res := e.do(http.MethodGet, "/v1/runs?status=bogus", e.token, nil)
	require.Equal(t, http.StatusBadRequest, res.Status)
	res = e.do(http.MethodGet, "/v1/runs?limit=0", e.token, nil)
	require.Equal(t, http.StatusBadRequest, res.Status)
	res = e.do(http.MethodGet, "/v1/runs?status=succeeded", e.token, nil)
	require.Equal(t, http.StatusOK, res.Status)
	require.Empty(t, res.JSON(t)["runs"])
}

func TestEventCursorIsBoundToTenantAndRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish("items", itemGraph)
	a := e.run("items", map[string]any{"id": "a"})
	b := e.run("items", map[string]any{"id": "b"})
	// No worker polls this queue, so these are the only events: appended
	// the way an interpreter flush appends them.
	for _, id := range []string{a, b} {
		var drafts []execution.EventDraft
		for i := range 5 {
			drafts = append(drafts, execution.EventDraft{Key: fmt.Sprintf("%s/test/%d", id, i), Type: "node.started",
				NodeID: "echo", Attempt: i + 1, At: time.Now(), Data: json.RawMessage(`{"kind":"action"}`)})
		}
		require.NoError(t, e.st.AppendEvents(context.Background(), e.tenant, id, drafts, nil))
	}

	page := func(id, cursor string) response {
		path := "/v1/runs/" + id + "/events?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		return e.do(http.MethodGet, path, e.token, nil)
	}
	var seqs []float64
	cursor := ""
	var cursorA string
	for {
		res := page(a, cursor)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		body := res.JSON(t)
		for _, ev := range body["events"].([]any) {
			m := ev.(map[string]any)
			seqs = append(seqs, m["seq"].(float64))
			for _, f := range []string{"type", "schemaVersion", "at", "nodeId", "attempt", "data", "prevHash", "hash"} {
				require.Contains(t, m, f)
			}
		}
		next, _ := body["nextCursor"].(string)
		if next == "" {
			break
		}
		cursor, cursorA = next, next
	}
	require.Equal(t, []float64{1, 2, 3, 4, 5}, seqs)

	// Run a's cursor on run b: refused.
	res := page(b, cursorA)
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Equal(t, "CURSOR_INVALID", res.Code(t))
	// A tampered cursor: refused.
	raw, err := base64.RawURLEncoding.DecodeString(cursorA)
	require.NoError(t, err)
	raw[0] ^= 0x01
	res = page(a, base64.RawURLEncoding.EncodeToString(raw))
	require.Equal(t, "CURSOR_INVALID", res.Code(t))
	res = page(a, "garbage")
	require.Equal(t, "CURSOR_INVALID", res.Code(t))
	// Another tenant's same-named run cannot exist, but its token on this run is 404 before any cursor check.
	res = e.do(http.MethodGet, "/v1/runs/"+a+"/events?cursor="+cursorA, e.mint(e.other, "eve", auth.AllScopes...), nil)
	require.Equal(t, http.StatusNotFound, res.Status)
	// A cursor minted for another tenant's listing of the same run id is refused.
	res = e.do(http.MethodGet, "/v1/runs?cursor="+cursorA, e.token, nil)
	require.Equal(t, "CURSOR_INVALID", res.Code(t))

	// Node states are projections of the log.
	v := e.getRun(a)
	status, attempt, _, _ := v.node(t, "echo")
	require.Equal(t, execution.NodeRunning, status)
	require.Equal(t, 5, attempt)
}
