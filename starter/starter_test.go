package starter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/publication"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/variables"
)

func TestMain(m *testing.M) { testinfra.Main(m) }

// bundle is what one test runs against: a fresh database, the shared dev
// server, and a starter on a task queue no worker polls, so started
// workflows stay open and can be inspected.
type bundle struct {
	st      *store.Store
	tc      client.Client
	starter *Starter
	queue   string
	// t1 and t2 are tenant ids unique to the test: workflow ids derive
	// from the tenant and every test shares one dev server.
	t1, t2 string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	_, tc := testinfra.SharedClient(t)
	st := testinfra.NewStore(t)
	queue := "starter-test-" + uuid.NewString()
	s, err := New(Deps{Store: st, Temporal: tc, TaskQueue: queue, UIURL: "http://ui.test/", Namespace: "default", Resolver: resolver(t, st),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	require.NoError(t, err)
	return &bundle{st: st, tc: tc, starter: s, queue: queue, t1: "t1-" + uuid.NewString(), t2: "t2-" + uuid.NewString()}
}

// resolver is the publication resolver the app wires over st.
func resolver(t *testing.T, st *store.Store) *publication.Resolver {
	t.Helper()
	vars, err := variables.Builtin(st)
	require.NoError(t, err)
	r, err := publication.NewResolver(st, vars)
	require.NoError(t, err)
	return r
}

// TestNewRequiresAResolver: the starter defaults no resolver; drafts must
// compile with the one publication uses.
func TestNewRequiresAResolver(t *testing.T) {
	_, tc := testinfra.SharedClient(t)
	_, err := New(Deps{Store: testinfra.NewStore(t), Temporal: tc, TaskQueue: "q"})
	require.Error(t, err, "New without a Resolver = %v", err)
	require.Contains(t, err.Error(), "Resolver is required", "New without a Resolver = %v", err)
}

const itemGraph = `{
  "schemaVersion": 1,
  "schemas": {"Item": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string", "minLength": 1}, "n": {"type": "integer"}}}},
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "Item"}},
    {"id": "echo", "kind": "action", "inputs": {"in": "Item"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "echo.in"}, {"from": "echo.out", "to": "out.in"}]
}`

// notesGraph writes a note, so its runs need notes.write.
const notesGraph = testinfra.NotesGraph

// publish stores doc as a draft of key (creating the workflow on first use)
// and publishes it, returning the revision number.
func publish(t *testing.T, st *store.Store, tenant, key, doc string) int {
	t.Helper()
	ctx := context.Background()
	d, err := graph.Decode([]byte(doc))
	require.NoError(t, err)
	c, issues := graph.Compile(d, graph.NewStaticCatalog(catalog.BuiltinContracts(), nil))
	require.Empty(t, issues, "compile: %v", issues)
	plan := c.Plan()
	draft := 1
	w, err := st.GetWorkflow(ctx, tenant, key)
	switch {
	case errors.Is(err, failure.ErrNotFound):
		_, err := st.CreateWorkflow(ctx, tenant, key, json.RawMessage(doc), "tester")
		require.NoError(t, err)
	case err != nil:
		require.NoError(t, err)
	default:
		draft, err = st.SaveDraft(ctx, tenant, key, w.LatestDraftRevision, json.RawMessage(doc), "tester")
		require.NoError(t, err)
	}
	rev, _, err := st.Publish(ctx, tenant, key, draft, c, &plan, "tester")
	require.NoError(t, err)
	return rev.Revision
}

func trusted(tenant string, perms ...string) Trusted {
	return Trusted{TenantID: tenant, TenantName: "Tenant " + tenant,
		Actor: execution.Actor{Kind: "user", Sub: "alice"}, Origin: execution.Origin{Kind: "api"}, Permissions: perms}
}

func wantCode(t *testing.T, err error, code string) *failure.Error {
	t.Helper()
	var fe *failure.Error
	require.ErrorAs(t, err, &fe, "want %s, got %v", code, err)
	require.Equal(t, code, fe.Code, "want %s, got %v", code, err)
	return fe
}

func countRuns(t *testing.T, st *store.Store) int {
	t.Helper()
	var n int
	require.NoError(t, st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM runs`).Scan(&n))
	return n
}

func TestEnqueueStartsWorkflowWithIdentityAndSearchAttributes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "items", itemGraph)

	acc, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "k1"}, trusted(b.t1))
	require.NoError(t, err)
	require.True(t, acc.Created, "accepted = %+v", acc)
	require.Equal(t, execution.StatusQueued, acc.Status, "accepted = %+v", acc)
	require.Equal(t, 1, acc.Revision, "accepted = %+v", acc)
	require.NotEmpty(t, acc.Checksum, "accepted = %+v", acc)
	run, err := b.st.GetRun(ctx, b.t1, acc.RunID)
	require.NoError(t, err)
	want := WorkflowID(b.t1, "items", "k1")
	require.Equal(t, want, run.WorkflowID, "workflow id %s, want %s", run.WorkflowID, want)
	// The interpreter records its Temporal run id with its first append;
	// the starter writes nothing after the start.
	desc, err := b.tc.DescribeWorkflow(ctx, run.WorkflowID, "")
	require.NoError(t, err)
	info := desc.RawResponse.GetWorkflowExecutionInfo()
	require.Equal(t, execution.WorkflowName, info.GetType().GetName(), "type %s queue %s", info.GetType().GetName(), info.GetTaskQueue())
	require.Equal(t, b.queue, info.GetTaskQueue(), "type %s queue %s", info.GetType().GetName(), info.GetTaskQueue())
	sa := info.GetSearchAttributes().GetIndexedFields()
	for name, want := range map[string]string{
		execution.SearchAttrTenant: `"` + b.t1 + `"`, execution.SearchAttrWorkflowKey: `"items"`,
		execution.SearchAttrMode: `"live"`, execution.SearchAttrRevision: `1`,
	} {
		got := string(sa[name].GetData())
		assert.Equal(t, want, got, "search attribute %s = %s, want %s", name, got, want)
	}
	got := b.starter.WorkflowURL(run.WorkflowID)
	require.Equal(t, "http://ui.test/namespaces/default/workflows/"+run.WorkflowID, got, "ui url %s", got)
	// The workflow input is the run row, with the trusted context.
	hist := b.tc.GetWorkflowHistory(ctx, run.WorkflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	ev, err := hist.Next()
	require.NoError(t, err)
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	var params execution.RunParams
	require.NoError(t, json.Unmarshal(attrs.GetInput().GetPayloads()[0].GetData(), &params))
	require.Equal(t, acc.RunID, params.RunID, "params = %+v", params)
	require.Equal(t, b.t1, params.TenantID, "params = %+v", params)
	require.Equal(t, "Tenant "+b.t1, params.TenantName, "params = %+v", params)
	require.Equal(t, acc.Checksum, params.Checksum, "params = %+v", params)
	require.Equal(t, execution.ModeLive, params.Mode, "params = %+v", params)
	require.Equal(t, `{"id":"a"}`, string(params.Input.Inline), "params = %+v", params)
	require.Equal(t, "alice", params.Actor.Sub, "params = %+v", params)
	require.Equal(t, "api", params.Origin.Kind, "params = %+v", params)
	summary := desc.RawResponse.GetExecutionConfig().GetUserMetadata().GetSummary()
	require.NotNil(t, summary, "static summary")
	require.Contains(t, string(summary.GetData()), "items r1 · live", "static summary = %v", summary)
}

func TestEnqueueIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "items", itemGraph)
	first, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a","n":2}`), IdempotencyKey: "k"}, trusted(b.t1))
	require.NoError(t, err)

	t.Run("same input in another key order and spacing is the same run", func(t *testing.T) {
		again, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(` { "n": 2.0, "id": "a" } `), IdempotencyKey: "k"}, trusted(b.t1))
		require.NoError(t, err)
		require.False(t, again.Created, "again = %+v, first = %+v", again, first)
		require.Equal(t, first.RunID, again.RunID, "again = %+v, first = %+v", again, first)
	})
	t.Run("other input conflicts", func(t *testing.T) {
		_, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"b"}`), IdempotencyKey: "k"}, trusted(b.t1))
		fe := wantCode(t, err, failure.CodeIdempotencyConflict)
		require.True(t, fe.Details["runId"] == first.RunID, "details = %v", fe.Details)
	})
	t.Run("a newer publish keeps the key bound to what it started", func(t *testing.T) {
		rev := publish(t, b.st, b.t1, "items", strings.Replace(itemGraph, `"minLength": 1`, `"minLength": 1, "maxLength": 9`, 1))
		require.Equal(t, 2, rev, "revision %d", rev)
		again, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a","n":2}`), IdempotencyKey: "k"}, trusted(b.t1))
		require.NoError(t, err)
		require.False(t, again.Created, "again = %+v", again)
		require.Equal(t, first.RunID, again.RunID, "again = %+v", again)
		require.Equal(t, 1, again.Revision, "again = %+v", again)
		require.Equal(t, first.Checksum, again.Checksum, "again = %+v", again)
		// Naming another revision explicitly is another request.
		two := 2
		_, err = b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a","n":2}`), IdempotencyKey: "k", Revision: &two}, trusted(b.t1))
		wantCode(t, err, failure.CodeIdempotencyConflict)
		fresh, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a","n":2}`), IdempotencyKey: "k2"}, trusted(b.t1))
		require.NoError(t, err, "fresh = %+v,", fresh)
		require.Equal(t, 2, fresh.Revision, "fresh = %+v, %v", fresh, err)
		require.True(t, fresh.Created, "fresh = %+v, %v", fresh, err)
	})
	t.Run("keys are scoped by tenant and workflow key", func(t *testing.T) {
		publish(t, b.st, b.t2, "items", itemGraph)
		other, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"zzz"}`), IdempotencyKey: "k"}, trusted(b.t2))
		require.NoError(t, err, "other = %+v,", other)
		require.True(t, other.Created, "other = %+v, %v", other, err)
		require.NotEqual(t, first.RunID, other.RunID, "other = %+v, %v", other, err)
	})
}

func TestConcurrentEnqueuesWithOneKeyMakeOneRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "items", itemGraph)
	const n = 100
	var wg sync.WaitGroup
	results := make([]Accepted, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"same"}`), IdempotencyKey: "race"}, trusted(b.t1))
		}()
	}
	wg.Wait()
	created := 0
	for i := range n {
		require.NoError(t, errs[i], "enqueue %d", i)
		require.Equal(t, results[0].RunID, results[i].RunID, "run ids differ: %s vs %s", results[i].RunID, results[0].RunID)
		if results[i].Created {
			created++
		}
	}
	require.Equal(t, 1, created, "%d enqueues reported created", created)
	got := countRuns(t, b.st)
	require.Equal(t, 1, got, "%d run rows", got)
	resp, err := b.tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = '%s'", WorkflowID(b.t1, "items", "race"))})
	require.NoError(t, err)
	// Visibility lags; one execution is the only possible answer once it shows.
	require.LessOrEqual(t, resp.GetCount(), int64(1), "%d workflow executions", resp.GetCount())
	desc, err := b.tc.DescribeWorkflow(ctx, WorkflowID(b.t1, "items", "race"), "")
	require.NoError(t, err)
	p := startedParams(t, b.tc, WorkflowID(b.t1, "items", "race"))
	require.Equal(t, results[0].RunID, p.RunID, "the workflow's only execution runs %s, want %s", p.RunID, results[0].RunID)
	require.NotEmpty(t, desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "the workflow's only execution runs %s, want %s", p.RunID, results[0].RunID)
}

func TestEnqueueRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "items", itemGraph)
	publish(t, b.st, b.t1, "notes", notesGraph)
	_, err := b.st.CreateWorkflow(ctx, b.t1, "draft-only", json.RawMessage(itemGraph), "tester")
	require.NoError(t, err)
	one, zero := 1, 0
	nine := 9
	cases := []struct {
		name string
		req  Request
		tc   Trusted
		code string
	}{
		{"missing idempotency key", Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`)}, trusted(b.t1), failure.CodeInvalidRequest},
		{"long idempotency key", Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: strings.Repeat("k", 201)}, trusted(b.t1), failure.CodeInvalidRequest},
		{"input against schema", Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":""}`), IdempotencyKey: "k"}, trusted(b.t1), failure.CodeInvalidInput},
		{"absent input", Request{WorkflowKey: "items", IdempotencyKey: "k"}, trusted(b.t1), failure.CodeInvalidInput},
		{"malformed input", Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":`), IdempotencyKey: "k"}, trusted(b.t1), failure.CodeInvalidRequest},
		{"unknown mode", Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "k", Mode: "fast"}, trusted(b.t1), failure.CodeInvalidRequest},
		{"live draft revision", Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "k", DraftRevision: &one}, trusted(b.t1), failure.CodeInvalidRequest},
		{"live fixtures", Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "k", Fixtures: json.RawMessage(`{"echo":{}}`)}, trusted(b.t1), failure.CodeInvalidRequest},
		{"revision zero", Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "k", Revision: &zero}, trusted(b.t1), failure.CodeInvalidRequest},
		{"revision that does not exist", Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "k", Revision: &nine}, trusted(b.t1), failure.CodeNotFound},
		{"never published", Request{WorkflowKey: "draft-only", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "k"}, trusted(b.t1), failure.CodeNotPublished},
		{"unknown workflow", Request{WorkflowKey: "nope", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "k"}, trusted(b.t1), failure.CodeNotFound},
		{"another tenant's workflow", Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "k"}, trusted(b.t2), failure.CodeNotFound},
		{"missing node permission", Request{WorkflowKey: "notes", Input: json.RawMessage(`{}`), IdempotencyKey: "k"}, trusted(b.t1, "runs.execute"), failure.CodePermissionDenied},
		{"untrusted context", Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "k"}, Trusted{TenantID: b.t1}, failure.CodeInternal},
	}
	for _, c := range cases {
		_, err := b.starter.Enqueue(ctx, c.req, c.tc)
		fe := wantCode(t, err, c.code)
		switch c.code {
		case failure.CodeInvalidInput:
			issues, _ := fe.Details["errors"].([]InputIssue)
			assert.False(t, len(issues) == 0 || fe.Details["node"] != "in", "%s: details = %#v", c.name, fe.Details)
		case failure.CodePermissionDenied:
			missing, _ := fe.Details["missing"].([]string)
			nodes, _ := fe.Details["nodes"].(map[string][]string)
			assert.False(t, len(missing) != 1 || missing[0] != "notes.write" || len(nodes["save"]) != 1, "%s: details = %#v", c.name, fe.Details)
		}
	}
	got := countRuns(t, b.st)
	require.Equal(t, 0, got, "a refused enqueue left %d run rows", got)
	// The same run with the permission is accepted.
	_, err = b.starter.Enqueue(ctx, Request{WorkflowKey: "notes", Input: json.RawMessage(`{}`), IdempotencyKey: "k"}, trusted(b.t1, "notes.write"))
	require.NoError(t, err)
}

