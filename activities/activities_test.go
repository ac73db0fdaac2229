package activities_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/activities"
	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/revcache"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/variables"
)

const tenant = "tenant-1"

// bundle is one test's world: a fresh database, a compiled revision stored
// in it, and an activity environment running the registered activities.
type bundle struct {
	t        testing.TB
	st       *store.Store
	env      *testsuite.TestActivityEnvironment
	checksum string
	// cache is the activities' revocation cache (withRevocationCache).
	cache *revcache.Cache
}

type option func(*setup)

type setup struct {
	extra   []catalog.Action
	actions []catalog.Action // replaces the built-ins when set
	// lazy, when set, builds the worker's actions from the bundle's store.
	lazy   func(*store.Store) []catalog.Action
	agents []graph.AgentContract
	// edit changes the compiled revision before it is stored, to build
	// revisions publication would refuse.
	edit func(*graph.Compiled)
	// drain is the worker's drain window (activities.Deps.Drain).
	drain time.Duration
	// revocationCache runs a revcache.Cache on the bundle's store as the
	// activities' revocation source (activities.Deps.Revocations).
	revocationCache bool
}

func withActions(a ...catalog.Action) option {
	return func(s *setup) { s.extra = append(s.extra, a...) }
}

// withRegistry makes the worker register exactly actions, whatever was pinned.
func withRegistry(a ...catalog.Action) option { return func(s *setup) { s.actions = a } }

// withLazyRegistry makes the worker register what build returns for the bundle's store.
func withLazyRegistry(build func(*store.Store) []catalog.Action) option {
	return func(s *setup) { s.lazy = build }
}

func withEdit(f func(*graph.Compiled)) option { return func(s *setup) { s.edit = f } }

func withDrain(d time.Duration) option { return func(s *setup) { s.drain = d } }

func withRevocationCache() option { return func(s *setup) { s.revocationCache = true } }

func withAgent(a graph.AgentContract) option {
	return func(s *setup) { s.agents = append(s.agents, a) }
}

// newBundle compiles doc (JSON) against the built-in contracts (plus extra
// ones), stores it with store.PutCompiled and registers the activities.
func newBundle(t testing.TB, doc string, opts ...option) *bundle {
	t.Helper()
	var s setup
	for _, o := range opts {
		o(&s)
	}
	st := testinfra.NewStore(t)
	actions := append(catalog.Builtins(catalog.BuiltinDeps{Notes: st}), s.extra...)
	if s.actions != nil {
		actions = s.actions
	}
	if s.lazy != nil {
		actions = s.lazy(st)
	}
	reg, err := catalog.NewRegistry(actions...)
	require.NoError(t, err)
	contracts := catalog.BuiltinContracts()
	for _, a := range s.extra {
		contracts = append(contracts, a.Contract)
	}
	d, err := graph.Decode([]byte(doc))
	require.NoError(t, err)
	c, issues := graph.Compile(d, graph.NewStaticCatalog(contracts, s.agents))
	require.Empty(t, issues, "compile: %v", issues)
	if s.edit != nil {
		s.edit(c)
	}
	p := c.Plan()
	require.NoError(t, st.PutCompiled(context.Background(), tenant, c, &p))
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	// The production dependencies: the built-in variable registry over the
	// store, and an agent runtime with the sim provider only.
	vars, err := variables.Builtin(st)
	require.NoError(t, err)
	rt, err := agents.New(agents.Deps{Store: st, Actions: reg, Variables: vars})
	require.NoError(t, err)
	b := &bundle{t: t, st: st, env: env, checksum: c.Checksum}
	var revocations activities.RevocationSource
	if s.revocationCache {
		b.cache = runRevocationCache(t, st)
		revocations = b.cache
	}
	require.NoError(t, activities.Register(env, activities.Deps{Store: st, Actions: reg, Variables: vars, Agents: rt, Drain: s.drain,
		Revocations: revocations}))
	return b
}

func (b *bundle) input(node string, kind graph.Kind, inputs map[string]string) execution.NodeInput {
	vals := map[string]execution.Value{}
	for port, raw := range inputs {
		vals[port] = execution.Value{Inline: json.RawMessage(raw)}
	}
	return execution.NodeInput{
		TenantID: tenant, RunID: "run-1", WorkflowKey: "wf", Checksum: b.checksum, Mode: execution.ModeLive,
		NodeID: node, Kind: kind, Attempt: 1, Inputs: vals,
		Actor:        execution.Actor{Kind: "user", Sub: "ada", Name: "Ada Lovelace", Email: "ada@example.com"},
		Permissions:  []string{"notes.write"},
		TenantName:   "Acme",
		RunStartedAt: time.Date(2026, 11, 30, 23, 30, 0, 0, time.FixedZone("X", -3600)),
	}
}

