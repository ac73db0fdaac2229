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
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{st: st, tc: tc, starter: s, queue: queue, t1: "t1-" + uuid.NewString(), t2: "t2-" + uuid.NewString()}
}

// resolver is the publication resolver the app wires over st.
func resolver(t *testing.T, st *store.Store) *publication.Resolver {
	t.Helper()
	vars, err := variables.Builtin(st)
	if err != nil {
		t.Fatal(err)
	}
	r, err := publication.NewResolver(st, vars)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestNewRequiresAResolver: the starter defaults no resolver; drafts must
// compile with the one publication uses.
func TestNewRequiresAResolver(t *testing.T) {
	_, tc := testinfra.SharedClient(t)
	_, err := New(Deps{Store: testinfra.NewStore(t), Temporal: tc, TaskQueue: "q"})
	if err == nil || !strings.Contains(err.Error(), "Resolver is required") {
		t.Fatalf("New without a Resolver = %v", err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	c, issues := graph.Compile(d, graph.NewStaticCatalog(catalog.BuiltinContracts(), nil))
	if len(issues) > 0 {
		t.Fatalf("compile: %v", issues)
	}
	plan := c.Plan()
	draft := 1
	w, err := st.GetWorkflow(ctx, tenant, key)
	switch {
	case errors.Is(err, failure.ErrNotFound):
		if _, err := st.CreateWorkflow(ctx, tenant, key, json.RawMessage(doc), "tester"); err != nil {
			t.Fatal(err)
		}
	case err != nil:
		t.Fatal(err)
	default:
		if draft, err = st.SaveDraft(ctx, tenant, key, w.LatestDraftRevision, json.RawMessage(doc), "tester"); err != nil {
			t.Fatal(err)
		}
	}
	rev, _, err := st.Publish(ctx, tenant, key, draft, c, &plan, "tester")
	if err != nil {
		t.Fatal(err)
	}
	return rev.Revision
}

func trusted(tenant string, perms ...string) Trusted {
	return Trusted{TenantID: tenant, TenantName: "Tenant " + tenant,
		Actor: execution.Actor{Kind: "user", Sub: "alice"}, Origin: execution.Origin{Kind: "api"}, Permissions: perms}
}

func wantCode(t *testing.T, err error, code string) *failure.Error {
	t.Helper()
	var fe *failure.Error
	if !errors.As(err, &fe) || fe.Code != code {
		t.Fatalf("want %s, got %v", code, err)
	}
	return fe
}

func countRuns(t *testing.T, st *store.Store) int {
	t.Helper()
	var n int
	if err := st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM runs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestEnqueueStartsWorkflowWithIdentityAndSearchAttributes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "items", itemGraph)

	acc, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "k1"}, trusted(b.t1))
	if err != nil {
		t.Fatal(err)
	}
	if !acc.Created || acc.Status != execution.StatusQueued || acc.Revision != 1 || acc.Checksum == "" {
		t.Fatalf("accepted = %+v", acc)
	}
	run, err := b.st.GetRun(ctx, b.t1, acc.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if want := WorkflowID(b.t1, "items", "k1"); run.WorkflowID != want {
		t.Fatalf("workflow id %s, want %s", run.WorkflowID, want)
	}
	// The interpreter records its Temporal run id with its first append;
	// the starter writes nothing after the start.
	desc, err := b.tc.DescribeWorkflow(ctx, run.WorkflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	info := desc.RawResponse.GetWorkflowExecutionInfo()
	if info.GetType().GetName() != execution.WorkflowName || info.GetTaskQueue() != b.queue {
		t.Fatalf("type %s queue %s", info.GetType().GetName(), info.GetTaskQueue())
	}
	sa := info.GetSearchAttributes().GetIndexedFields()
	for name, want := range map[string]string{
		execution.SearchAttrTenant: `"` + b.t1 + `"`, execution.SearchAttrWorkflowKey: `"items"`,
		execution.SearchAttrMode: `"live"`, execution.SearchAttrRevision: `1`,
	} {
		if got := string(sa[name].GetData()); got != want {
			t.Errorf("search attribute %s = %s, want %s", name, got, want)
		}
	}
	if got := b.starter.WorkflowURL(run.WorkflowID); got != "http://ui.test/namespaces/default/workflows/"+run.WorkflowID {
		t.Fatalf("ui url %s", got)
	}
	// The workflow input is the run row, with the trusted context.
	hist := b.tc.GetWorkflowHistory(ctx, run.WorkflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	ev, err := hist.Next()
	if err != nil {
		t.Fatal(err)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	var params execution.RunParams
	if err := json.Unmarshal(attrs.GetInput().GetPayloads()[0].GetData(), &params); err != nil {
		t.Fatal(err)
	}
	if params.RunID != acc.RunID || params.TenantID != b.t1 || params.TenantName != "Tenant "+b.t1 || params.Checksum != acc.Checksum ||
		params.Mode != execution.ModeLive || string(params.Input.Inline) != `{"id":"a"}` || params.Actor.Sub != "alice" || params.Origin.Kind != "api" {
		t.Fatalf("params = %+v", params)
	}
	if got := desc.RawResponse.GetExecutionConfig().GetUserMetadata().GetSummary(); got == nil || !strings.Contains(string(got.GetData()), "items r1 · live") {
		t.Fatalf("static summary = %v", got)
	}
}

func TestEnqueueIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "items", itemGraph)
	first, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a","n":2}`), IdempotencyKey: "k"}, trusted(b.t1))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("same input in another key order and spacing is the same run", func(t *testing.T) {
		again, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(` { "n": 2.0, "id": "a" } `), IdempotencyKey: "k"}, trusted(b.t1))
		if err != nil {
			t.Fatal(err)
		}
		if again.Created || again.RunID != first.RunID {
			t.Fatalf("again = %+v, first = %+v", again, first)
		}
	})
	t.Run("other input conflicts", func(t *testing.T) {
		_, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"b"}`), IdempotencyKey: "k"}, trusted(b.t1))
		fe := wantCode(t, err, failure.CodeIdempotencyConflict)
		if fe.Details["runId"] != first.RunID {
			t.Fatalf("details = %v", fe.Details)
		}
	})
	t.Run("a newer publish keeps the key bound to what it started", func(t *testing.T) {
		rev := publish(t, b.st, b.t1, "items", strings.Replace(itemGraph, `"minLength": 1`, `"minLength": 1, "maxLength": 9`, 1))
		if rev != 2 {
			t.Fatalf("revision %d", rev)
		}
		again, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a","n":2}`), IdempotencyKey: "k"}, trusted(b.t1))
		if err != nil {
			t.Fatal(err)
		}
		if again.Created || again.RunID != first.RunID || again.Revision != 1 || again.Checksum != first.Checksum {
			t.Fatalf("again = %+v", again)
		}
		// Naming another revision explicitly is another request.
		two := 2
		_, err = b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a","n":2}`), IdempotencyKey: "k", Revision: &two}, trusted(b.t1))
		wantCode(t, err, failure.CodeIdempotencyConflict)
		fresh, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a","n":2}`), IdempotencyKey: "k2"}, trusted(b.t1))
		if err != nil || fresh.Revision != 2 || !fresh.Created {
			t.Fatalf("fresh = %+v, %v", fresh, err)
		}
	})
	t.Run("keys are scoped by tenant and workflow key", func(t *testing.T) {
		publish(t, b.st, b.t2, "items", itemGraph)
		other, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"zzz"}`), IdempotencyKey: "k"}, trusted(b.t2))
		if err != nil || !other.Created || other.RunID == first.RunID {
			t.Fatalf("other = %+v, %v", other, err)
		}
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
		if errs[i] != nil {
			t.Fatalf("enqueue %d: %v", i, errs[i])
		}
		if results[i].RunID != results[0].RunID {
			t.Fatalf("run ids differ: %s vs %s", results[i].RunID, results[0].RunID)
		}
		if results[i].Created {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d enqueues reported created", created)
	}
	if got := countRuns(t, b.st); got != 1 {
		t.Fatalf("%d run rows", got)
	}
	resp, err := b.tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = '%s'", WorkflowID(b.t1, "items", "race"))})
	if err != nil {
		t.Fatal(err)
	}
	// Visibility lags; one execution is the only possible answer once it shows.
	if resp.GetCount() > 1 {
		t.Fatalf("%d workflow executions", resp.GetCount())
	}
	desc, err := b.tc.DescribeWorkflow(ctx, WorkflowID(b.t1, "items", "race"), "")
	if err != nil {
		t.Fatal(err)
	}
	if p := startedParams(t, b.tc, WorkflowID(b.t1, "items", "race")); p.RunID != results[0].RunID ||
		desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId() == "" {
		t.Fatalf("the workflow's only execution runs %s, want %s", p.RunID, results[0].RunID)
	}
}

func TestEnqueueRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "items", itemGraph)
	publish(t, b.st, b.t1, "notes", notesGraph)
	if _, err := b.st.CreateWorkflow(ctx, b.t1, "draft-only", json.RawMessage(itemGraph), "tester"); err != nil {
		t.Fatal(err)
	}
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
			if len(issues) == 0 || fe.Details["node"] != "in" {
				t.Errorf("%s: details = %#v", c.name, fe.Details)
			}
		case failure.CodePermissionDenied:
			missing, _ := fe.Details["missing"].([]string)
			nodes, _ := fe.Details["nodes"].(map[string][]string)
			if len(missing) != 1 || missing[0] != "notes.write" || len(nodes["save"]) != 1 {
				t.Errorf("%s: details = %#v", c.name, fe.Details)
			}
		}
	}
	if got := countRuns(t, b.st); got != 0 {
		t.Fatalf("a refused enqueue left %d run rows", got)
	}
	// The same run with the permission is accepted.
	if _, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "notes", Input: json.RawMessage(`{}`), IdempotencyKey: "k"}, trusted(b.t1, "notes.write")); err != nil {
		t.Fatal(err)
	}
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
	if !strings.Contains(joined, "/n: ") || !strings.Contains(joined, "id") {
		t.Fatalf("issues = %s", joined)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	defer broken.Close()
	down, err := New(Deps{Store: b.st, Temporal: broken, TaskQueue: b.queue, Resolver: b.starter.resolver,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		t.Fatal(err)
	}
	acc, err := down.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "k"}, trusted(b.t1))
	if err != nil {
		t.Fatalf("a failed start must still answer: %v", err)
	}
	if !acc.Created || acc.Status != execution.StatusQueued {
		t.Fatalf("accepted = %+v", acc)
	}
	wid := WorkflowID(b.t1, "items", "k")
	if _, err := b.tc.DescribeWorkflow(ctx, wid, ""); err == nil {
		t.Fatal("workflow exists though the start failed")
	}

	// Too young for the sweeper: it must not race the enqueue that is starting it.
	if n, err := b.starter.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("sweep of a young run: %d, %v", n, err)
	}
	if _, err := b.st.Pool.Exec(ctx, `UPDATE runs SET created_at = now() - interval '31 seconds', admitted_at = now() - interval '31 seconds'`); err != nil {
		t.Fatal(err)
	}
	n, err := b.starter.Sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	desc, err := b.tc.DescribeWorkflow(ctx, wid, "")
	if err != nil {
		t.Fatal(err)
	}
	// The sweeper's start passes what the enqueue would have: the tenant
	// name comes from the run row.
	if p := startedParams(t, b.tc, wid); p.RunID != acc.RunID || p.TenantName != "Tenant "+b.t1 {
		t.Fatalf("swept start params = %+v", p)
	}
	if desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId() == "" {
		t.Fatal("the sweeper started no execution")
	}
	// Sweeping again re-issues an idempotent start: still one execution.
	if n, err := b.starter.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("second sweep: %d, %v", n, err)
	}
	desc2, err := b.tc.DescribeWorkflow(ctx, wid, "")
	if err != nil {
		t.Fatal(err)
	}
	if desc2.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId() != desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId() {
		t.Fatal("a repeated start made a second execution")
	}

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
	if err != nil {
		t.Fatal(err)
	}
	by := execution.Actor{Kind: "user", Sub: "bob"}
	wantCode(t, b.starter.Cancel(ctx, b.t2, acc.RunID, by), failure.CodeNotFound)
	wantCode(t, b.starter.Cancel(ctx, b.t1, "no-such-run", by), failure.CodeNotFound)

	if err := b.starter.Cancel(ctx, b.t1, acc.RunID, by); err != nil {
		t.Fatal(err)
	}
	wid := WorkflowID(b.t1, "items", "k")
	if !cancelRequested(t, b.tc, wid) {
		t.Fatal("no cancel request in the workflow history")
	}

	// A run whose start never happened is started so the interpreter
	// records the cancellation like any other.
	if _, err := b.st.Pool.Exec(ctx, `UPDATE runs SET status = 'succeeded' WHERE run_id = $1`, acc.RunID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, b.starter.Cancel(ctx, b.t1, acc.RunID, by), failure.CodeRunNotActive)

	srv, _ := testinfra.SharedTemporal()
	broken, err := client.Dial(client.Options{HostPort: srv.HostPort, Namespace: "no-such-namespace"})
	if err != nil {
		t.Fatal(err)
	}
	defer broken.Close()
	down, _ := New(Deps{Store: b.st, Temporal: broken, TaskQueue: b.queue, Resolver: b.starter.resolver,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	queued, err := down.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"b"}`), IdempotencyKey: "never-started"}, trusted(b.t1))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.starter.Cancel(ctx, b.t1, queued.RunID, by); err != nil {
		t.Fatal(err)
	}
	if !cancelRequested(t, b.tc, WorkflowID(b.t1, "items", "never-started")) {
		t.Fatal("never-started run was not started and cancelled")
	}
}