func TestInvalidInputListsEveryError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	publish(t, b.st, b.t1, "items", itemGraph)
	_, err := b.starter.Enqueue(context.Background(), Request{WorkflowKey: "items", Input: json.RawMessage(`{"n":"x"}`), IdempotencyKey: "k"}, trusted(b.t1))
	fe := wantCode(t, err, failure.CodeInvalidInput)
	issues := fe.Details["errors"].([]InputIssue)
	var paths []string
	for _, is := range issues {
		paths = append(paths, is.Path+": "+is.Message)
	}
	joined := strings.Join(paths, "; ")
	require.Contains(t, joined, "/n: ", "issues = %s", joined)
	require.Contains(t, joined, "id", "issues = %s", joined)
}

func TestStartFailureLeavesRunQueuedForTheSweeper(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "items", itemGraph)
	srv, _ := testinfra.SharedTemporal()
	// A client on a namespace that does not exist fails every start at once,
	// like a Temporal outage would, without waiting for dial timeouts.
	broken, err := client.Dial(client.Options{HostPort: srv.HostPort, Namespace: "no-such-namespace"})
	require.NoError(t, err)
	defer broken.Close()
	down, err := New(Deps{Store: b.st, Temporal: broken, TaskQueue: b.queue, Resolver: b.starter.resolver,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	require.NoError(t, err)
	acc, err := down.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "k"}, trusted(b.t1))
	require.NoError(t, err, "a failed start must still answer")
	require.True(t, acc.Created, "accepted = %+v", acc)
	require.Equal(t, execution.StatusQueued, acc.Status, "accepted = %+v", acc)
	wid := WorkflowID(b.t1, "items", "k")
	_, err = b.tc.DescribeWorkflow(ctx, wid, "")
	require.Error(t, err, "workflow exists though the start failed")

	// Too young for the sweeper: it must not race the enqueue that is starting it.
	swept, err := b.starter.Sweep(ctx)
	require.NoError(t, err, "sweep of a young run")
	require.Equal(t, 0, swept, "sweep of a young run")
	_, err = b.st.Pool.Exec(ctx, `UPDATE runs SET created_at = now() - interval '31 seconds', admitted_at = now() - interval '31 seconds'`)
	require.NoError(t, err)
	n, err := b.starter.Sweep(ctx)
	require.NoError(t, err, "sweep: %d,", n)
	require.Equal(t, 1, n, "sweep: %d, %v", n, err)
	desc, err := b.tc.DescribeWorkflow(ctx, wid, "")
	require.NoError(t, err)
	// The sweeper's start passes what the enqueue would have: the tenant
	// name comes from the run row.
	p := startedParams(t, b.tc, wid)
	require.Equal(t, acc.RunID, p.RunID, "swept start params = %+v", p)
	require.Equal(t, "Tenant "+b.t1, p.TenantName, "swept start params = %+v", p)
	require.NotEmpty(t, desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "the sweeper started no execution")
	// Sweeping again re-issues an idempotent start: still one execution.
	n, err = b.starter.Sweep(ctx)
	require.NoError(t, err, "second sweep: %d,", n)
	require.Equal(t, 1, n, "second sweep: %d, %v", n, err)
	desc2, err := b.tc.DescribeWorkflow(ctx, wid, "")
	require.NoError(t, err)
	require.Equal(t, desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId(), desc2.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "a repeated start made a second execution")

	// RunSweeper stops with its context.
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { b.starter.RunSweeper(sctx, 10*time.Millisecond); close(done) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("RunSweeper did not stop")
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "items", itemGraph)
	acc, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "k"}, trusted(b.t1))
	require.NoError(t, err)
	by := execution.Actor{Kind: "user", Sub: "bob"}
	wantCode(t, b.starter.Cancel(ctx, b.t2, acc.RunID, by), failure.CodeNotFound)
	wantCode(t, b.starter.Cancel(ctx, b.t1, "no-such-run", by), failure.CodeNotFound)

	require.NoError(t, b.starter.Cancel(ctx, b.t1, acc.RunID, by))
	wid := WorkflowID(b.t1, "items", "k")
	require.True(t, cancelRequested(t, b.tc, wid), "no cancel request in the workflow history")

	// A run whose start never happened is started so the interpreter
	// records the cancellation like any other.
	_, err = b.st.Pool.Exec(ctx, `UPDATE runs SET status = 'succeeded' WHERE run_id = $1`, acc.RunID)
	require.NoError(t, err)
	wantCode(t, b.starter.Cancel(ctx, b.t1, acc.RunID, by), failure.CodeRunNotActive)

	srv, _ := testinfra.SharedTemporal()
	broken, err := client.Dial(client.Options{HostPort: srv.HostPort, Namespace: "no-such-namespace"})
	require.NoError(t, err)
	defer broken.Close()
	down, _ := New(Deps{Store: b.st, Temporal: broken, TaskQueue: b.queue, Resolver: b.starter.resolver,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	queued, err := down.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"b"}`), IdempotencyKey: "never-started"}, trusted(b.t1))
	require.NoError(t, err)
	require.NoError(t, b.starter.Cancel(ctx, b.t1, queued.RunID, by))
	require.True(t, cancelRequested(t, b.tc, WorkflowID(b.t1, "items", "never-started")), "never-started run was not started and cancelled")
}

func cancelRequested(t *testing.T, tc client.Client, workflowID string) bool {
	t.Helper()
	it := tc.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED {
			return true
		}
	}
	return false
}

func TestLargeInputIsClaimChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "items", itemGraph)
	big := fmt.Sprintf(`{"id":"a","pad":%q}`, strings.Repeat("x", MaxInlineInput))
	acc, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(big), IdempotencyKey: "big"}, trusted(b.t1))
	require.NoError(t, err)
	hist := b.tc.GetWorkflowHistory(ctx, WorkflowID(b.t1, "items", "big"), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	ev, err := hist.Next()
	require.NoError(t, err)
	payload := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0].GetData()
	require.LessOrEqual(t, len(payload), 4096, "workflow input is %d bytes; the large input travelled inline", len(payload))
	var params execution.RunParams
	require.NoError(t, json.Unmarshal(payload, &params))
	require.NotNil(t, params.Input.Ref, "input = %+v", params.Input)
	require.Empty(t, params.Input.Inline, "input = %+v", params.Input)
	require.Equal(t, "in", params.Input.Ref.NodeID, "input = %+v", params.Input)
	require.Equal(t, "out", params.Input.Ref.Port, "input = %+v", params.Input)
	v, err := b.st.GetValue(ctx, b.t1, acc.RunID, *params.Input.Ref)
	require.NoError(t, err)
	var got struct{ ID, Pad string }
	err = json.Unmarshal(v, &got)
	require.NoError(t, err, "stored value: %v", len(got.Pad))
	require.Equal(t, "a", got.ID, "stored value: %v %v", len(got.Pad), err)
	require.Len(t, got.Pad, MaxInlineInput, "stored value: %v %v", len(got.Pad), err)
	tooBig := fmt.Sprintf(`{"id":"a","pad":%q}`, strings.Repeat("x", MaxInputBytes))
	_, err = b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(tooBig), IdempotencyKey: "huge"}, trusted(b.t1))
	wantCode(t, err, failure.CodeDocumentTooLarge)
}

func TestWorkflowIDAndInputHash(t *testing.T) {
	t.Parallel()
	require.NotEqual(t, WorkflowID("ab", "c", "d"), WorkflowID("a", "bc", "d"), "separator does not separate")
	id := WorkflowID("t", "k", "i")
	require.True(t, regexp.MustCompile(`^weft-k-[0-9a-f]{64}$`).MatchString(id), "id %s", id)
	require.Equal(t, WorkflowID("t", "k", "i"), id, "id %s", id)
	// The key part is only a label: ids differ whenever tenant, key or
	// idempotency key do, even where the labels coincide.
	require.NotEqual(t, WorkflowID("t", "a_b", "i"), WorkflowID("t", "a-b", "i"), "ids collide")
	require.NotEqual(t, WorkflowID("u", "k", "i"), WorkflowID("t", "k", "i"), "ids collide")
	id = WorkflowID("t", "Bad Key/ü", "i")
	require.True(t, regexp.MustCompile(`^weft-bad-key---[0-9a-f]{64}$`).MatchString(id), "sanitised id %s", id)
	long := WorkflowID("t", strings.Repeat("x", 500), "i")
	require.True(t, strings.HasPrefix(long, "weft-"+strings.Repeat("x", 63)+"-"), "long key id %s (%d)", long, len(long))
	require.Len(t, long, 5+63+1+64, "long key id %s (%d)", long, len(long))
	id = WorkflowID("t", "", "i")
	require.True(t, strings.HasPrefix(id, "weft-run-"), "empty key id %s", id)
	h1, _ := InputHash(json.RawMessage(`{"b":[1,2.0],"a":"x"}`))
	h2, _ := InputHash(json.RawMessage(`{ "a":"x", "b":[1.0,2] }`))
	h3, _ := InputHash(json.RawMessage(`{"a":"y","b":[1,2]}`))
	require.Equal(t, h2, h1, "hashes %s %s %s", h1, h2, h3)
	require.NotEqual(t, h3, h1, "hashes %s %s %s", h1, h2, h3)
}

// startedParams decodes the RunParams a workflow was started with.
func startedParams(t *testing.T, tc client.Client, workflowID string) execution.RunParams {
	t.Helper()
	hist := tc.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	ev, err := hist.Next()
	require.NoError(t, err)
	var p execution.RunParams
	require.NoError(t, json.Unmarshal(ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0].GetData(), &p))
	return p
}

// TestRepeatIsAnsweredByItsBindingFirst: a bound key answers with its run
// before the (newer) revision's schema or permissions are consulted.
func TestRepeatIsAnsweredByItsBindingFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "items", itemGraph)
	input := json.RawMessage(`{"id":"abcdef"}`)
	first, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: input, IdempotencyKey: "k"}, trusted(b.t1))
	require.NoError(t, err, "first = %+v,", first)
	require.True(t, first.Created, "first = %+v, %v", first, err)

	// r2's schema refuses the original input: a new key is INVALID_INPUT,
	// the bound key is still its run.
	publish(t, b.st, b.t1, "items", strings.Replace(itemGraph, `"minLength": 1`, `"minLength": 1, "maxLength": 3`, 1))
	_, err = b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: input, IdempotencyKey: "k-new"}, trusted(b.t1))
	wantCode(t, err, failure.CodeInvalidInput)
	again, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: input, IdempotencyKey: "k"}, trusted(b.t1))
	require.NoError(t, err, "repeat after a stricter publish")
	require.False(t, again.Created, "again = %+v, first = %+v", again, first)
	require.Equal(t, first.RunID, again.RunID, "again = %+v, first = %+v", again, first)
	require.Equal(t, 1, again.Revision, "again = %+v, first = %+v", again, first)
	require.Equal(t, first.Checksum, again.Checksum, "again = %+v, first = %+v", again, first)
	// Other input under the bound key is a conflict, even where r2 would
	// refuse it too.
	_, err = b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"abcdefg"}`), IdempotencyKey: "k"}, trusted(b.t1))
	wantCode(t, err, failure.CodeIdempotencyConflict)
	_, err = b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: input, IdempotencyKey: "k", Mode: execution.ModeSimulation}, trusted(b.t1))
	wantCode(t, err, failure.CodeIdempotencyConflict)

	// r3 needs notes.write, which the caller lacks: a new key is
	// PERMISSION_DENIED, the bound key is still its run.
	publish(t, b.st, b.t1, "items", notesGraph)
	_, err = b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: input, IdempotencyKey: "k-perm"}, trusted(b.t1, "runs.execute"))
	wantCode(t, err, failure.CodePermissionDenied)
	again, err = b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: input, IdempotencyKey: "k"}, trusted(b.t1, "runs.execute"))
	require.NoError(t, err, "repeat after a publish needing a new permission")
	require.False(t, again.Created, "again = %+v", again)
	require.Equal(t, first.RunID, again.RunID, "again = %+v", again)
	require.Equal(t, 1, again.Revision, "again = %+v", again)
	got := countRuns(t, b.st)
	require.Equal(t, 1, got, "%d run rows", got)
	// The repeat reissued the start of the bound run: still its one workflow.
	p := startedParams(t, b.tc, WorkflowID(b.t1, "items", "k"))
	require.Equal(t, first.RunID, p.RunID, "started params = %+v", p)
	require.Equal(t, 1, p.Revision, "started params = %+v", p)
}

