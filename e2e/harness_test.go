package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/internal/testinfra/inproc"
	"github.com/weftworks/weft/publication"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/temporalclient"
	"github.com/weftworks/weft/variables"
	"github.com/weftworks/weft/worker"
)

// helperWorkerEnv selects the worker entry point when the test binary is
// re-executed as a separate worker process (the SIGKILL drill).
const helperWorkerEnv = "WEFT_E2E_HELPER_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(helperWorkerEnv) != "" {
		os.Exit(runHelperWorker())
	}
	testinfra.Main(m)
}

// runHelperWorker is a worker process inside the test binary, wired as
// `weft worker` wires it (worker.Serve: contracts published, the
// interpreter and every activity registered, WEFT_WORKER_DRAIN honoured),
// plus the drill actions. Like cmd/weft, the first SIGINT/SIGTERM starts
// a graceful stop and a second one kills the process.
func runHelperWorker() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "helper worker:", err); return 1 }
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := store.Open(context.Background(), cfg.DatabaseURL)
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	tc, err := temporalclient.Dial(context.Background(), cfg, logger, nil)
	if err != nil {
		return fail(err)
	}
	defer tc.Close()
	deps, err := inproc.WorkerDeps(worker.Deps{Config: cfg, Store: st, Temporal: tc, Logger: logger, Actions: drillActions(st)})
	if err != nil {
		return fail(err)
	}
	if err := worker.Serve(ctx, deps); err != nil {
		return fail(err)
	}
	return 0
}

const jwtSecret = "e2e-test-secret-0123456789abcdef"

// env is one test's world: a fresh database, the shared dev server, a task
// queue of its own, the API over real HTTP, and tenants no other test uses
// (workflow ids derive from the tenant and the dev server is shared).
type env struct {
	t        *testing.T
	st       *store.Store
	dbURL    string
	tc       client.Client
	temporal *testinfra.Temporal
	queue    string
	cfg      config.Config
	keys     *auth.Keys
	srv      *httptest.Server
	starter  *starter.Starter
	// vars is the variable registry the API was wired with.
	vars *variables.Registry
	// tenant and other are two tenants; token holds every scope for tenant.
	tenant, other string
	token         string
	log           *slog.Logger
	// dbProxy, when set, stands between the API, the worker processes and
	// PostgreSQL (the outage drill cuts it); st always connects directly.
	dbProxy *testinfra.TCPProxy
	// workflowIDs remembers the Temporal workflow id of runs (workflowID).
	workflowIDs map[string]string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, testinfra.NewDatabase(t))
}

// newEnvOn is newEnv on the database at dbURL (migrated as the test needs).
func newEnvOn(t *testing.T, dbURL string) *env {
	t.Helper()
	tsrv, tc := testinfra.SharedClient(t)
	return newEnvOnServer(t, dbURL, tsrv, tc)
}

