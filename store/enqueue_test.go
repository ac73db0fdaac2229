package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// sentStatements records every statement a pool sends (BEGIN and COMMIT
// included): each is one round trip.
type sentStatements struct {
	mu   sync.Mutex
	sent []string
}

func (s *sentStatements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, strings.Join(strings.Fields(d.SQL), " "))
	return ctx
}

func (s *sentStatements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *sentStatements) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sent
	s.sent = nil
	return out
}

// TestEnqueueRunIsOneStatement pins the round trips of EnqueueRun (issue
// 14): a live run no limit applies to, a simulation and a repeated key
// are each one statement, with no transaction around it. A capped run
// costs that statement (refused, writing nothing) and then a transaction.
func TestEnqueueRunIsOneStatement(t *testing.T) {
	t.Parallel()
	rec := &sentStatements{}
	cfg, err := pgxpool.ParseConfig(testinfra.NewDatabase(t))
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := &store.Store{Pool: pool}
	ctx := context.Background()
	for _, k := range []string{"wf", "capped"} {
		_, err := st.CreateWorkflow(ctx, "t1", k, json.RawMessage(`{"schemaVersion":1}`), "ada")
		require.NoError(t, err)
	}
	_, _, err = st.SetWorkflowLimits(ctx, store.WorkflowLimits{TenantID: "t1", WorkflowKey: "capped", MaxConcurrentRuns: ptr(5),
		UpdatedBy: "ada"})
	require.NoError(t, err)
	rec.take()

	oneStatement := func(what string) {
		t.Helper()
		sent := rec.take()
		require.Len(t, sent, 1, "%s: %q", what, sent)
		require.Contains(t, sent[0], "weft_enqueue_run", "%s: %q", what, sent)
	}
	live := newRunValue("t1", "wf", "k1")
	e, err := st.EnqueueRun(ctx, live, "k1")
	require.NoError(t, err)
	require.True(t, e.Created)
	require.Equal(t, execution.StatusQueued, e.Run.Status)
	require.Equal(t, []string{live.RunID}, ids(e.Admitted))
	oneStatement("a new live run")

	again, err := st.EnqueueRun(ctx, newRunValue("t1", "wf", "k1"), "k1")
	require.NoError(t, err)
	require.False(t, again.Created)
	require.Equal(t, live.RunID, again.Run.RunID)
	require.Empty(t, again.Admitted)
	oneStatement("a repeated key")

	sim := newRunValue("t1", "capped", "s1")
	sim.Mode = string(execution.ModeSimulation)
	e, err = st.EnqueueRun(ctx, sim, "s1")
	require.NoError(t, err)
	require.True(t, e.Created)
	require.Equal(t, execution.StatusQueued, e.Run.Status)
	oneStatement("a simulation of a capped workflow")

	capped := newRunValue("t1", "capped", "c1")
	e, err = st.EnqueueRun(ctx, capped, "c1")
	require.NoError(t, err)
	require.True(t, e.Created)
	require.Equal(t, execution.StatusQueued, e.Run.Status, "a slot is free")
	require.Equal(t, []string{capped.RunID}, ids(e.Admitted))
	sent := rec.take()
	require.Contains(t, sent[0], "weft_enqueue_run", "a capped run: %q", sent)
	require.Equal(t, "begin", strings.ToLower(sent[1]), "a capped run: %q", sent)
	require.Contains(t, sent[2], "weft_enqueue_run", "a capped run: %q", sent)
}