// TestToolGrantsAreBoundWithTheKey: toolGrants are normalized, stored with
// the run and part of the idempotency binding (not given, empty and a list
// all differ); a service actor's tool policy is stored but not bound, so a
// repeated firing answers the run it started.
func TestToolGrantsAreBoundWithTheKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "items", itemGraph)
	in := json.RawMessage(`{"id":"a"}`)
	enqueue := func(key string, grants []string) (Accepted, error) {
		return b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: in, IdempotencyKey: key, ToolGrants: grants}, trusted(b.t1))
	}
	first, err := enqueue("k", []string{"workspace.notes.write@1", "core.echo@1", "core.echo@1"})
	require.NoError(t, err)
	run, err := b.st.GetRun(ctx, b.t1, first.RunID)
	require.NoError(t, err, "stored grants %#v policy %#v (%v)", run.ToolGrants, run.ToolPolicy, err)
	require.True(t, slices.Equal(run.ToolGrants, []string{"core.echo@1", "workspace.notes.write@1"}), "stored grants %#v policy %#v (%v)", run.ToolGrants, run.ToolPolicy, err)
	require.Nil(t, run.ToolPolicy, "stored grants %#v policy %#v (%v)", run.ToolGrants, run.ToolPolicy, err)
	again, err := enqueue("k", []string{"core.echo@1", "workspace.notes.write@1"})
	require.NoError(t, err, "same grants in another order: %+v", again)
	require.False(t, again.Created, "same grants in another order: %+v %v", again, err)
	require.Equal(t, first.RunID, again.RunID, "same grants in another order: %+v %v", again, err)
	for _, other := range [][]string{{"core.echo@1"}, nil, {}} {
		_, err := enqueue("k", other)
		fe := wantCode(t, err, failure.CodeIdempotencyConflict)
		require.Contains(t, fe.Message, "toolGrants", "grants %#v: %v", other, fe)
		require.True(t, fe.Details["runId"] == first.RunID, "grants %#v: %v", other, fe)
	}
	// Not given and empty are bound apart too.
	none, err := enqueue("k-none", []string{})
	require.NoError(t, err)
	run, _ = b.st.GetRun(ctx, b.t1, none.RunID)
	require.NotNil(t, run.ToolGrants, "empty grants stored as %#v", run.ToolGrants)
	require.Empty(t, run.ToolGrants, "empty grants stored as %#v", run.ToolGrants)
	_, err = enqueue("k-none", nil)
	wantCode(t, err, failure.CodeIdempotencyConflict)

	// A malformed grant is refused before anything is stored.
	n := countRuns(t, b.st)
	_, err = enqueue("k-bad", []string{"core.echo@1", "core.echo"})
	fe := wantCode(t, err, failure.CodeInvalidRequest)
	require.True(t, fe.Details["field"] == "toolGrants", "details %v", fe.Details)
	require.True(t, fe.Details["index"] == 1, "details %v", fe.Details)
	require.Equal(t, n, countRuns(t, b.st), "a refused enqueue stored a run")

	// A service actor's policy is stored with the run, and a repeated
	// firing after the policy changed answers the run it started.
	svc := Trusted{TenantID: b.t1, Actor: execution.Actor{Kind: "service", Sub: "schedule:sch_x", ConfiguredBy: "alice"},
		Origin: execution.Origin{Kind: "schedule", ID: "sch_x"}, ToolPolicy: []string{"core.echo@1"}}
	fired, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: in, IdempotencyKey: "sch_x@t"}, svc)
	require.NoError(t, err)
	run, _ = b.st.GetRun(ctx, b.t1, fired.RunID)
	require.True(t, slices.Equal(run.ToolPolicy, []string{"core.echo@1"}), "service run grants %#v policy %#v", run.ToolGrants, run.ToolPolicy)
	require.Nil(t, run.ToolGrants, "service run grants %#v policy %#v", run.ToolGrants, run.ToolPolicy)
	svc.ToolPolicy = []string{}
	refired, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: in, IdempotencyKey: "sch_x@t"}, svc)
	require.NoError(t, err, "repeated firing: %+v", refired)
	require.False(t, refired.Created, "repeated firing: %+v %v", refired, err)
	require.Equal(t, fired.RunID, refired.RunID, "repeated firing: %+v %v", refired, err)
}