// newEnvOnServer is newEnvOn against the dev server tsrv (client tc).
func newEnvOnServer(t *testing.T, dbURL string, tsrv *testinfra.Temporal, tc client.Client) *env {
	t.Helper()
	st, err := store.Open(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return newEnvOnStore(t, st, dbURL, tsrv, tc)
}

// newEnvOnStore is newEnvOnServer with st (on the database at dbURL) as
// the API's, the starter's and the worker's store.
func newEnvOnStore(t *testing.T, st *store.Store, dbURL string, tsrv *testinfra.Temporal, tc client.Client) *env {
	t.Helper()
	var err error
	e := &env{t: t, st: st, dbURL: dbURL, tc: tc, temporal: tsrv, queue: "e2e-" + uuid.NewString(),
		tenant: "tenant-" + uuid.NewString()[:8], other: "other-" + uuid.NewString()[:8], workflowIDs: map[string]string{},
		log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	// WEFT_LEAN_INPUTS from the test's environment runs every test's runs
	// with lean inputs (off by default, as in production).
	e.cfg, err = config.FromEnv(func(k string) string {
		if k == "WEFT_LEAN_INPUTS" {
			return os.Getenv(k)
		}
		return ""
	})
	require.NoError(t, err)
	e.cfg.DatabaseURL, e.cfg.TemporalAddress, e.cfg.TaskQueue, e.cfg.JWTSecret = dbURL, tsrv.HostPort, e.queue, jwtSecret
	e.cfg.TemporalUIURL = "http://ui.test"
	e.keys = testinfra.Keys(t, jwtSecret)
	e.serveAPI(st)
	e.token = e.mint(e.tenant, "alice", auth.AllScopes...)
	return e
}

// serveAPI (re)starts the env's API over real HTTP on st, wired as
// cmd/weft wires it: one variable registry and one resolver shared by
// publication and the starter, so a simulated draft compiles exactly as it
// would publish and templates are checked.
func (e *env) serveAPI(st *store.Store) {
	t := e.t
	t.Helper()
	vars, err := variables.Builtin(st)
	require.NoError(t, err)
	resolver, err := publication.NewResolver(st, vars)
	require.NoError(t, err)
	pub, err := publication.NewService(st, resolver)
	require.NoError(t, err)
	e.vars = vars
	e.starter, err = starter.New(starter.Deps{Store: st, Temporal: e.tc, TaskQueue: e.queue,
		UIURL: e.cfg.TemporalUIURL, Namespace: "default", Logger: e.log, Resolver: resolver, Durability: e.cfg.Durability,
		LeanInputs: e.cfg.LeanInputs})
	require.NoError(t, err)
	if e.srv != nil {
		e.srv.Close()
	}
	srv := httptest.NewServer(inproc.API(t, api.Deps{Config: e.cfg, Store: st, Keys: e.keys, Temporal: e.tc,
		Starter: e.starter, Publication: pub, Variables: vars, Logger: e.log}))
	t.Cleanup(srv.Close)
	e.srv = srv
}

// serveAPIThrough serves the API on a store connected to databaseURL.
func (e *env) serveAPIThrough(databaseURL string) {
	e.t.Helper()
	st, err := store.Open(context.Background(), databaseURL)
	require.NoError(e.t, err)
	e.t.Cleanup(st.Close)
	e.serveAPI(st)
}

// startWorker runs an in-process worker on the env's task queue with
// exactly what production registers.
func (e *env) startWorker() sdkworker.Worker {
	e.t.Helper()
	return inproc.Worker(e.t, worker.Deps{Config: e.cfg, Store: e.st, Temporal: e.tc, Logger: e.log})
}

func (e *env) mint(tenant, sub string, scopes ...string) string {
	e.t.Helper()
	return testinfra.Token(e.t, e.keys, tenant, sub, scopes...)
}

// response is one HTTP answer.
type response = testinfra.Response

// do sends one request; body is marshalled unless it is a string or []byte.
func (e *env) do(method, path, token string, body any) response {
	e.t.Helper()
	return testinfra.Do(e.t, e.srv.URL, method, path, token, body)
}

// publish creates (or redrafts) workflow key with doc through the API and
// publishes it, returning the revision.
func (e *env) publish(key, doc string) int {
	e.t.Helper()
	return e.publishAs(e.token, key, doc)
}

func (e *env) publishAs(token, key, doc string) int {
	e.t.Helper()
	var draft int
	res := e.do(http.MethodGet, "/v1/workflows/"+key, token, nil)
	if res.Status == http.StatusNotFound {
		res = e.do(http.MethodPost, "/v1/workflows", token, map[string]any{"key": key, "graph": json.RawMessage(doc)})
		require.Equal(e.t, http.StatusCreated, res.Status, "create: %s", res.Body)
		draft = int(res.JSON(e.t)["draftRevision"].(float64))
	} else {
		require.Equal(e.t, http.StatusOK, res.Status, "%s", res.Body)
		current := int(res.JSON(e.t)["draft"].(map[string]any)["revision"].(float64))
		res = e.do(http.MethodPut, "/v1/workflows/"+key+"/draft", token, map[string]any{"expectedRevision": current, "graph": json.RawMessage(doc)})
		require.Equal(e.t, http.StatusOK, res.Status, "save draft: %s", res.Body)
		draft = int(res.JSON(e.t)["draftRevision"].(float64))
	}
	res = e.do(http.MethodPost, "/v1/workflows/"+key+"/publish", token, map[string]any{"expectedRevision": draft})
	require.Equal(e.t, http.StatusCreated, res.Status, "publish: %s", res.Body)
	return int(res.JSON(e.t)["revision"].(float64))
}

// enqueue runs key with input under idempotency key idem and returns the answer.
func (e *env) enqueue(key string, input any, idem string) response {
	e.t.Helper()
	return e.do(http.MethodPost, "/v1/workflows/"+key+"/runs", e.token, map[string]any{"input": input, "idempotencyKey": idem})
}

// run enqueues and returns the new run id, requiring 202.
func (e *env) run(key string, input any) string {
	e.t.Helper()
	res := e.enqueue(key, input, uuid.NewString())
	require.Equal(e.t, http.StatusAccepted, res.Status, "enqueue: %s", res.Body)
	return res.JSON(e.t)["runId"].(string)
}

// runView is GET /v1/runs/{id}.
type runView struct {
	RunID       string          `json:"runId"`
	WorkflowKey string          `json:"workflowKey"`
	Revision    int             `json:"revision"`
	Checksum    string          `json:"checksum"`
	Mode        string          `json:"mode"`
	Status      string          `json:"status"`
	Input       json.RawMessage `json:"input"`
	Output      json.RawMessage `json:"output"`
	Error       *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		NodeID  string `json:"nodeId"`
	} `json:"error"`
	Origin map[string]any `json:"origin"`
	Nodes  []struct {
		ID      string `json:"id"`
		Kind    string `json:"kind"`
		Status  string `json:"status"`
		Attempt int    `json:"attempt"`
		Port    string `json:"port"`
		Reason  string `json:"reason"`
	} `json:"nodes"`
	Usage    map[string]any `json:"usage"`
	Temporal struct {
		WorkflowID string `json:"workflowId"`
		RunID      string `json:"runId"`
		UIURL      string `json:"uiUrl"`
	} `json:"temporal"`
}

func (e *env) getRun(id string) runView {
	e.t.Helper()
	res := e.do(http.MethodGet, "/v1/runs/"+id, e.token, nil)
	require.Equal(e.t, http.StatusOK, res.Status, "%s", res.Body)
	var v runView
	require.NoError(e.t, json.Unmarshal(res.Body, &v))
	return v
}

// node returns the projected state of node id.
func (v runView) node(t *testing.T, id string) (status string, attempt int, port, reason string) {
	t.Helper()
	for _, n := range v.Nodes {
		if n.ID == id {
			return n.Status, n.Attempt, n.Port, n.Reason
		}
	}
	t.Fatalf("run %s has no node %q", v.RunID, id)
	return
}

// wait polls the run until it is terminal.
func (e *env) wait(id string, timeout time.Duration) runView {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v := e.getRun(id)
		if execution.Terminal(v.Status) {
			return v
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s still %s after %s; events: %v", id, v.Status, timeout, e.eventTypes(id))
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// eventView is one event of GET /v1/runs/{id}/events.
type eventView struct {
	Seq           int64           `json:"seq"`
	Type          string          `json:"type"`
	SchemaVersion int             `json:"schemaVersion"`
	At            time.Time       `json:"at"`
	NodeID        string          `json:"nodeId"`
	Attempt       int             `json:"attempt"`
	Data          json.RawMessage `json:"data"`
	PrevHash      string          `json:"prevHash"`
	Hash          string          `json:"hash"`
}

// events reads the whole event log through the API, page by page.
func (e *env) events(id string) []eventView {
	e.t.Helper()
	var all []eventView
	cursor := ""
	for {
		path := "/v1/runs/" + id + "/events?limit=500"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		res := e.do(http.MethodGet, path, e.token, nil)
		require.Equal(e.t, http.StatusOK, res.Status, "%s", res.Body)
		var page struct {
			Events     []eventView `json:"events"`
			NextCursor *string     `json:"nextCursor"`
		}
		require.NoError(e.t, json.Unmarshal(res.Body, &page))
		all = append(all, page.Events...)
		if page.NextCursor == nil {
			return all
		}
		cursor = *page.NextCursor
	}
}

// eventTypes renders the log as "type node" lines (node omitted for run events).
func (e *env) eventTypes(id string) []string {
	e.t.Helper()
	var out []string
	for _, ev := range e.events(id) {
		s := ev.Type
		if ev.NodeID != "" {
			s += " " + ev.NodeID
		}
		out = append(out, s)
	}
	return out
}

// checkChain verifies the stored chain and that seq runs 1..n without gaps
// or duplicates, as the API serves it.
func (e *env) checkChain(id string) {
	e.t.Helper()
	require.NoError(e.t, e.st.VerifyChain(context.Background(), e.tenant, id))
	prev := ""
	for i, ev := range e.events(id) {
		require.Equal(e.t, int64(i+1), ev.Seq, "seq gap or duplicate in run %s", id)
		require.Equal(e.t, prev, ev.PrevHash, "prevHash of seq %d", ev.Seq)
		require.Equal(e.t, 1, ev.SchemaVersion)
		prev = ev.Hash
	}
}