// The run EnqueueRun answers with is the row GetRun reads, in every
// outcome: weft_enqueue_run computes runColumns itself.
func TestEnqueueRunAnswersTheStoredRow(t *testing.T) {
	t.Parallel()
	w := newLimitsWorld(t, "wf", "capped")
	w.setWorkflow("capped", ptr(1), nil)
	ctx := context.Background()
	full := newRunValue(w.tenant, "wf", "full")
	full.DraftRevision = ptr(3)
	full.Fixtures = json.RawMessage(`{"a":{"out":1}}`)
	full.Usage = json.RawMessage(`{"tokens":0}`)
	full.TenantName = "Acme"
	full.ToolGrants = []string{}
	full.ToolPolicy = []string{"core.echo@1"}
	full.RequestedBudget = &store.Budget{MaxTokens: ptr(int64(100))}
	full.Budget = store.Budget{MaxTokens: ptr(int64(100)), MaxCostUSD: ptr(1.5)}
	full.Actor = execution.Actor{Kind: "service", Sub: "schedule:s", ConfiguredBy: "ada"}
	full.Origin = execution.Origin{Kind: "schedule", ID: "s"}

	sim := newRunValue(w.tenant, "capped", "sim")
	sim.Mode = string(execution.ModeSimulation)
	for _, c := range []struct {
		name, idem, status string
		run                store.Run
		created            bool
		position           int
	}{
		{"live, every field", "full", execution.StatusQueued, full, true, 0},
		{"the same key again", "full", execution.StatusQueued, newRunValue(w.tenant, "wf", "full"), false, 0},
		{"capped, admitted", "c1", execution.StatusQueued, newRunValue(w.tenant, "capped", "c1"), true, 0},
		{"capped, waiting", "c2", execution.StatusThrottled, newRunValue(w.tenant, "capped", "c2"), true, 1},
		{"capped, waiting second", "c3", execution.StatusThrottled, newRunValue(w.tenant, "capped", "c3"), true, 2},
		{"a waiting run's key again", "c3", execution.StatusThrottled, newRunValue(w.tenant, "capped", "c3"), false, 2},
		{"a simulation", "sim", execution.StatusQueued, sim, true, 0},
	} {
		e, err := w.st.EnqueueRun(ctx, c.run, c.idem)
		require.NoError(t, err, c.name)
		require.Equal(t, c.created, e.Created, c.name)
		require.Equal(t, c.status, e.Run.Status, c.name)
		require.Equal(t, c.position, e.Run.Position, c.name)
		require.Equal(t, w.run(e.Run.RunID), e.Run, c.name)
		if c.created {
			require.Equal(t, c.run.RunID, e.Run.RunID, c.name)
		}
	}
}