// TestEnqueueChecksTheSnapshotMinusRevocations: a scope revoked from the
// user is not in the snapshot the enqueue checks, although the token still
// holds it.
func TestEnqueueChecksTheSnapshotMinusRevocations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "notes", notesGraph)
	require.NoError(t, b.st.Revoke(ctx, b.t1, "alice", "notes.write"))
	_, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "notes", Input: json.RawMessage(`{}`), IdempotencyKey: "k"}, trusted(b.t1, "notes.write"))
	fe := wantCode(t, err, failure.CodePermissionDenied)
	require.True(t, slices.Equal(fe.Details["missing"].([]string), []string{"notes.write"}), "details %v", fe.Details)
	// Another user is not concerned; removing the revocation restores alice.
	bob := trusted(b.t1, "notes.write")
	bob.Actor.Sub = "bob"
	_, err = b.starter.Enqueue(ctx, Request{WorkflowKey: "notes", Input: json.RawMessage(`{}`), IdempotencyKey: "kb"}, bob)
	require.NoError(t, err)
	require.NoError(t, b.st.Unrevoke(ctx, b.t1, "alice", "notes.write"))
	acc, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "notes", Input: json.RawMessage(`{}`), IdempotencyKey: "k"}, trusted(b.t1, "notes.write"))
	require.NoError(t, err, "after the revocation was removed: %+v", acc)
	require.True(t, acc.Created, "after the revocation was removed: %+v %v", acc, err)
}

