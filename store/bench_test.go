package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// BenchmarkAppendEvents2 is the interpreter's flush for one node of a chain:
// two events (the node's end, the next node's start) appended to one run in
// one transaction, hash-chained under the run row lock.
func BenchmarkAppendEvents2(b *testing.B) {
	st := testinfra.NewStore(b)
	ctx := context.Background()
	run := newRunTB(b, st, "bench")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		evs := []execution.EventDraft{
			draft(fmt.Sprintf("%d/a", i), "node.succeeded", `{"port":"out"}`),
			draft(fmt.Sprintf("%d/b", i), "node.started", `{}`),
		}
		if err := st.AppendEvents(ctx, "bench", run, evs, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendChainEvents appends the events of one chain10 run as the
// attempts carry them, two at a time (a node's end and the next one's
// start), to a fresh run: the client side (evidence, the hash chain's
// pieces, pgx encoding the arrays) is what B/op counts; the run's creation
// is not counted.
func BenchmarkAppendChainEvents(b *testing.B) {
	st := testinfra.NewStore(b)
	ctx := context.Background()
	drafts := store.ChainDrafts(10)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		run := newRunTB(b, st, "bench")
		b.StartTimer()
		for i := 0; i < len(drafts); i += 2 {
			if err := st.AppendEvents(ctx, "bench", run, drafts[i:min(i+2, len(drafts))], nil); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkAppendChainRuns30 appends chain-shaped runs (eight appends of
// four events, the move to running first, the terminal status last, each
// append after the first carrying the previous one's last event again)
// from 30 goroutines at once, as weftbench's throughput bursts run them;
// one op is one run. It is where appends' commits meet: while every append
// notified, they queued one by one on PostgreSQL's cluster-wide notify
// lock, each with its own WAL flush (migration 00027).
func BenchmarkAppendChainRuns30(b *testing.B) {
	st := testinfra.NewStore(b)
	ctx := context.Background()
	drafts := store.ChainDrafts(14)
	out := execution.Value{Inline: json.RawMessage(`{"n":1}`)}
	b.SetParallelism(max(1, 30/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			run := uuid.NewString()
			if _, _, err := st.CreateRun(ctx, store.Run{RunID: run, TenantID: "bench", WorkflowKey: "wf", Checksum: "c",
				Mode: "live", Input: json.RawMessage(`{}`), InputHash: "h", WorkflowID: "weft-" + run}, "idem-"+run); err != nil {
				b.Error(err)
				return
			}
			for i := 0; i < len(drafts); i += 4 {
				evs := drafts[i:min(i+4, len(drafts))]
				var upd *execution.RunUpdate
				if i == 0 {
					upd = &execution.RunUpdate{Status: execution.StatusRunning, TemporalRunID: "tr-" + run}
				} else {
					evs = append([]execution.EventDraft{drafts[i-1]}, evs...)
				}
				if i+4 >= len(drafts) {
					upd = &execution.RunUpdate{Status: execution.StatusSucceeded, Output: &out}
				}
				if err := st.AppendCarried(ctx, store.AppendRequest{TenantID: "bench", RunID: run, Events: evs, Update: upd}); err != nil {
					b.Error(err)
					return
				}
			}
		}
	})
}

// BenchmarkCommitBaseline is the floor under any durable write on this
// machine: one single-row INSERT committed in its own transaction.
func BenchmarkCommitBaseline(b *testing.B) {
	st := testinfra.NewStore(b)
	ctx := context.Background()
	if _, err := st.Pool.Exec(ctx, `CREATE TABLE bench_rows (k bigint PRIMARY KEY, v text)`); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if _, err := st.Pool.Exec(ctx, `INSERT INTO bench_rows VALUES ($1, 'x')`, i); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunAuthority is what re-authorizing one agent tool call costs:
// one query reading a schedule run's row, its creator's revocations (with
// 50 rows of other users beside them) and the schedule's current policy.
func BenchmarkRunAuthority(b *testing.B) {
	st := testinfra.NewStore(b)
	ctx := context.Background()
	if _, err := st.CreateWorkflow(ctx, "t1", "wf", []byte(`{}`), "alice"); err != nil {
		b.Fatal(err)
	}
	if _, err := st.CreateSchedule(ctx, store.Schedule{TenantID: "t1", ScheduleID: "sch_1", WorkflowKey: "wf",
		Spec: store.ScheduleSpec{Every: "1h"}, CreatedBy: "alice", Scopes: []string{"notes.write"}, TemporalScheduleID: "ts",
		ToolPolicy: []string{"core.echo@1", "workspace.notes.write@1"}}); err != nil {
		b.Fatal(err)
	}
	for i := range 50 {
		if err := st.Revoke(ctx, "t1", fmt.Sprintf("user-%d", i), "notes.write"); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.Revoke(ctx, "t1", "alice", "crm.write"); err != nil {
		b.Fatal(err)
	}
	run := newActedRun(b, st, execution.Actor{Kind: "service", Sub: "schedule:sch_1", ConfiguredBy: "alice"},
		execution.Origin{Kind: "schedule", ID: "sch_1"}, nil, []string{"core.echo@1"})
	b.ReportAllocs()
	for b.Loop() {
		a, err := st.RunAuthority(ctx, "t1", run)
		if err != nil || a.Bridge == nil || len(a.Revoked) != 1 {
			b.Fatalf("%+v %v", a, err)
		}
	}
}

// BenchmarkEnqueueRun is one live enqueue of a tenant without limits: the
// binding and the run row, under the tenant's shared admission lock.
func BenchmarkEnqueueRun(b *testing.B) { benchEnqueue(b, nil) }

// BenchmarkEnqueueRunCapped is one live enqueue of a workflow with a cap:
// the tenant's exclusive admission lock and the admission pass. The cap is
// high enough that every run is admitted (the slots-in-use count grows with
// every run, as runs never settle here).
func BenchmarkEnqueueRunCapped(b *testing.B) {
	limit := store.MaxConcurrentRunsLimit
	benchEnqueue(b, &limit)
}

func benchEnqueue(b *testing.B, cap *int) {
	st := testinfra.NewStore(b)
	ctx := context.Background()
	if _, err := st.CreateWorkflow(ctx, "bench", "wf", []byte(`{}`), "alice"); err != nil {
		b.Fatal(err)
	}
	if cap != nil {
		if _, _, err := st.SetWorkflowLimits(ctx, store.WorkflowLimits{TenantID: "bench", WorkflowKey: "wf", MaxConcurrentRuns: cap, UpdatedBy: "alice"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		idem := fmt.Sprint("k", i)
		r := newRunValue("bench", "wf", idem)
		e, err := st.EnqueueRun(ctx, r, idem)
		if err != nil || e.Run.Status != execution.StatusQueued {
			b.Fatalf("enqueue: %v %s", err, e.Run.Status)
		}
	}
}

// BenchmarkEnqueueRun20 is BenchmarkEnqueueRun from 20 goroutines at once
// (weftbench's 20 enqueue clients): through a pool of pgxpool's default
// size, max(4, CPUs) (what store.Open makes from a DATABASE_URL without
// pool_max_conns), and through one of weft's default size
// (WEFT_DB_POOL_MAX_CONNS, what `weft api` opens).
func BenchmarkEnqueueRun20(b *testing.B) {
	for _, conns := range []int{0, config.DefaultDBPoolMaxConns} {
		name := "pool=pgxpool-default"
		if conns > 0 {
			name = fmt.Sprint("pool=weft-default-", conns)
		}
		b.Run(name, func(b *testing.B) {
			st := testinfra.NewStore(b)
			if conns > 0 {
				sized, err := store.OpenWith(context.Background(), st.Pool.Config().ConnString(), store.Options{MaxConns: conns})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(sized.Close)
				if got := sized.Pool.Config().MaxConns; got != int32(conns) {
					b.Fatalf("pool of %d connections, want %d", got, conns)
				}
				st = sized
			}
			benchEnqueue20(b, st)
		})
	}
}

func benchEnqueue20(b *testing.B, st *store.Store) {
	ctx := context.Background()
	if _, err := st.CreateWorkflow(ctx, "bench", "wf", []byte(`{}`), "alice"); err != nil {
		b.Fatal(err)
	}
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((20 + procs - 1) / procs)
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			idem := fmt.Sprint("k", n.Add(1))
			e, err := st.EnqueueRun(ctx, newRunValue("bench", "wf", idem), idem)
			if err != nil || e.Run.Status != execution.StatusQueued {
				b.Errorf("enqueue: %v %s", err, e.Run.Status)
				return
			}
		}
	})
}

// BenchmarkEnqueueRunChecked20 is the API's enqueue as the starter makes it
// from its reads cache (EnqueueRunExpecting: weft_enqueue_run_checked, a
// published revision, the actor's revocations and the default budget
// checked in the same statement) from 20 goroutines at once through a pool
// of 20 connections (WEFT_DB_POOL_MAX_CONNS' default). Besides ns/op it
// reports pg-cpu-us/op: the CPU time the database's backends spent per
// enqueue, from their /proc/<pid>/schedstat (PostgreSQL on this machine;
// not reported when unreadable).
func BenchmarkEnqueueRunChecked20(b *testing.B) {
	base := testinfra.NewStore(b)
	ctx := context.Background()
	st, err := store.OpenWith(ctx, base.Pool.Config().ConnString(), store.Options{MaxConns: config.DefaultDBPoolMaxConns})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	c, p, raw := compileExample(b, "")
	if _, err := st.CreateWorkflow(ctx, "bench", "wf", raw, "alice"); err != nil {
		b.Fatal(err)
	}
	if _, _, err := st.Publish(ctx, "bench", "wf", 1, c, p, "pub"); err != nil {
		b.Fatal(err)
	}
	if err := st.Revoke(ctx, "bench", "alice", "crm.write"); err != nil {
		b.Fatal(err)
	}
	exp := store.EnqueueExpect{RevokedOf: "alice", Revoked: []string{"crm.write"}}
	backends := warmBackends(b, st, config.DefaultDBPoolMaxConns)
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((20 + procs - 1) / procs)
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	before, readable := backendCPU(backends)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			idem := fmt.Sprint("k", n.Add(1))
			r := newRunValue("bench", "wf", idem)
			r.Checksum = c.Checksum
			r.Actor.Sub = "alice"
			e, err := st.EnqueueRunExpecting(ctx, r, idem, &exp)
			if err != nil || !e.Created || e.Run.Status != execution.StatusQueued {
				b.Errorf("enqueue: %v %v %s", err, e.Created, e.Run.Status)
				return
			}
		}
	})
	b.StopTimer()
	after, _ := backendCPU(backends)
	if now := backendPIDs(b, st); len(now) != len(backends) {
		b.Logf("backends: %d before, %d after: the CPU figure misses some", len(backends), len(now))
	}
	if readable {
		b.ReportMetric(float64(after-before)/1e3/float64(b.N), "pg-cpu-us/op")
	}
}

// warmBackends opens conns connections in st's pool at once (so the
// measured loop opens none) and returns the pids of the database's
// backends.
func warmBackends(b *testing.B, st *store.Store, conns int) []string {
	b.Helper()
	ctx := context.Background()
	held := make([]*pgxpool.Conn, 0, conns)
	for range conns {
		c, err := st.Pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		held = append(held, c)
	}
	for _, c := range held {
		c.Release()
	}
	return backendPIDs(b, st)
}

// backendPIDs are the client backends connected to st's database.
func backendPIDs(b *testing.B, st *store.Store) []string {
	b.Helper()
	rows, err := st.Pool.Query(context.Background(), `SELECT pid::text FROM pg_stat_activity
		WHERE datname = current_database() AND backend_type = 'client backend' ORDER BY pid`)
	if err != nil {
		b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		b.Fatal(err)
	}
	return pids
}

// backendCPU sums the time on CPU (ns, the first field of
// /proc/<pid>/schedstat) of pids; false when one cannot be read.
func backendCPU(pids []string) (int64, bool) {
	var sum int64
	for _, pid := range pids {
		raw, err := os.ReadFile("/proc/" + pid + "/schedstat")
		if err != nil {
			return 0, false
		}
		f := strings.Fields(string(raw))
		if len(f) == 0 {
			return 0, false
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		sum += ns
	}
	return sum, true
}

// BenchmarkPutNodeResult20KiB is what recording one live node result the
// event leaves out costs (issue 21): a 20 KiB value redacted, encoded
// and inserted. Read it against BenchmarkCommitBaseline; values up to 6 KiB
// and claim-checked ones never pay it.
func BenchmarkPutNodeResult20KiB(b *testing.B) {
	st := testinfra.NewStore(b)
	ctx := context.Background()
	run := newRunTB(b, st, "bench")
	v := json.RawMessage(`{"apiKey":"k","text":"` + strings.Repeat("x", 20<<10) + `"}`)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if err := st.PutNodeResult(ctx, "bench", run, "n", i, 0, "out", v, len(v)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunRecording50 reads back the recording of a 50-node run (one
// start and one completion each, a third of them with a 20 KiB result in
// node_results): what a replay pays per run before it simulates.
func BenchmarkRunRecording50(b *testing.B) {
	st := testinfra.NewStore(b)
	ctx := context.Background()
	run := newRunTB(b, st, "bench")
	mid := json.RawMessage(`{"text":"` + strings.Repeat("x", 20<<10) + `"}`)
	var evs []execution.EventDraft
	for i := range 50 {
		node := fmt.Sprintf("n%d", i)
		data := fmt.Sprintf(`{"port":"out","output":{"i":%d}}`, i)
		if i%3 == 0 {
			data = fmt.Sprintf(`{"port":"out","truncated":true,"outputSize":%d}`, len(mid))
			if err := st.PutNodeResult(ctx, "bench", run, node, 1, 0, "out", mid, len(mid)); err != nil {
				b.Fatal(err)
			}
		}
		evs = append(evs,
			execution.EventDraft{Key: node + "/s", Type: execution.EventNodeStarted, NodeID: node, Attempt: 1, At: t0, Data: json.RawMessage(`{"kind":"action"}`)},
			execution.EventDraft{Key: node + "/c", Type: execution.EventNodeCompleted, NodeID: node, Attempt: 1, At: t0.Add(time.Second), Data: json.RawMessage(data)})
	}
	evs = append(evs, execution.EventDraft{Key: "end", Type: execution.EventRunSucceeded, At: t0.Add(time.Minute), Data: json.RawMessage(`{}`)})
	if err := st.AppendEvents(ctx, "bench", run, evs, &execution.RunUpdate{Status: execution.StatusSucceeded}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		rec, err := st.RunRecording(ctx, "bench", run)
		if err != nil || !rec.Replayable || len(rec.Nodes) != 50 {
			b.Fatalf("recording: %v %s %d", err, rec.Reason, len(rec.Nodes))
		}
	}
}

// BenchmarkAppendFlush32 is a run's final flush: one append of 32 events
// (store.ChainDrafts(14)) with the terminal status, to a fresh run, through
// weft_append_events as migration 00027 left it (a probe and an INSERT per
// event) and as 00029 makes it (one probe, one INSERT), in one run of the
// benchmark so the two are compared on the same machine state:
//
//	go test ./store -run '^$' -bench AppendFlush32 -count 6
func BenchmarkAppendFlush32(b *testing.B) {
	ctx := context.Background()
	drafts := store.ChainDrafts(14)
	out := execution.Value{Inline: json.RawMessage(`{"n":1}`)}
	for _, c := range []struct {
		name    string
		version int64
	}{{"00027", 28}, {"00029", 0}} {
		b.Run(c.name, func(b *testing.B) {
			st := testinfra.NewStore(b)
			if c.version > 0 {
				if err := store.MigrateTo(ctx, st.Pool, c.version); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				run := newRunTB(b, st, "bench")
				b.StartTimer()
				if err := st.AppendEvents(ctx, "bench", run, drafts, &execution.RunUpdate{Status: execution.StatusSucceeded, Output: &out}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