// An enqueue that found no limits, then waited for the tenant's admission
// lock while a change of limits held it, checks again under the lock: the
// cap set meanwhile holds it too (it waits, throttled), and nothing of the
// first attempt is left behind.
func TestEnqueueRunSeesLimitsSetWhileItWaitedForTheLock(t *testing.T) {
	t.Parallel()
	w := newLimitsWorld(t, "wf")
	ctx := context.Background()
	holder := w.enqueue("wf", "live")
	require.Equal(t, execution.StatusQueued, holder.Run.Status)

	// A change of limits in flight: the exclusive lock held, the cap
	// written, not committed yet.
	tx, err := w.st.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::int, hashtext($2))`, 0x77656674, w.tenant)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO workflow_limits (tenant_id, workflow_key, max_concurrent_runs, updated_by)
		VALUES ($1, 'wf', 1, 'ada')`, w.tenant)
	require.NoError(t, err)

	r := newRunValue(w.tenant, "wf", "late")
	got := enqueueBehindAdmissionLock(t, ctx, w.st, tx, func(ctx context.Context) (store.Enqueued, error) {
		return w.st.EnqueueRun(ctx, r, "late")
	})
	require.NoError(t, got.err)
	require.True(t, got.e.Created)
	require.Equal(t, r.RunID, got.e.Run.RunID)
	require.Equal(t, execution.StatusThrottled, got.e.Run.Status, "the cap set while it waited holds it")
	require.Equal(t, 1, got.e.Run.Position)
	require.Empty(t, got.e.Admitted)
	require.Equal(t, map[string]int{"queued": 1, "throttled": 1}, w.statuses("wf"))
	var bindings int
	require.NoError(t, w.st.Pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_bindings WHERE tenant_id = $1 AND idempotency_key = 'late'`,
		w.tenant).Scan(&bindings))
	require.Equal(t, 1, bindings)
}

// Twenty enqueues racing for the last two slots of a cap admit exactly two;
// the rest wait in distinct places. Pairs of them share an idempotency key:
// each pair makes one run, answered to both.
func TestConcurrentEnqueuesForTheLastSlotsAdmitExactlyTheCap(t *testing.T) {
	t.Parallel()
	w := newLimitsWorld(t, "wf")
	w.setWorkflow("wf", ptr(5), nil)
	for range 3 {
		require.Equal(t, execution.StatusQueued, w.enqueue("wf", "live").Run.Status)
	}
	const callers = 20
	results := make([]store.Enqueued, callers)
	errs := make([]error, callers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idem := fmt.Sprint("pair-", i/2)
			<-start
			results[i], errs[i] = w.st.EnqueueRun(context.Background(), newRunValue(w.tenant, "wf", idem), idem)
		}()
	}
	close(start)
	wg.Wait()
	created, admitted := 0, 0
	var positions []int
	for i, e := range results {
		require.NoError(t, errs[i], "caller %d", i)
		if i%2 == 1 {
			require.Equal(t, results[i-1].Run.RunID, e.Run.RunID, "callers %d and %d share a key", i-1, i)
			require.NotEqual(t, results[i-1].Created, e.Created, "callers %d and %d: exactly one created the run", i-1, i)
		}
		if !e.Created {
			continue
		}
		created++
		for _, a := range e.Admitted {
			if a.RunID == e.Run.RunID {
				admitted++
			}
		}
		if e.Run.Status == execution.StatusThrottled {
			// Nothing leaves the queue here, so the place a run was given
			// is still its place.
			require.Equal(t, e.Run.Position, w.run(e.Run.RunID).Position, "run %s", e.Run.RunID)
			positions = append(positions, e.Run.Position)
		}
	}
	require.Equal(t, callers/2, created, "one run per key")
	require.Equal(t, 2, admitted, "the last two slots")
	require.Equal(t, map[string]int{"queued": 5, "throttled": callers/2 - 2}, w.statuses("wf"))
	sort.Ints(positions)
	want := make([]int, callers/2-2)
	for i := range want {
		want[i] = i + 1
	}
	require.Equal(t, want, positions, "the waiting runs' places")
}

// A run input PostgreSQL cannot store (a NUL character) is INVALID_INPUT,
// on the one-statement path and on the capped one, and leaves no binding.
func TestEnqueueRunRefusesUnstorableInput(t *testing.T) {
	t.Parallel()
	w := newLimitsWorld(t, "wf", "capped")
	w.setWorkflow("capped", ptr(1), nil)
	ctx := context.Background()
	for _, key := range []string{"wf", "capped"} {
		r := newRunValue(w.tenant, key, "nul")
		r.Input = json.RawMessage(`{"id":"a\u0000"}`)
		_, err := w.st.EnqueueRun(ctx, r, "nul")
		require.Equal(t, failure.CodeInvalidInput, failure.CodeOf(err), "%s: %v", key, err)
		e, err := w.st.EnqueueRun(ctx, newRunValue(w.tenant, key, "nul"), "nul")
		require.NoError(t, err, key)
		require.True(t, e.Created, "%s: the refused enqueue left its key unbound", key)
	}
}

// TestEnqueueRunExpectingWritesOnlyWhatStillHolds: weft_enqueue_run_checked
// writes the run only when the revision (named, or the latest published),
// the workflow's default budget and the principal's revocations are still
// what the caller decided with; any of them changed, it writes nothing
// (no run, no binding) and says so with ErrEnqueueReadsChanged, capped
// workflows (the transaction's path) included.
func TestEnqueueRunExpectingWritesOnlyWhatStillHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testinfra.NewStore(t)
	c1, p1, raw := compileExample(t, "")
	c2, p2, _ := compileExample(t, "true")
	_, err := st.CreateWorkflow(ctx, "t1", "orders", raw, "ada")
	require.NoError(t, err)
	_, _, err = st.Publish(ctx, "t1", "orders", 1, c1, p1, "pub")
	require.NoError(t, err)
	_, _, err = st.AddRevocation(ctx, "t1", "ada", "notes.read")
	require.NoError(t, err)

	one, two := 1, 2
	runOf := func(idem string, rev int, checksum string) store.Run {
		r := newRunValue("t1", "orders", idem)
		r.Revision, r.Checksum = rev, checksum
		return r
	}
	holds := store.EnqueueExpect{RevokedOf: "ada", Revoked: []string{"notes.read"}}
	bound := func(idem string) bool {
		t.Helper()
		_, ok, err := st.BoundRun(ctx, "t1", "orders", idem)
		require.NoError(t, err)
		return ok
	}
	refused := func(what string, r store.Run, idem string, exp store.EnqueueExpect) {
		t.Helper()
		before := countRuns(t, st)
		wasBound := bound(idem)
		_, err := st.EnqueueRunExpecting(ctx, r, idem, &exp)
		require.ErrorIs(t, err, store.ErrEnqueueReadsChanged, what)
		require.Equal(t, wasBound, bound(idem), "%s: no binding written", what)
		require.Equal(t, before, countRuns(t, st), "%s: no run written", what)
	}

	e, err := st.EnqueueRunExpecting(ctx, runOf("k1", 1, c1.Checksum), "k1", &holds)
	require.NoError(t, err)
	require.True(t, e.Created, "what it expects holds")

	refused("another checksum", runOf("k2", 1, "c0ffee"), "k2", holds)
	refused("a revision that is not the latest", runOf("k2", 2, c1.Checksum), "k2", holds)
	refused("fewer revocations", runOf("k2", 1, c1.Checksum), "k2", store.EnqueueExpect{RevokedOf: "ada", Revoked: []string{}})
	refused("more revocations", runOf("k2", 1, c1.Checksum), "k2",
		store.EnqueueExpect{RevokedOf: "ada", Revoked: []string{"notes.read", "notes.write"}})
	refused("another principal's", runOf("k2", 1, c1.Checksum), "k2", store.EnqueueExpect{RevokedOf: "bob", Revoked: []string{"notes.read"}})
	refused("a default budget never set", runOf("k2", 1, c1.Checksum), "k2",
		store.EnqueueExpect{RevokedOf: "ada", Revoked: []string{"notes.read"}, DefaultBudget: store.Budget{MaxTokens: ptr(int64(10))}})
	refused("a named revision that does not exist", runOf("k2", 2, c2.Checksum), "k2",
		store.EnqueueExpect{NamedRevision: &two, RevokedOf: "ada", Revoked: []string{"notes.read"}})

	// A publish: the latest is revision 2 now, and revision 1 only when named.
	_, err = st.SaveDraft(ctx, "t1", "orders", 1, raw, "ada")
	require.NoError(t, err)
	_, _, err = st.Publish(ctx, "t1", "orders", 2, c2, p2, "pub")
	require.NoError(t, err)
	refused("the latest before a publish", runOf("k2", 1, c1.Checksum), "k2", holds)
	named := holds
	named.NamedRevision = &one
	e, err = st.EnqueueRunExpecting(ctx, runOf("k2", 1, c1.Checksum), "k2", &named)
	require.NoError(t, err)
	require.True(t, e.Created, "revision 1 named")

	// A revocation committed: the expectation without it is refused.
	_, _, err = st.AddRevocation(ctx, "t1", "ada", "notes.write")
	require.NoError(t, err)
	refused("a revocation since", runOf("k3", 2, c2.Checksum), "k3", holds)
	// A repeated key is answered only when what it expects holds.
	refused("a repeated key, stale", runOf("k1", 2, c2.Checksum), "k1", holds)
	now := store.EnqueueExpect{RevokedOf: "ada", Revoked: []string{"notes.read", "notes.write"}}
	e, err = st.EnqueueRunExpecting(ctx, runOf("k1", 2, c2.Checksum), "k1", &now)
	require.NoError(t, err)
	require.False(t, e.Created, "a repeated key")

	// A default budget and a cap set: the capped path (a transaction)
	// checks too.
	_, _, err = st.SetWorkflowLimits(ctx, store.WorkflowLimits{TenantID: "t1", WorkflowKey: "orders", MaxConcurrentRuns: ptr(10),
		Budget: store.Budget{MaxTokens: ptr(int64(900)), MaxCostUSD: ptr(0.1)}, UpdatedBy: "ada"})
	require.NoError(t, err)
	refused("the default budget before it was set, capped", runOf("k4", 2, c2.Checksum), "k4", now)
	withBudget := now
	withBudget.DefaultBudget = store.Budget{MaxTokens: ptr(int64(900)), MaxCostUSD: ptr(0.1)}
	e, err = st.EnqueueRunExpecting(ctx, runOf("k4", 2, c2.Checksum), "k4", &withBudget)
	require.NoError(t, err)
	require.True(t, e.Created, "capped, what it expects holds")
	require.Equal(t, execution.StatusQueued, e.Run.Status, "a slot is free")

	// A simulation checks no revocations.
	sim := runOf("s1", 2, c2.Checksum)
	sim.Mode = string(execution.ModeSimulation)
	e, err = st.EnqueueRunExpecting(ctx, sim, "s1", &store.EnqueueExpect{DefaultBudget: withBudget.DefaultBudget})
	require.NoError(t, err)
	require.True(t, e.Created, "a simulation")
}

func countRuns(t *testing.T, st *store.Store) int {
	t.Helper()
	var n int
	require.NoError(t, st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM runs`).Scan(&n))
	return n
}