// TestRunsUnderTheLegacyWorkflowIDKeepWorking: a run bound before workflow
// ids carried the key keeps its stored id (weft-<hex sha256>): a repeated
// enqueue of its key starts and answers that run under that id, and a
// cancel addresses it.
func TestRunsUnderTheLegacyWorkflowIDKeepWorking(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "items", itemGraph)
	srv, _ := testinfra.SharedTemporal()
	// Bind the key without starting (a failed start), then give the row
	// the id the previous release derived.
	broken, err := client.Dial(client.Options{HostPort: srv.HostPort, Namespace: "no-such-namespace"})
	require.NoError(t, err)
	defer broken.Close()
	down, _ := New(Deps{Store: b.st, Temporal: broken, TaskQueue: b.queue, Resolver: b.starter.resolver,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	req := Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "legacy"}
	first, err := down.Enqueue(ctx, req, trusted(b.t1))
	require.NoError(t, err)
	h := sha256.Sum256([]byte(b.t1 + "\x00items\x00legacy"))
	legacy := "weft-" + hex.EncodeToString(h[:])
	_, err = b.st.Pool.Exec(ctx, `UPDATE runs SET workflow_id = $2 WHERE run_id = $1`, first.RunID, legacy)
	require.NoError(t, err)

	again, err := b.starter.Enqueue(ctx, req, trusted(b.t1))
	require.NoError(t, err, "repeat = %+v,", again)
	require.False(t, again.Created, "repeat = %+v, %v", again, err)
	require.Equal(t, first.RunID, again.RunID, "repeat = %+v, %v", again, err)
	p := startedParams(t, b.tc, legacy)
	require.Equal(t, first.RunID, p.RunID, "legacy workflow runs %s, want %s", p.RunID, first.RunID)
	_, err = b.tc.DescribeWorkflow(ctx, WorkflowID(b.t1, "items", "legacy"), "")
	require.Error(t, err, "a second workflow was started under the new id")
	require.NoError(t, b.starter.Cancel(ctx, b.t1, first.RunID, execution.Actor{Kind: "user", Sub: "bob"}))
	require.True(t, cancelRequested(t, b.tc, legacy), "the cancel did not reach the legacy workflow")
}

