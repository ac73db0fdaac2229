package bridges_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/internal/testinfra/inproc"
	"github.com/weftworks/weft/publication"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/variables"
	"github.com/weftworks/weft/worker"
)

func TestMain(m *testing.M) { testinfra.Main(m) }

const jwtSecret = "bridges-test-secret-0123456789abcdef"

// itemGraph is input → core.echo@1 → output; notesGraph writes a note, so
// its runs need notes.write.
const itemGraph, notesGraph = testinfra.ItemGraph, testinfra.NotesGraph

// env is one test's world: a fresh database, the shared dev server, a task
// queue of its own polled by an in-process worker registering exactly what
// production registers, the API in process, and tenants no other test uses.
type env struct {
	t       *testing.T
	st      *store.Store
	tc      client.Client
	queue   string
	keys    *auth.Keys
	e       *echo.Echo
	starter *starter.Starter
	// vars is the wiring's variable registry (templated schedule input).
	vars *variables.Registry
	// tenant and other are two tenants; token is alice's in tenant with
	// every scope, otherToken mallory's in other with every scope.
	tenant, other     string
	token, otherToken string
	log               *slog.Logger
}

func newEnv(t *testing.T) *env {
	t.Helper()
	_, tc := testinfra.SharedClient(t)
	st := testinfra.NewStore(t)
	v := &env{t: t, st: st, tc: tc, queue: "bridges-" + uuid.NewString(),
		tenant: "tenant-" + uuid.NewString()[:8], other: "other-" + uuid.NewString()[:8],
		log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))}
	v.keys = testinfra.Keys(t, jwtSecret)
	w, err := inproc.Wire(st)
	require.NoError(t, err)
	v.vars = w.Variables
	v.starter, err = starter.New(starter.Deps{Store: st, Temporal: tc, TaskQueue: v.queue, Namespace: "default", Logger: v.log,
		Resolver: w.Resolver})
	require.NoError(t, err)

	// The production registration: interpreter, ScheduledEnqueue, node
	// activities and the schedule-firing activity, over the same wiring.
	inproc.Worker(t, worker.Deps{
		Config: config.Config{TaskQueue: v.queue, TemporalNamespace: "default"},
		Store:  st, Temporal: tc, Logger: v.log, Variables: v.vars, Starter: v.starter,
	})

	// No Deps.Bridges: inproc builds the service as the app does from the
	// config (task queue; WebhookKey empty, so derived from the JWT secret).
	cfg := config.Config{TaskQueue: v.queue, TemporalNamespace: "default"}
	v.e = inproc.API(t, api.Deps{Config: cfg, Store: st, Keys: v.keys, Temporal: tc, Starter: v.starter,
		Variables: v.vars, Publication: inproc.Publication(t, st, &publication.Resolver{}), Logger: v.log})
	v.token = v.mint(v.tenant, "alice", auth.AllScopes...)
	v.otherToken = v.mint(v.other, "mallory", auth.AllScopes...)
	return v
}

func (v *env) mint(tenant, sub string, scopes ...string) string {
	v.t.Helper()
	return testinfra.Token(v.t, v.keys, tenant, sub, scopes...)
}

type response = testinfra.Response

// request sends one request through the API in process.
func (v *env) request(req *http.Request) response { return testinfra.Serve(v.e, req) }

// do sends a request with a bearer token (none when empty); body is
// marshalled unless it is a string or []byte.
func (v *env) do(method, path, token string, body any) response {
	v.t.Helper()
	return v.request(testinfra.NewRequest(v.t, method, path, token, body))
}

// publish creates workflow key with doc through the API and publishes it.
func (v *env) publish(key, doc string) {
	v.t.Helper()
	res := v.do(http.MethodPost, "/v1/workflows", v.token, map[string]any{"key": key, "graph": json.RawMessage(doc)})
	require.Equal(v.t, http.StatusCreated, res.Status, "create: %s", res.Body)
	res = v.do(http.MethodPost, "/v1/workflows/"+key+"/publish", v.token, map[string]any{"expectedRevision": 1})
	require.Equal(v.t, http.StatusCreated, res.Status, "publish: %s", res.Body)
}

// runs lists the tenant's runs of key, oldest first.
func (v *env) runs(key string) []store.Run {
	v.t.Helper()
	rs, err := v.st.ListRuns(context.Background(), v.tenant, store.RunFilter{WorkflowKey: key, Limit: 1000})
	require.NoError(v.t, err)
	for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
		rs[i], rs[j] = rs[j], rs[i]
	}
	return rs
}

// countRuns counts every run row of the database (all tenants).
func (v *env) countRuns() int {
	v.t.Helper()
	var n int
	require.NoError(v.t, v.st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM runs`).Scan(&n))
	return n
}

// idempotencyKeys returns the idempotency keys bound to runs of key.
func (v *env) idempotencyKeys(key string) map[string]string {
	v.t.Helper()
	rows, err := v.st.Pool.Query(context.Background(),
		`SELECT idempotency_key, run_id FROM idempotency_bindings WHERE tenant_id = $1 AND workflow_key = $2`, v.tenant, key)
	require.NoError(v.t, err)
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, r string
		require.NoError(v.t, rows.Scan(&k, &r))
		out[k] = r
	}
	require.NoError(v.t, rows.Err())
	return out
}

// eventually polls cond every 100 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		require.False(t, time.Now().After(deadline), "timed out after %s waiting for %s", timeout, what)
		time.Sleep(100 * time.Millisecond)
	}
}

// revoke withdraws scope from sub's service actors through
// POST /v1/revocations, as the holder of token.
func (v *env) revoke(token, sub, scope string) response {
	v.t.Helper()
	return v.do(http.MethodPost, "/v1/revocations", token, map[string]any{"sub": sub, "scope": scope})
}

// unrevoke removes a revocation through DELETE /v1/revocations/{sub}/{scope}.
func (v *env) unrevoke(token, sub, scope string) response {
	v.t.Helper()
	return v.do(http.MethodDelete, "/v1/revocations/"+url.PathEscape(sub)+"/"+url.PathEscape(scope), token, nil)
}