// runNode runs an attempt as the interpreter does, under its kind's
// activity type (execution.NodeActivity); a kind without one goes to the
// shared weft.RunNode, as runs recorded before per-kind types do.
func (b *bundle) runNode(in execution.NodeInput) (execution.NodeResult, error) {
	b.t.Helper()
	return b.runAs(in, execution.ActivityRunNode)
}

func (b *bundle) runAs(in execution.NodeInput, shared string) (execution.NodeResult, error) {
	b.t.Helper()
	name, ok := execution.NodeActivity(in.Kind)
	if !ok {
		name = shared
	}
	return b.runNamed(name, in)
}

func (b *bundle) runNamed(name string, in execution.NodeInput) (execution.NodeResult, error) {
	b.t.Helper()
	v, err := b.env.ExecuteActivity(name, in)
	var res execution.NodeResult
	if err == nil {
		err = v.Get(&res)
	}
	return res, err
}

func (b *bundle) runLocal(in execution.NodeInput) (execution.NodeResult, error) {
	b.t.Helper()
	// The test environment runs local activities only by function value;
	// by name they run as regular activities, which is the same code.
	return b.runAs(in, execution.ActivityRunLocalNode)
}

// value returns a result's JSON, loading a claim-checked one.
func (b *bundle) value(v execution.Value) string {
	b.t.Helper()
	if v.Ref == nil {
		return string(v.Inline)
	}
	raw, err := b.st.GetValue(context.Background(), tenant, "run-1", *v.Ref)
	require.NoError(b.t, err)
	return string(raw)
}

// wantAppErr asserts err is an application error of type typ with the given retryability.
func wantAppErr(t *testing.T, err error, typ string, nonRetryable bool) *temporal.ApplicationError {
	t.Helper()
	var ae *temporal.ApplicationError
	require.ErrorAs(t, err, &ae, "err = %v, want application error %s", err, typ)
	require.Equal(t, typ, ae.Type(), "err type %s nonRetryable=%v (%v), want %s nonRetryable=%v", ae.Type(), ae.NonRetryable(), err, typ, nonRetryable)
	require.Equal(t, nonRetryable, ae.NonRetryable(), "err type %s nonRetryable=%v (%v), want %s nonRetryable=%v", ae.Type(), ae.NonRetryable(), err, typ, nonRetryable)
	return ae
}

const localDoc = `{"schemaVersion":1,
 "schemas":{"Item":{"type":"object","required":["id"],"properties":{"id":{"type":"string"},"n":{"type":"number"}}}},
 "nodes":[
  {"id":"in","kind":"input","outputs":{"out":"any"}},
  {"id":"g","kind":"gate","inputs":{"in":"any"},"outputs":{"pass":"any","fail":"any"},"language":"cel/v1","expression":"input.n > 3"},
  {"id":"v","kind":"validator","inputs":{"in":"any"},"outputs":{"pass":"any","fail":"any"},"schema":"Item"},
  {"id":"m","kind":"merge","inputs":{"left":"any","right":"any"},"outputs":{"out":"any"}},
  {"id":"out","kind":"output","inputs":{"in":"any"}}],
 "edges":[{"from":"in.out","to":"g.in"},{"from":"g.pass","to":"v.in"},{"from":"v.pass","to":"m.left"},
  {"from":"g.fail","to":"m.right"},{"from":"m.out","to":"out.in"}]}`

func TestGatePassAndFail(t *testing.T) {
	t.Parallel()
	b := newBundle(t, localDoc)
	res, err := b.runLocal(b.input("g", graph.KindGate, map[string]string{"in": `{"id":"a","n":5}`}))
	require.NoError(t, err, "pass: %+v", res)
	require.Equal(t, "pass", res.Port, "pass: %+v %v", res, err)
	require.Equal(t, `{"id":"a","n":5}`, b.value(res.Value), "pass: %+v %v", res, err)
	res, err = b.runLocal(b.input("g", graph.KindGate, map[string]string{"in": `{"id":"a","n":1}`}))
	require.NoError(t, err, "fail: %+v", res)
	require.Equal(t, "fail", res.Port, "fail: %+v %v", res, err)
	require.Equal(t, `{"id":"a","n":1}`, b.value(res.Value), "fail: %+v %v", res, err)
	// A missing field is an evaluation error: permanent, never retried.
	_, err = b.runLocal(b.input("g", graph.KindGate, map[string]string{"in": `{"id":"a"}`}))
	wantAppErr(t, err, execution.ErrExpressionFailed, true)
}