// TestCachedReadsNeverOutliveAChange: once an enqueue has cached the
// workflow's revision and default budget and the actor's revocations
// (reads.go), each change committed since takes effect on the next
// enqueue, exactly as if it had read them first: a revocation refuses, its
// removal admits, a new default budget fills the run's, a publish runs the
// new revision, and a repeated key is still answered from its binding.
func TestCachedReadsNeverOutliveAChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "notes", notesGraph)
	enqueue := func(key string) (Accepted, error) {
		return b.starter.Enqueue(ctx, Request{WorkflowKey: "notes", Input: json.RawMessage(`{}`), IdempotencyKey: key},
			trusted(b.t1, "notes.write"))
	}
	first, err := enqueue("k1")
	require.NoError(t, err)
	require.True(t, first.Created, "first = %+v", first)
	_, cached := b.starter.reads.lookup(store.EnqueueLookup{TenantID: b.t1, WorkflowKey: "notes", RevokedOf: "alice"})
	require.True(t, cached, "the first enqueue fills the reads cache")

	require.NoError(t, b.st.Revoke(ctx, b.t1, "alice", "notes.write"))
	_, err = enqueue("k2")
	fe := wantCode(t, err, failure.CodePermissionDenied)
	require.True(t, slices.Equal(fe.Details["missing"].([]string), []string{"notes.write"}), "details %v", fe.Details)
	require.NoError(t, b.st.Unrevoke(ctx, b.t1, "alice", "notes.write"))
	acc, err := enqueue("k2")
	require.NoError(t, err, "after the revocation was removed: %+v", acc)
	require.True(t, acc.Created, "after the revocation was removed: %+v", acc)

	_, err = b.starter.SetWorkflowLimits(ctx, store.WorkflowLimits{TenantID: b.t1, WorkflowKey: "notes", UpdatedBy: "alice",
		Budget: store.Budget{MaxTokens: ptr(int64(777))}})
	require.NoError(t, err)
	acc, err = enqueue("k3")
	require.NoError(t, err)
	run, err := b.st.GetRun(ctx, b.t1, acc.RunID)
	require.NoError(t, err)
	require.NotNil(t, run.Budget.MaxTokens, "budget %+v", run.Budget)
	require.Equal(t, int64(777), *run.Budget.MaxTokens, "budget %+v", run.Budget)

	rev := publish(t, b.st, b.t1, "notes", strings.Replace(notesGraph, `{"literal": "t"}`, `{"literal": "t2"}`, 1))
	require.Equal(t, 2, rev)
	acc, err = enqueue("k4")
	require.NoError(t, err)
	require.Equal(t, 2, acc.Revision, "after a publish: %+v", acc)
	again, err := enqueue("k1")
	require.NoError(t, err)
	require.False(t, again.Created, "a repeated key: %+v", again)
	require.Equal(t, first.RunID, again.RunID, "a repeated key: %+v", again)
	require.Equal(t, 1, again.Revision, "a repeated key keeps what it started: %+v", again)
}