// EnqueueRunExpecting (weft_enqueue_run_checked) answers the row GetRun
// reads in every outcome: a new run, the same request again, another
// request with a bound key (the bound run as stored, which the starter
// tells from a repeat by its input hash and mode: IDEMPOTENCY_CONFLICT),
// capped runs admitted and waiting with their places, a waiting run's key
// again, a simulation; what it was decided with changed (a new key or a
// bound one), it answers ErrEnqueueReadsChanged and writes nothing; a key
// whose run retention deleted is RUN_DELETED. A cap committed while the
// enqueue waited for the tenant's admission lock holds it too, and the
// function's own answer on the capped path (p_exclusive, before the
// admission pass) is the stored row as well.
func TestEnqueueRunExpectingAnswersTheStoredRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newLimitsWorld(t)
	c, p, raw := compileExample(t, "")
	for _, k := range []string{"wf", "capped", "late", "direct"} {
		_, err := w.st.CreateWorkflow(ctx, w.tenant, k, raw, "ada")
		require.NoError(t, err)
		_, _, err = w.st.Publish(ctx, w.tenant, k, 1, c, p, "pub")
		require.NoError(t, err)
	}
	require.NoError(t, w.st.Revoke(ctx, w.tenant, "ada", "crm.write"))
	w.setWorkflow("capped", ptr(1), nil)
	holds := store.EnqueueExpect{RevokedOf: "ada", Revoked: []string{"crm.write"}}
	runOf := func(key, idem string) store.Run {
		r := newRunValue(w.tenant, key, idem)
		r.Checksum = c.Checksum
		return r
	}
	full := runOf("wf", "full")
	full.DraftRevision = ptr(3)
	full.Fixtures = json.RawMessage(`{"a":{"out":1}}`)
	full.Usage = json.RawMessage(`{"tokens":0}`)
	full.TenantName = "Acme"
	full.ToolGrants = []string{}
	full.ToolPolicy = []string{"core.echo@1"}
	full.RequestedBudget = &store.Budget{MaxTokens: ptr(int64(100))}
	full.Budget = store.Budget{MaxTokens: ptr(int64(100)), MaxCostUSD: ptr(1.5)}
	full.Actor = execution.Actor{Kind: "service", Sub: "schedule:s", ConfiguredBy: "ada"}
	full.Origin = execution.Origin{Kind: "schedule", ID: "s"}
	conflicting := runOf("wf", "full")
	conflicting.Input, conflicting.InputHash = json.RawMessage(`{"id":"b"}`), "h2"
	sim := runOf("capped", "sim")
	sim.Mode = string(execution.ModeSimulation)
	for _, k := range []struct {
		name, idem, status string
		run                store.Run
		created            bool
		position           int
	}{
		{"live, every field", "full", execution.StatusQueued, full, true, 0},
		{"the same request again", "full", execution.StatusQueued, runOf("wf", "full"), false, 0},
		{"another request with the key", "full", execution.StatusQueued, conflicting, false, 0},
		{"capped, admitted", "c1", execution.StatusQueued, runOf("capped", "c1"), true, 0},
		{"capped, waiting", "c2", execution.StatusThrottled, runOf("capped", "c2"), true, 1},
		{"capped, waiting second", "c3", execution.StatusThrottled, runOf("capped", "c3"), true, 2},
		{"a waiting run's key again", "c3", execution.StatusThrottled, runOf("capped", "c3"), false, 2},
		{"a simulation", "sim", execution.StatusQueued, sim, true, 0},
	} {
		exp := holds
		if k.run.Mode == string(execution.ModeSimulation) {
			exp = store.EnqueueExpect{}
		}
		e, err := w.st.EnqueueRunExpecting(ctx, k.run, k.idem, &exp)
		require.NoError(t, err, k.name)
		require.Equal(t, k.created, e.Created, k.name)
		require.Equal(t, k.status, e.Run.Status, k.name)
		require.Equal(t, k.position, e.Run.Position, k.name)
		require.Equal(t, w.run(e.Run.RunID), e.Run, k.name)
		if k.created {
			require.Equal(t, k.run.RunID, e.Run.RunID, k.name)
		}
	}
	stored := w.run(mustBound(t, w, "wf", "full"))
	require.Equal(t, full.RunID, stored.RunID)
	require.Equal(t, "h1", stored.InputHash, "the bound run as stored, not the request")

	// What the enqueue was decided with changed: nothing written, a bound
	// key not answered.
	runs := countRuns(t, w.st)
	stale := store.EnqueueExpect{RevokedOf: "ada", Revoked: []string{}}
	for _, k := range []struct{ name, key, idem string }{{"a new key", "wf", "stale"}, {"a bound key", "wf", "full"},
		{"a new key, capped", "capped", "stale"}} {
		_, err := w.st.EnqueueRunExpecting(ctx, runOf(k.key, k.idem), k.idem, &stale)
		require.ErrorIs(t, err, store.ErrEnqueueReadsChanged, k.name)
	}
	_, ok, err := w.st.BoundRun(ctx, w.tenant, "wf", "stale")
	require.NoError(t, err)
	require.False(t, ok, "no binding written")
	require.Equal(t, runs, countRuns(t, w.st), "no run written")

	// A key whose run retention deleted.
	gone := runOf("wf", "gone")
	_, err = w.st.EnqueueRunExpecting(ctx, gone, "gone", &holds)
	require.NoError(t, err)
	_, err = w.st.Pool.Exec(ctx, `DELETE FROM runs WHERE run_id = $1`, gone.RunID)
	require.NoError(t, err)
	_, err = w.st.Pool.Exec(ctx, `UPDATE idempotency_bindings SET run_deleted_at = now() WHERE run_id = $1`, gone.RunID)
	require.NoError(t, err)
	_, err = w.st.EnqueueRunExpecting(ctx, runOf("wf", "gone"), "gone", &holds)
	require.Equal(t, store.CodeRunDeleted, failure.CodeOf(err), "%v", err)

	// The function's answer on the capped path, before the admission
	// pass: the run inserted throttled, last in its workflow's queue.
	for i, want := range []int{1, 2} {
		tx, err := w.st.Pool.Begin(ctx)
		require.NoError(t, err)
		r := runOf("direct", fmt.Sprint("d", i))
		e, err := store.EnqueueCheckedCall(ctx, tx, r, fmt.Sprint("d", i), &holds, true)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		require.True(t, e.Created)
		require.Equal(t, execution.StatusThrottled, e.Run.Status)
		require.Equal(t, want, e.Run.Position)
		require.Equal(t, w.run(r.RunID), e.Run)
	}
	tx, err := w.st.Pool.Begin(ctx)
	require.NoError(t, err)
	e, err := store.EnqueueCheckedCall(ctx, tx, runOf("direct", "d1"), "d1", &holds, true)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	require.False(t, e.Created)
	require.Equal(t, w.run(e.Run.RunID), e.Run, "a bound key on the capped path")
	// Without p_exclusive a live run that limits apply to is refused
	// (WF001, which EnqueueRunExpecting answers by taking the capped path).
	_, err = store.EnqueueCheckedCall(ctx, w.st.Pool, runOf("direct", "d9"), "d9", &holds, false)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "WF001", pgErr.Code)
	_, err = store.EnqueueCheckedCall(ctx, w.st.Pool, runOf("direct", "d9"), "d9", &stale, false)
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "WF002", pgErr.Code, "a change of what it was decided with is reported first")

	// A cap written under the exclusive admission lock, not committed yet.
	holder, err := w.st.EnqueueRunExpecting(ctx, runOf("late", "holder"), "holder", &holds)
	require.NoError(t, err)
	require.Equal(t, execution.StatusQueued, holder.Run.Status)
	ltx, err := w.st.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = ltx.Rollback(ctx) }()
	_, err = ltx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::int, hashtext($2))`, 0x77656674, w.tenant)
	require.NoError(t, err)
	_, err = ltx.Exec(ctx, `INSERT INTO workflow_limits (tenant_id, workflow_key, max_concurrent_runs, updated_by)
		VALUES ($1, 'late', 1, 'ada')`, w.tenant)
	require.NoError(t, err)
	r := runOf("late", "late")
	got := enqueueBehindAdmissionLock(t, ctx, w.st, ltx, func(ctx context.Context) (store.Enqueued, error) {
		return w.st.EnqueueRunExpecting(ctx, r, "late", &holds)
	})
	require.NoError(t, got.err)
	require.True(t, got.e.Created)
	require.Equal(t, r.RunID, got.e.Run.RunID)
	require.Equal(t, execution.StatusThrottled, got.e.Run.Status, "the cap set while it waited holds it")
	require.Equal(t, 1, got.e.Run.Position)
	require.Equal(t, w.run(r.RunID), got.e.Run)
	require.Equal(t, map[string]int{"queued": 1, "throttled": 1}, w.statuses("late"))
	var bindings int
	require.NoError(t, w.st.Pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_bindings WHERE tenant_id = $1 AND idempotency_key = 'late'`,
		w.tenant).Scan(&bindings))
	require.Equal(t, 1, bindings)
}