// Runs recorded before per-kind activity types name the shared
// weft.RunLocalNode and weft.RunNode; workers still run them.
func TestSharedActivityNamesStillRun(t *testing.T) {
	t.Parallel()
	b := newBundle(t, localDoc)
	res, err := b.runNamed(execution.ActivityRunLocalNode, b.input("g", graph.KindGate, map[string]string{"in": `{"id":"a","n":5}`}))
	require.NoError(t, err, "gate as %s: %+v", execution.ActivityRunLocalNode, res)
	require.Equal(t, "pass", res.Port, "gate as %s: %+v %v", execution.ActivityRunLocalNode, res, err)
	n := newBundle(t, actionDoc, withActions(badAction))
	res, err = n.runNamed(execution.ActivityRunNode, n.input("echo", graph.KindAction, map[string]string{"in": `{"id":"a"}`}))
	require.NoError(t, err, "action as %s: %+v", execution.ActivityRunNode, res)
	require.Equal(t, "out", res.Port, "action as %s: %+v %v", execution.ActivityRunNode, res, err)
}

func TestValidatorPassAndFail(t *testing.T) {
	t.Parallel()
	b := newBundle(t, localDoc)
	res, err := b.runLocal(b.input("v", graph.KindValidator, map[string]string{"in": `{"id":"a"}`}))
	require.NoError(t, err, "pass: %+v", res)
	require.Equal(t, "pass", res.Port, "pass: %+v %v", res, err)
	require.Equal(t, `{"id":"a"}`, b.value(res.Value), "pass: %+v %v", res, err)
	res, err = b.runLocal(b.input("v", graph.KindValidator, map[string]string{"in": `{"n":"x"}`}))
	require.NoError(t, err, "fail: %+v", res)
	require.Equal(t, "fail", res.Port, "fail: %+v %v", res, err)
	var failed struct {
		Value  map[string]any
		Errors []activities.SchemaError
	}
	require.NoError(t, json.Unmarshal([]byte(b.value(res.Value)), &failed))
	require.True(t, failed.Value["n"] == "x", "fail value: %+v", failed)
	require.Len(t, failed.Errors, 2, "fail value: %+v", failed)
	paths := failed.Errors[0].Path + " " + failed.Errors[1].Path
	require.Contains(t, paths, "/n", "errors: %+v", failed.Errors)
	require.Contains(t, failed.Errors[0].Message+failed.Errors[1].Message, "id", "errors: %+v", failed.Errors)
}

func TestMergeWithDeadInput(t *testing.T) {
	t.Parallel()
	b := newBundle(t, localDoc)
	res, err := b.runLocal(b.input("m", graph.KindMerge, map[string]string{"left": `{"id":"a"}`}))
	require.NoError(t, err, "merge: %+v", res)
	require.Equal(t, "out", res.Port, "merge: %+v %v", res, err)
	require.Equal(t, `{"left":{"id":"a"}}`, b.value(res.Value), "merge: %+v %v", res, err)
	res, err = b.runLocal(b.input("m", graph.KindMerge, map[string]string{"left": `1`, "right": `[2]`}))
	require.NoError(t, err, "merge both: %+v", res)
	require.Equal(t, `{"left":1,"right":[2]}`, b.value(res.Value), "merge both: %+v %v", res, err)
	// A claim-checked input is loaded; a large result is claim-checked.
	big, _ := json.Marshal(strings.Repeat("x", activities.InlineValueLimit))
	ref, err := b.st.PutValue(context.Background(), tenant, "run-1", "v", "pass", big)
	require.NoError(t, err)
	in := b.input("m", graph.KindMerge, map[string]string{"right": `2`})
	in.Inputs["left"] = execution.Value{Ref: &ref}
	res, err = b.runLocal(in)
	require.NoError(t, err, "merge of a reference: %+v", res)
	require.NotNil(t, res.Value.Ref, "merge of a reference: %+v %v", res, err)
	var merged map[string]any
	err = json.Unmarshal([]byte(b.value(res.Value)), &merged)
	require.NoError(t, err, "merged")
	require.True(t, merged["right"] == 2.0, "merged %v", err)
	require.Len(t, merged["left"].(string), activities.InlineValueLimit, "merged %v", err)
}