func cancelRequested(t *testing.T, tc client.Client, workflowID string) bool {
	t.Helper()
	it := tc.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
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
	if err != nil {
		t.Fatal(err)
	}
	hist := b.tc.GetWorkflowHistory(ctx, WorkflowID(b.t1, "items", "big"), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	ev, err := hist.Next()
	if err != nil {
		t.Fatal(err)
	}
	payload := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0].GetData()
	if len(payload) > 4096 {
		t.Fatalf("workflow input is %d bytes; the large input travelled inline", len(payload))
	}
	var params execution.RunParams
	if err := json.Unmarshal(payload, &params); err != nil {
		t.Fatal(err)
	}
	if params.Input.Ref == nil || len(params.Input.Inline) != 0 || params.Input.Ref.NodeID != "in" || params.Input.Ref.Port != "out" {
		t.Fatalf("input = %+v", params.Input)
	}
	v, err := b.st.GetValue(ctx, b.t1, acc.RunID, *params.Input.Ref)
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ ID, Pad string }
	if err := json.Unmarshal(v, &got); err != nil || got.ID != "a" || len(got.Pad) != MaxInlineInput {
		t.Fatalf("stored value: %v %v", len(got.Pad), err)
	}
	tooBig := fmt.Sprintf(`{"id":"a","pad":%q}`, strings.Repeat("x", MaxInputBytes))
	_, err = b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(tooBig), IdempotencyKey: "huge"}, trusted(b.t1))
	wantCode(t, err, failure.CodeDocumentTooLarge)
}