// mustBound is the id of the run key's idempotency key is bound to.
func mustBound(t *testing.T, w *limitsWorld, key, idem string) string {
	t.Helper()
	r, ok, err := w.st.BoundRun(context.Background(), w.tenant, key, idem)
	require.NoError(t, err)
	require.True(t, ok, "%s/%s is bound", key, idem)
	return r.RunID
}

// Migration 00028 rewrites weft_enqueue_run_checked as one body; rolled
// back to 00027 the function is 00024's again, body for body, and up again
// the rewrite. Both answer the same calls with the same outcomes: each
// branch (a new run, the same request again, another request with the key,
// a simulation, reads changed for a new and a bound key, capped admitted
// and waiting, the capped path's own call, limits without p_exclusive, a
// waiting run's key again) and every answered row equal to the stored one.
func TestEnqueueRunCheckedMigrationUpAndDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testinfra.NewStore(t)
	installed := func() string {
		t.Helper()
		var src string
		require.NoError(t, st.Pool.QueryRow(ctx, `SELECT prosrc FROM pg_proc WHERE proname = 'weft_enqueue_run_checked'`).Scan(&src))
		return src
	}
	c, p, raw := compileExample(t, "")
	scenario := func(tenant string) []string {
		t.Helper()
		for _, k := range []string{"wf", "capped"} {
			_, err := st.CreateWorkflow(ctx, tenant, k, raw, "ada")
			require.NoError(t, err)
			_, _, err = st.Publish(ctx, tenant, k, 1, c, p, "pub")
			require.NoError(t, err)
		}
		_, _, err := st.SetWorkflowLimits(ctx, store.WorkflowLimits{TenantID: tenant, WorkflowKey: "capped",
			MaxConcurrentRuns: ptr(1), UpdatedBy: "ada"})
		require.NoError(t, err)
		require.NoError(t, st.Revoke(ctx, tenant, "ada", "crm.write"))
		holds := store.EnqueueExpect{RevokedOf: "ada", Revoked: []string{"crm.write"}}
		stale := store.EnqueueExpect{RevokedOf: "ada", Revoked: []string{}}
		runOf := func(key, idem, hash, mode string) store.Run {
			r := newRunValue(tenant, key, idem)
			r.Checksum, r.InputHash, r.Mode = c.Checksum, hash, mode
			return r
		}
		var out []string
		note := func(what string, e store.Enqueued, err error) {
			t.Helper()
			var pgErr *pgconn.PgError
			switch {
			case errors.As(err, &pgErr):
				out = append(out, fmt.Sprintf("%s: SQLSTATE %s %s", what, pgErr.Code, pgErr.Message))
			case err != nil:
				out = append(out, fmt.Sprintf("%s: %v", what, err))
			default:
				got, err := st.GetRun(ctx, tenant, e.Run.RunID)
				require.NoError(t, err, what)
				require.Equal(t, got, e.Run, what)
				out = append(out, fmt.Sprintf("%s: created %v, %s, input hash %s, mode %s, place %d, admitted %d",
					what, e.Created, e.Run.Status, e.Run.InputHash, e.Run.Mode, e.Run.Position, len(e.Admitted)))
			}
		}
		live, sim := string(execution.ModeLive), string(execution.ModeSimulation)
		for _, k := range []struct {
			what, key, idem, hash, mode string
			exp                         store.EnqueueExpect
		}{
			{"new", "wf", "a", "h1", live, holds},
			{"the same request", "wf", "a", "h1", live, holds},
			{"another request", "wf", "a", "h2", sim, holds},
			{"a simulation", "wf", "s", "h1", sim, store.EnqueueExpect{}},
			{"changed, new key", "wf", "b", "h1", live, stale},
			{"changed, bound key", "wf", "a", "h1", live, stale},
			{"capped, admitted", "capped", "c1", "h1", live, holds},
			{"capped, waiting", "capped", "c2", "h1", live, holds},
			{"capped, changed", "capped", "c3", "h1", live, stale},
			{"capped, a waiting run's key", "capped", "c2", "h1", live, holds},
		} {
			e, err := st.EnqueueRunExpecting(ctx, runOf(k.key, k.idem, k.hash, k.mode), k.idem, &k.exp)
			note(k.what, e, err)
		}
		for _, k := range []struct {
			what, idem string
			exclusive  bool
			exp        store.EnqueueExpect
		}{{"limits, not exclusive", "d1", false, holds}, {"changed, not exclusive", "d1", false, stale},
			{"changed, exclusive", "d1", true, stale}, {"exclusive", "d2", true, holds}, {"exclusive, bound", "d2", true, holds}} {
			tx, err := st.Pool.Begin(ctx)
			require.NoError(t, err)
			e, err := store.EnqueueCheckedCall(ctx, tx, runOf("capped", k.idem, "h1", live), k.idem, &k.exp, k.exclusive)
			if err != nil {
				require.NoError(t, tx.Rollback(ctx))
			} else {
				require.NoError(t, tx.Commit(ctx))
			}
			note(k.what, e, err)
		}
		return out
	}

	require.Equal(t, migrationFunctionBody(t, "00028_enqueue_run_one_function.sql"), installed())
	after := scenario("t-after")
	require.NoError(t, store.MigrateTo(ctx, st.Pool, 27))
	require.Equal(t, migrationFunctionBody(t, "00024_enqueue_run_checked.sql"), installed(), "rolled back: 00024's body")
	before := scenario("t-before")
	require.NoError(t, store.Migrate(ctx, st.Pool))
	require.Equal(t, migrationFunctionBody(t, "00028_enqueue_run_one_function.sql"), installed())
	again := scenario("t-again")
	require.Equal(t, before, after)
	require.Equal(t, before, again)
	t.Log(strings.Join(before, "\n"))
}

// enqueuedResult is what an enqueue run in the background answered.
type enqueuedResult struct {
	e   store.Enqueued
	err error
}

// enqueueBehindAdmissionLock runs enqueue in the background while holder
// (a transaction holding the tenant's exclusive admission lock) is open,
// waits until the enqueue waits for that lock, commits holder and returns
// what the enqueue answered once the lock was free.
func enqueueBehindAdmissionLock(t *testing.T, ctx context.Context, st *store.Store, holder pgx.Tx,
	enqueue func(context.Context) (store.Enqueued, error)) enqueuedResult {
	t.Helper()
	done := make(chan enqueuedResult, 1)
	go func() {
		e, err := enqueue(context.Background())
		done <- enqueuedResult{e, err}
	}()
	require.Eventually(t, func() bool {
		var n int
		err := st.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND classid = $1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, 0x77656674).Scan(&n)
		return err == nil && n > 0
	}, 30*time.Second, 10*time.Millisecond, "the enqueue does not wait for the admission lock")
	require.NoError(t, holder.Commit(ctx))
	select {
	case got := <-done:
		return got
	case <-time.After(60 * time.Second):
		t.Fatal("the enqueue did not finish once the lock was free")
		return enqueuedResult{}
	}
}