func TestLocalNodeRefusesUnknownNode(t *testing.T) {
	t.Parallel()
	b := newBundle(t, localDoc)
	_, err := b.runLocal(b.input("nope", graph.KindGate, nil))
	wantAppErr(t, err, execution.ErrNodeNotFound, true)
	_, err = b.runLocal(b.input("g", graph.KindMerge, nil))
	wantAppErr(t, err, execution.ErrNodeNotFound, true)
}

func TestLoadPlan(t *testing.T) {
	t.Parallel()
	b := newBundle(t, localDoc)
	v, err := b.env.ExecuteActivity(execution.ActivityLoadPlan, execution.LoadPlanInput{TenantID: tenant, Checksum: b.checksum})
	require.NoError(t, err)
	var p graph.Plan
	err = v.Get(&p)
	require.NoError(t, err, "plan %+v", p)
	require.Equal(t, b.checksum, p.Checksum, "plan %+v %v", p, err)
	require.Len(t, p.Nodes, 5, "plan %+v %v", p, err)
	_, err = b.env.ExecuteActivity(execution.ActivityLoadPlan, execution.LoadPlanInput{TenantID: "other", Checksum: b.checksum})
	wantAppErr(t, err, execution.ErrPlanNotFound, true)
}

func TestAppendEventsActivity(t *testing.T) {
	t.Parallel()
	b := newBundle(t, localDoc)
	ctx := context.Background()
	run, _, err := b.st.CreateRun(ctx, store.Run{RunID: "run-1", TenantID: tenant, WorkflowKey: "wf", Checksum: b.checksum,
		Mode: "live", Input: json.RawMessage(`{}`), InputHash: "h", WorkflowID: "weft-x"}, "k")
	require.NoError(t, err)
	in := execution.AppendEventsInput{TenantID: tenant, RunID: run.RunID,
		Events: []execution.EventDraft{{Key: "run-1/run.started/0", Type: execution.EventRunStarted, At: time.Now()}},
		Run:    &execution.RunUpdate{Status: execution.StatusRunning}}
	for range 2 {
		_, err = b.env.ExecuteActivity(execution.ActivityAppendEvents, in)
		require.NoError(t, err)
	}
	ev, _ := b.st.ListEvents(ctx, tenant, run.RunID, 0, 10)
	got, _ := b.st.GetRun(ctx, tenant, run.RunID)
	require.Len(t, ev, 1, "%d events, status %s", len(ev), got.Status)
	require.Equal(t, execution.StatusRunning, got.Status, "%d events, status %s", len(ev), got.Status)
	in.Events[0].Type = "Not A Type"
	in.Events[0].Key = "other"
	_, err = b.env.ExecuteActivity(execution.ActivityAppendEvents, in)
	wantAppErr(t, err, execution.ErrAppendRefused, true)
	in.RunID = "missing"
	in.Events[0].Type = "run.started"
	_, err = b.env.ExecuteActivity(execution.ActivityAppendEvents, in)
	wantAppErr(t, err, execution.ErrAppendRefused, true)
}

// TestRegisterRequiresItsDependencies: Register defaults none of the
// process's wiring; a missing dependency is an error naming it, never a
// panic.
func TestRegisterRequiresItsDependencies(t *testing.T) {
	st := testinfra.NewStore(t)
	reg, err := catalog.NewRegistry(catalog.Builtins(catalog.BuiltinDeps{Notes: st})...)
	require.NoError(t, err)
	vars, err := variables.Builtin(st)
	require.NoError(t, err)
	rt, err := agents.New(agents.Deps{Store: st, Actions: reg, Variables: vars})
	require.NoError(t, err)
	var suite testsuite.WorkflowTestSuite
	for missing, d := range map[string]activities.Deps{
		"Store":     {Actions: reg, Variables: vars, Agents: rt},
		"Actions":   {Store: st, Variables: vars, Agents: rt},
		"Variables": {Store: st, Actions: reg, Agents: rt},
		"Agents":    {Store: st, Actions: reg, Variables: vars},
	} {
		err := activities.Register(suite.NewTestActivityEnvironment(), d)
		assert.False(t, err == nil || !strings.Contains(err.Error(), missing), "Register without %s = %v, want an error naming it", missing, err)
	}
}