func TestWorkflowIDAndInputHash(t *testing.T) {
	t.Parallel()
	if WorkflowID("a", "bc", "d") == WorkflowID("ab", "c", "d") {
		t.Fatal("separator does not separate")
	}
	if id := WorkflowID("t", "k", "i"); !regexp.MustCompile(`^weft-k-[0-9a-f]{64}$`).MatchString(id) || id != WorkflowID("t", "k", "i") {
		t.Fatalf("id %s", id)
	}
	// The key part is only a label: ids differ whenever tenant, key or
	// idempotency key do, even where the labels coincide.
	if WorkflowID("t", "a-b", "i") == WorkflowID("t", "a_b", "i") || WorkflowID("t", "k", "i") == WorkflowID("u", "k", "i") {
		t.Fatal("ids collide")
	}
	if id := WorkflowID("t", "Bad Key/ü", "i"); !regexp.MustCompile(`^weft-bad-key---[0-9a-f]{64}$`).MatchString(id) {
		t.Fatalf("sanitised id %s", id)
	}
	long := WorkflowID("t", strings.Repeat("x", 500), "i")
	if !strings.HasPrefix(long, "weft-"+strings.Repeat("x", 63)+"-") || len(long) != 5+63+1+64 {
		t.Fatalf("long key id %s (%d)", long, len(long))
	}
	if id := WorkflowID("t", "", "i"); !strings.HasPrefix(id, "weft-run-") {
		t.Fatalf("empty key id %s", id)
	}
	h1, _ := InputHash(json.RawMessage(`{"b":[1,2.0],"a":"x"}`))
	h2, _ := InputHash(json.RawMessage(`{ "a":"x", "b":[1.0,2] }`))
	h3, _ := InputHash(json.RawMessage(`{"a":"y","b":[1,2]}`))
	if h1 != h2 || h1 == h3 {
		t.Fatalf("hashes %s %s %s", h1, h2, h3)
	}
}

