package catalog_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/internal/testinfra"
)

func builtinRegistry(t *testing.T, d catalog.BuiltinDeps) *catalog.Registry {
	t.Helper()
	r, err := catalog.NewRegistry(catalog.Builtins(d)...)
	require.NoError(t, err)
	return r
}

func call(t *testing.T, r *catalog.Registry, id string, c catalog.Call) (json.RawMessage, error) {
	t.Helper()
	a, ok := r.Lookup(id, 1)
	require.True(t, ok, "%s@1 not registered", id)
	return a.Handler(context.Background(), c)
}

func appErr(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	var ae *temporal.ApplicationError
	require.ErrorAs(t, err, &ae, "err = %v, want an application error", err)
	return ae
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	r := builtinRegistry(t, catalog.BuiltinDeps{})
	got := r.Contracts()
	require.Len(t, got, 5, "contracts %v", got)
	require.Equal(t, "core.echo", got[0].ID, "contracts %v", got)
	require.Equal(t, "workspace.notes.write", got[4].ID, "contracts %v", got)
	_, ok := r.Lookup("core.echo", 2)
	require.False(t, ok, "core.echo@2 should not resolve")
	h, ok := r.Hash("core.echo", 1)
	require.True(t, ok)
	require.Equal(t, catalog.ContractHash(catalog.EchoV1), h, "the hash every attempt compares with its pinned one")
	_, ok = r.Hash("core.echo", 2)
	require.False(t, ok)
	dup := catalog.Action{Contract: catalog.EchoV1, Handler: func(context.Context, catalog.Call) (json.RawMessage, error) { return nil, nil }}
	_, err := catalog.NewRegistry(append(catalog.Builtins(catalog.BuiltinDeps{}), dup)...)
	require.Error(t, err, "duplicate id@version accepted")
	_, err = catalog.NewRegistry(catalog.Action{Contract: catalog.EchoV1})
	require.Error(t, err, "missing handler accepted")
	bad := catalog.EchoV1
	bad.InputSchema = json.RawMessage(`{"type":7}`)
	_, err = catalog.NewRegistry(catalog.Action{Contract: bad, Handler: dup.Handler})
	require.Error(t, err, "uncompilable schema accepted")
}

func TestContractHashMatchesPublication(t *testing.T) {
	t.Parallel()
	doc, err := graph.Decode([]byte(`{"schemaVersion":1,"nodes":[
		{"id":"in","kind":"input","outputs":{"out":"any"}},
		{"id":"a","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"core.echo","version":1}},
		{"id":"out","kind":"output","inputs":{"in":"any"}}],
		"edges":[{"from":"in.out","to":"a.in"},{"from":"a.out","to":"out.in"}]}`))
	require.NoError(t, err)
	c, issues := graph.Compile(doc, graph.NewStaticCatalog(catalog.BuiltinContracts(), nil))
	require.Empty(t, issues, issues)
	require.Equal(t, catalog.ContractHash(catalog.EchoV1), c.Actions[0].Hash, "pinned %s, catalog %s", c.Actions[0].Hash, catalog.ContractHash(catalog.EchoV1))
	changed := catalog.EchoV1
	changed.TimeoutMs++
	require.NotEqual(t, catalog.ContractHash(catalog.EchoV1), catalog.ContractHash(changed), "hash ignores content")
}

func TestEcho(t *testing.T) {
	t.Parallel()
	r := builtinRegistry(t, catalog.BuiltinDeps{})
	out, err := call(t, r, "core.echo", catalog.Call{Input: json.RawMessage(`{"a":[1,2]}`)})
	require.NoError(t, err, "%s", out)
	require.Equal(t, `{"a":[1,2]}`, string(out), "%s %v", out, err)
}

func TestFailUntilAttempt(t *testing.T) {
	t.Parallel()
	r := builtinRegistry(t, catalog.BuiltinDeps{})
	in := json.RawMessage(`{"untilAttempt":3,"value":{"ok":true}}`)
	for attempt := 1; attempt <= 4; attempt++ {
		out, err := call(t, r, "core.fail", catalog.Call{Attempt: attempt, Input: in})
		if attempt < 3 {
			ae := appErr(t, err)
			require.False(t, ae.NonRetryable(), "attempt %d: %v (nonRetryable=%v)", attempt, err, ae.NonRetryable())
			require.Equal(t, execution.ErrActionFailed, ae.Type(), "attempt %d: %v (nonRetryable=%v)", attempt, err, ae.NonRetryable())
			continue
		}
		require.NoError(t, err, "attempt %d: %s", attempt, out)
		require.Equal(t, `{"ok":true}`, string(out), "attempt %d: %s %v", attempt, out, err)
	}
}

func TestSleepHeartbeatsAndReturns(t *testing.T) {
	t.Parallel()
	r := builtinRegistry(t, catalog.BuiltinDeps{})
	var beats atomic.Int32
	out, err := call(t, r, "core.sleep", catalog.Call{Input: json.RawMessage(`{"ms":30}`), Heartbeat: func(...any) { beats.Add(1) }})
	require.NoError(t, err, "%s", out)
	require.Equal(t, `{"sleptMs":30}`, string(out), "%s %v", out, err)
	require.GreaterOrEqual(t, beats.Load(), int32(1), "no heartbeat")
}

func TestSleepCancellationReturnsPromptly(t *testing.T) {
	t.Parallel()
	r := builtinRegistry(t, catalog.BuiltinDeps{})
	a, _ := r.Lookup("core.sleep", 1)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := a.Handler(ctx, catalog.Call{Input: json.RawMessage(`{"ms":60000}`)})
	require.ErrorIs(t, err, context.Canceled, "err = %v", err)
	d := time.Since(start)
	require.LessOrEqual(t, d, time.Second, "returned after %v", d)
}