// TestEnqueueGivesUpWhenItsReadsKeepChanging: when what an enqueue was
// decided with changed before its statement every time (the statement
// made to raise WF002 on every call, in this test's own database), the
// starter reads afresh and decides again maxFreshAttempts times, then
// answers UNAVAILABLE, having written nothing.
func TestEnqueueGivesUpWhenItsReadsKeepChanging(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "notes", notesGraph)
	enqueue := func(key string) (Accepted, error) {
		return b.starter.Enqueue(ctx, Request{WorkflowKey: "notes", Input: json.RawMessage(`{}`), IdempotencyKey: key},
			trusted(b.t1, "notes.write"))
	}
	first, err := enqueue("k1")
	require.NoError(t, err)
	require.True(t, first.Created, "first = %+v", first)

	// The migration's own signature, with a body that always raises;
	// nextval is not undone by the exception, so the sequence counts calls.
	sql, err := os.ReadFile("../store/migrations/00024_enqueue_run_checked.sql")
	require.NoError(t, err)
	head, _, ok := strings.Cut(string(sql), "LANGUAGE plpgsql AS $$")
	require.True(t, ok, "migration 00024 defines a plpgsql function")
	_, signature, ok := strings.Cut(head, "CREATE FUNCTION ")
	require.True(t, ok, "migration 00024 creates a function")
	_, err = b.st.Pool.Exec(ctx, `CREATE SEQUENCE checked_calls;
CREATE OR REPLACE FUNCTION `+signature+`LANGUAGE plpgsql AS $$
BEGIN
    PERFORM nextval('checked_calls');
    RAISE EXCEPTION 'changed' USING ERRCODE = 'WF002';
END
$$;`)
	require.NoError(t, err)

	_, err = enqueue("k2")
	wantCode(t, err, failure.CodeUnavailable)
	require.ErrorIs(t, err, store.ErrEnqueueReadsChanged)
	var calls int
	require.NoError(t, b.st.Pool.QueryRow(ctx, `SELECT last_value FROM checked_calls`).Scan(&calls))
	require.Equal(t, 1+maxFreshAttempts, calls, "the cached decision, then one statement per fresh read")
	var runs int
	require.NoError(t, b.st.Pool.QueryRow(ctx, `SELECT count(*) FROM runs WHERE tenant_id = $1`, b.t1).Scan(&runs))
	require.Equal(t, 1, runs, "only k1's run")
}