// startedParams decodes the RunParams a workflow was started with.
func startedParams(t *testing.T, tc client.Client, workflowID string) execution.RunParams {
	t.Helper()
	hist := tc.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	ev, err := hist.Next()
	if err != nil {
		t.Fatal(err)
	}
	var p execution.RunParams
	if err := json.Unmarshal(ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0].GetData(), &p); err != nil {
		t.Fatal(err)
	}
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
	if err != nil || !first.Created {
		t.Fatalf("first = %+v, %v", first, err)
	}

	// r2's schema refuses the original input: a new key is INVALID_INPUT,
	// the bound key is still its run.
	publish(t, b.st, b.t1, "items", strings.Replace(itemGraph, `"minLength": 1`, `"minLength": 1, "maxLength": 3`, 1))
	_, err = b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: input, IdempotencyKey: "k-new"}, trusted(b.t1))
	wantCode(t, err, failure.CodeInvalidInput)
	again, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: input, IdempotencyKey: "k"}, trusted(b.t1))
	if err != nil {
		t.Fatalf("repeat after a stricter publish: %v", err)
	}
	if again.Created || again.RunID != first.RunID || again.Revision != 1 || again.Checksum != first.Checksum {
		t.Fatalf("again = %+v, first = %+v", again, first)
	}
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
	if err != nil {
		t.Fatalf("repeat after a publish needing a new permission: %v", err)
	}
	if again.Created || again.RunID != first.RunID || again.Revision != 1 {
		t.Fatalf("again = %+v", again)
	}
	if got := countRuns(t, b.st); got != 1 {
		t.Fatalf("%d run rows", got)
	}
	// The repeat reissued the start of the bound run: still its one workflow.
	if p := startedParams(t, b.tc, WorkflowID(b.t1, "items", "k")); p.RunID != first.RunID || p.Revision != 1 {
		t.Fatalf("started params = %+v", p)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	run, err := b.st.GetRun(ctx, b.t1, first.RunID)
	if err != nil || !slices.Equal(run.ToolGrants, []string{"core.echo@1", "workspace.notes.write@1"}) || run.ToolPolicy != nil {
		t.Fatalf("stored grants %#v policy %#v (%v)", run.ToolGrants, run.ToolPolicy, err)
	}
	again, err := enqueue("k", []string{"core.echo@1", "workspace.notes.write@1"})
	if err != nil || again.Created || again.RunID != first.RunID {
		t.Fatalf("same grants in another order: %+v %v", again, err)
	}
	for _, other := range [][]string{{"core.echo@1"}, nil, {}} {
		_, err := enqueue("k", other)
		if fe := wantCode(t, err, failure.CodeIdempotencyConflict); !strings.Contains(fe.Message, "toolGrants") || fe.Details["runId"] != first.RunID {
			t.Fatalf("grants %#v: %v", other, fe)
		}
	}
	// Not given and empty are bound apart too.
	none, err := enqueue("k-none", []string{})
	if err != nil {
		t.Fatal(err)
	}
	if run, _ := b.st.GetRun(ctx, b.t1, none.RunID); run.ToolGrants == nil || len(run.ToolGrants) != 0 {
		t.Fatalf("empty grants stored as %#v", run.ToolGrants)
	}
	_, err = enqueue("k-none", nil)
	wantCode(t, err, failure.CodeIdempotencyConflict)

	// A malformed grant is refused before anything is stored.
	n := countRuns(t, b.st)
	_, err = enqueue("k-bad", []string{"core.echo@1", "core.echo"})
	if fe := wantCode(t, err, failure.CodeInvalidRequest); fe.Details["field"] != "toolGrants" || fe.Details["index"] != 1 {
		t.Fatalf("details %v", fe.Details)
	}
	if countRuns(t, b.st) != n {
		t.Fatal("a refused enqueue stored a run")
	}

	// A service actor's policy is stored with the run, and a repeated
	// firing after the policy changed answers the run it started.
	svc := Trusted{TenantID: b.t1, Actor: execution.Actor{Kind: "service", Sub: "schedule:sch_x", ConfiguredBy: "alice"},
		Origin: execution.Origin{Kind: "schedule", ID: "sch_x"}, ToolPolicy: []string{"core.echo@1"}}
	fired, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: in, IdempotencyKey: "sch_x@t"}, svc)
	if err != nil {
		t.Fatal(err)
	}
	if run, _ := b.st.GetRun(ctx, b.t1, fired.RunID); !slices.Equal(run.ToolPolicy, []string{"core.echo@1"}) || run.ToolGrants != nil {
		t.Fatalf("service run grants %#v policy %#v", run.ToolGrants, run.ToolPolicy)
	}
	svc.ToolPolicy = []string{}
	refired, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "items", Input: in, IdempotencyKey: "sch_x@t"}, svc)
	if err != nil || refired.Created || refired.RunID != fired.RunID {
		t.Fatalf("repeated firing: %+v %v", refired, err)
	}
}