func TestNotesWriteOncePerKey(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	r := builtinRegistry(t, catalog.BuiltinDeps{Notes: st})
	actor := execution.Actor{Kind: "service", Sub: "webhook:whk_a", ConfiguredBy: "ada"}
	c := catalog.Call{TenantID: "t1", RunID: "r1", NodeID: "save", IdempotencyKey: "t1/r1/save",
		Actor: actor, RequestedBy: actor.RequestedBy(),
		Input: json.RawMessage(`{"title":"T","body":{"b":1,"a":2}}`)}
	var first string
	for attempt := 1; attempt <= 3; attempt++ {
		c.Attempt = attempt
		if attempt == 2 {
			c.Input = json.RawMessage(`{ "body": {"a":2.0,"b":1}, "title": "T" }`) // same content, other spelling
		}
		out, err := call(t, r, "workspace.notes.write", c)
		require.NoError(t, err)
		var res struct{ NoteID string }
		_ = json.Unmarshal(out, &res)
		if first == "" {
			first = res.NoteID
		}
		require.Equal(t, first, res.NoteID, "attempt %d wrote another note %s", attempt, res.NoteID)
	}
	notes, err := st.ListNotes(context.Background(), "t1", 10, nil)
	require.NoError(t, err, "%d notes,", len(notes))
	require.Len(t, notes, 1, "%d notes, %v", len(notes), err)
	// The note records who acted: the webhook's service actor and the user
	// who configured it.
	require.NotNil(t, notes[0].Actor, "note author %+v %q", notes[0].Actor, notes[0].RequestedBy)
	require.True(t, *notes[0].Actor == actor, "note author %+v %q", notes[0].Actor, notes[0].RequestedBy)
	require.Equal(t, "ada", notes[0].RequestedBy, "note author %+v %q", notes[0].Actor, notes[0].RequestedBy)
	c.Input = json.RawMessage(`{"title":"other","body":1}`)
	_, err = call(t, r, "workspace.notes.write", c)
	ae := appErr(t, err)
	require.True(t, ae.NonRetryable(), "conflict: %v", err)
	require.Equal(t, execution.ErrIdempotencyConflict, ae.Type(), "conflict: %v", err)
	c.IdempotencyKey = ""
	_, err = call(t, r, "workspace.notes.write", c)
	require.True(t, appErr(t, err).NonRetryable(), "unkeyed write not refused")
	// Nor is an unattributed one written.
	anon := c
	anon.IdempotencyKey, anon.Actor, anon.Input = "t1/r1/anon", execution.Actor{}, json.RawMessage(`{"title":"A","body":1}`)
	_, err = call(t, r, "workspace.notes.write", anon)
	require.True(t, appErr(t, err).NonRetryable(), "unattributed write not refused")
	// Without a store the action is unavailable, never a fake success.
	none := builtinRegistry(t, catalog.BuiltinDeps{})
	_, err = call(t, none, "workspace.notes.write", c)
	require.Equal(t, execution.ErrActionUnavailable, appErr(t, err).Type(), "no store: %v", err)
}

func TestHTTPFetchBounded(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/big":
			_, _ = w.Write([]byte(strings.Repeat("x", catalog.MaxFetchBytes+100)))
		case "/slow":
			select {
			case <-req.Context().Done():
			case <-time.After(5 * time.Second):
			}
		case "/down":
			w.WriteHeader(http.StatusBadGateway)
		default:
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("hello"))
		}
	}))
	defer srv.Close()
	r := builtinRegistry(t, catalog.BuiltinDeps{})
	fetch := func(ctx context.Context, u string) (map[string]any, error) {
		a, _ := r.Lookup("core.http.fetch", 1)
		in, _ := json.Marshal(map[string]string{"url": u})
		out, err := a.Handler(ctx, catalog.Call{Input: in})
		if err != nil {
			return nil, err
		}
		var m map[string]any
		return m, json.Unmarshal(out, &m)
	}
	m, err := fetch(context.Background(), srv.URL+"/hello")
	require.NoError(t, err, "%v", m)
	require.True(t, m["body"] == "hello", "%v %v", m, err)
	require.True(t, m["status"] == 200.0, "%v %v", m, err)
	require.True(t, m["truncated"] == false, "%v %v", m, err)
	m, err = fetch(context.Background(), srv.URL+"/big")
	require.NoError(t, err, "big: truncated=%v bytes=%v", m["truncated"], m["bytes"])
	require.True(t, m["truncated"] == true, "big: truncated=%v bytes=%v %v", m["truncated"], m["bytes"], err)
	require.True(t, m["bytes"] == float64(catalog.MaxFetchBytes), "big: truncated=%v bytes=%v %v", m["truncated"], m["bytes"], err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = fetch(ctx, srv.URL+"/slow")
	require.ErrorIs(t, err, context.DeadlineExceeded, "slow: %v after %v", err, time.Since(start))
	require.LessOrEqual(t, time.Since(start), time.Duration(2*time.Second), "slow: %v after %v", err, time.Since(start))
	_, err = fetch(context.Background(), srv.URL+"/down")
	require.False(t, appErr(t, err).NonRetryable(), "5xx should be retryable")
	_, err = fetch(context.Background(), "file:///etc/passwd")
	require.True(t, appErr(t, err).NonRetryable(), "file URL should be refused")
}