// TestEnqueueChecksTheSnapshotMinusRevocations: a scope revoked from the
// user is not in the snapshot the enqueue checks, although the token still
// holds it.
func TestEnqueueChecksTheSnapshotMinusRevocations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	publish(t, b.st, b.t1, "notes", notesGraph)
	if err := b.st.Revoke(ctx, b.t1, "alice", "notes.write"); err != nil {
		t.Fatal(err)
	}
	_, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "notes", Input: json.RawMessage(`{}`), IdempotencyKey: "k"}, trusted(b.t1, "notes.write"))
	if fe := wantCode(t, err, failure.CodePermissionDenied); !slices.Equal(fe.Details["missing"].([]string), []string{"notes.write"}) {
		t.Fatalf("details %v", fe.Details)
	}
	// Another user is not concerned; removing the revocation restores alice.
	bob := trusted(b.t1, "notes.write")
	bob.Actor.Sub = "bob"
	if _, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "notes", Input: json.RawMessage(`{}`), IdempotencyKey: "kb"}, bob); err != nil {
		t.Fatal(err)
	}
	if err := b.st.Unrevoke(ctx, b.t1, "alice", "notes.write"); err != nil {
		t.Fatal(err)
	}
	acc, err := b.starter.Enqueue(ctx, Request{WorkflowKey: "notes", Input: json.RawMessage(`{}`), IdempotencyKey: "k"}, trusted(b.t1, "notes.write"))
	if err != nil || !acc.Created {
		t.Fatalf("after the revocation was removed: %+v %v", acc, err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	defer broken.Close()
	down, _ := New(Deps{Store: b.st, Temporal: broken, TaskQueue: b.queue, Resolver: b.starter.resolver,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	req := Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "legacy"}
	first, err := down.Enqueue(ctx, req, trusted(b.t1))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte(b.t1 + "\x00items\x00legacy"))
	legacy := "weft-" + hex.EncodeToString(h[:])
	if _, err := b.st.Pool.Exec(ctx, `UPDATE runs SET workflow_id = $2 WHERE run_id = $1`, first.RunID, legacy); err != nil {
		t.Fatal(err)
	}

	again, err := b.starter.Enqueue(ctx, req, trusted(b.t1))
	if err != nil || again.Created || again.RunID != first.RunID {
		t.Fatalf("repeat = %+v, %v", again, err)
	}
	if p := startedParams(t, b.tc, legacy); p.RunID != first.RunID {
		t.Fatalf("legacy workflow runs %s, want %s", p.RunID, first.RunID)
	}
	if _, err := b.tc.DescribeWorkflow(ctx, WorkflowID(b.t1, "items", "legacy"), ""); err == nil {
		t.Fatal("a second workflow was started under the new id")
	}
	if err := b.starter.Cancel(ctx, b.t1, first.RunID, execution.Actor{Kind: "user", Sub: "bob"}); err != nil {
		t.Fatal(err)
	}
	if !cancelRequested(t, b.tc, legacy) {
		t.Fatal("the cancel did not reach the legacy workflow")
	}
}
