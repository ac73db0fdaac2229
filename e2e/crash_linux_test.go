//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
)

// drillGraph is the durability drill of the operator's report (issue
// "Durable means durable"): two naps and two business writes, with no
// retry block, so every node has exactly one attempt. An infrastructure
// fault must never spend it.
const drillGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "nap1", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.sleep", "version": 1},
     "mapping": {"ms": {"literal": 1500}}},
    {"id": "note1", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "workspace.notes.write", "version": 1},
     "mapping": {"title": {"literal": "drill 1"}, "body": {"pointer": "/in"}}},
    {"id": "nap2", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.sleep", "version": 1},
     "mapping": {"ms": {"literal": 1500}}},
    {"id": "note2", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "workspace.notes.write", "version": 1},
     "mapping": {"title": {"literal": "drill 2"}, "body": {"pointer": "/in"}}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "nap1.in"}, {"from": "nap1.out", "to": "note1.in"}, {"from": "note1.out", "to": "nap2.in"},
    {"from": "nap2.out", "to": "note2.in"}, {"from": "note2.out", "to": "out.in"}]
}`

// drillRuns is how many runs each drill starts at once.
const drillRuns = 8

// workerProc is a worker in a process of its own: this test binary
// re-executed into runHelperWorker (worker.Serve, as `weft worker`), so a
// SIGKILL is a real crash (no deferred cleanup, sticky caches lost) and a
// SIGTERM is the real graceful stop.
type workerProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	logs   *testinfra.SyncBuffer
	exited chan struct{}
}

// spawnWorker starts a worker process on the env's task queue and
// database; extraEnv adds settings such as WEFT_WORKER_DRAIN.
func (e *env) spawnWorker(extraEnv ...string) *workerProc {
	e.t.Helper()
	exe, err := os.Executable()
	require.NoError(e.t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(),
		helperWorkerEnv+"=1",
		"DATABASE_URL="+e.workerDBURL(),
		"TEMPORAL_ADDRESS="+e.temporal.HostPort,
		"TEMPORAL_NAMESPACE=default",
		"WEFT_TASK_QUEUE="+e.queue,
		"WEFT_JWT_SECRET="+jwtSecret,
	)
	cmd.Env = append(cmd.Env, extraEnv...)
	w := &workerProc{t: e.t, cmd: cmd, logs: &testinfra.SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = w.logs, w.logs
	// Never outlive the test process, even if it panics.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(e.t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		close(w.exited)
	}()
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-w.exited
		if e.t.Failed() {
			e.t.Logf("worker %d output:\n%s", cmd.Process.Pid, w.logs.String())
		}
	})
	e.waitForActions()
	return w
}

// workerDBURL is what worker processes connect to: the database, or the
// proxy in front of it in the outage drill.
func (e *env) workerDBURL() string {
	if e.dbProxy != nil {
		return testinfra.ThroughProxy(e.t, e.dbURL, e.dbProxy)
	}
	return e.dbURL
}

// waitForActions waits until a worker has published the action catalog
// (built-ins and the drill actions), which publication resolves against.
func (e *env) waitForActions() {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		var n int
		err := e.st.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM action_contracts WHERE action_id = $1`, slowNoteV1.ID).Scan(&n)
		return err == nil && n > 0
	}, 60*time.Second, 50*time.Millisecond, "no worker published its actions")
}

// kill sends sig and waits for the process to exit; it returns how long
// the exit took.
func (w *workerProc) kill(sig syscall.Signal, within time.Duration) time.Duration {
	w.t.Helper()
	start := time.Now()
	require.NoError(w.t, w.cmd.Process.Signal(sig))
	select {
	case <-w.exited:
		return time.Since(start)
	case <-time.After(within):
		w.t.Fatalf("worker %d still running %s after %s", w.cmd.Process.Pid, within, sig)
		return 0
	}
}

// identity is the prefix of the worker's Temporal identity (pid@host@).
func (w *workerProc) identity() string { return fmt.Sprintf("%d@", w.cmd.Process.Pid) }

// waitMidAttempt blocks until need of the runs each have an activity that
// w started less than fresh ago (Temporal's own view of the lease), so that
// stopping w now interrupts attempts that are really running there.
func (e *env) waitMidAttempt(ids []string, w *workerProc, fresh time.Duration, need int) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		running := 0
		for _, id := range ids {
			d, err := e.tc.DescribeWorkflow(context.Background(), e.workflowID(id), "")
			if err != nil {
				continue
			}
			for _, pa := range d.RawResponse.GetPendingActivities() {
				started := pa.GetLastStartedTime()
				if pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED && started != nil &&
					strings.HasPrefix(pa.GetLastWorkerIdentity(), w.identity()) && time.Since(started.AsTime()) < fresh {
					running++
					break
				}
			}
		}
		if running >= need {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("fewer than %d runs had an attempt started on worker %d within 60s", need, w.cmd.Process.Pid)
}

// drillOutcome is what a drill's runs left behind: their recovery events.
type drillOutcome struct {
	leaseLost  []recovery
	infraRetry []recovery
}

// recovery is one node.attempt.lease_lost or node.attempt.infra_retry event of a run.
type recovery struct {
	run string
	eventView
}

// attemptKey names the attempt a recovery event is about.
func (r recovery) attemptKey() string { return fmt.Sprintf("%s/%s/%d", r.run, r.NodeID, r.Attempt) }

// startDrill publishes doc as key and enqueues n runs of it.
func (e *env) startDrill(key, doc string, n int) []string {
	e.t.Helper()
	e.publish(key, doc)
	ids := make([]string, n)
	for i := range n {
		ids[i] = e.run(key, map[string]any{"drill": key, "i": i})
		e.workflowID(ids[i]) // known before any outage
	}
	return ids
}

// verifyDrill waits for every run and checks the durability contract: the
// run succeeded; no node spent an attempt (every node.started is attempt 1,
// no node.attempt.failed); the chain is intact and gapless; each note node
// wrote exactly one note. It returns the recovery evidence.
func (e *env) verifyDrill(ids []string, noteNodes ...string) drillOutcome {
	e.t.Helper()
	var wg sync.WaitGroup
	views := make([]runView, len(ids))
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			views[i] = e.wait(id, 3*time.Minute)
		}()
	}
	wg.Wait()
	var out drillOutcome
	for i, id := range ids {
		require.Equal(e.t, execution.StatusSucceeded, views[i].Status, "run %s: %v", id, e.eventTypes(id))
		require.NotEmpty(e.t, views[i].Temporal.RunID, "run %s: the interpreter's first append records its run id", id)
		e.checkChain(id)
		for _, ev := range e.events(id) {
			switch ev.Type {
			case execution.EventNodeStarted:
				require.Equal(e.t, 1, ev.Attempt, "run %s: node %s started attempt %d", id, ev.NodeID, ev.Attempt)
			case execution.EventNodeAttemptFailed, execution.EventNodeFailed:
				e.t.Fatalf("run %s: node %s spent an attempt: %s %s", id, ev.NodeID, ev.Type, ev.Data)
			case execution.EventNodeAttemptLeaseLost:
				out.leaseLost = append(out.leaseLost, recovery{id, ev})
			case execution.EventNodeAttemptInfraRetry:
				out.infraRetry = append(out.infraRetry, recovery{id, ev})
			}
		}
		for _, n := range views[i].Nodes {
			require.Equal(e.t, 1, n.Attempt, "run %s node %s", id, n.ID)
		}
	}
	e.requireNotesOnce(ids, noteNodes...)
	return out
}

// requireNotesOnce: each run wrote exactly one note per note node.
func (e *env) requireNotesOnce(ids []string, noteNodes ...string) {
	e.t.Helper()
	res := e.do(http.MethodGet, "/v1/notes?limit=200", e.token, nil)
	require.Equal(e.t, http.StatusOK, res.Status, "%s", res.Body)
	written := map[string]int{}
	for _, n := range res.JSON(e.t)["notes"].([]any) {
		note := n.(map[string]any)
		written[note["runId"].(string)+"/"+note["nodeId"].(string)]++
	}
	for _, id := range ids {
		for _, node := range noteNodes {
			require.Equal(e.t, 1, written[id+"/"+node], "notes of run %s node %s", id, node)
		}
	}
	require.Len(e.t, written, len(ids)*len(noteNodes))
}

// eventCode is data.code of a recovery event.
func eventCode(t *testing.T, ev recovery) string {
	var d execution.EventData
	require.NoError(t, json.Unmarshal(ev.Data, &d))
	return d.Code
}

// reportDetection logs how long after the kill Temporal declared each lost
// lease (the event's time is the interpreter's, when it learnt of it).
func reportDetection(t *testing.T, drill string, killedAt time.Time, lost []recovery) {
	var ms []float64
	for _, ev := range lost {
		ms = append(ms, float64(ev.At.Sub(killedAt).Milliseconds()))
	}
	sort.Float64s(ms)
	if len(ms) > 0 {
		t.Logf("DRILL %s: %d leases lost; detected %.0f ms (min) / %.0f ms (median) / %.0f ms (max) after the kill",
			drill, len(ms), ms[0], ms[len(ms)/2], ms[len(ms)-1])
	}
}

// The worker is SIGKILLed mid-run and restarted 2 s later: every run
// succeeds without spending an attempt, the lost leases are evidence, and
// no note is written twice.
func TestDrillWorkerKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.spawnWorker()
	ids := e.startDrill("drill", drillGraph, drillRuns)
	e.waitMidAttempt(ids, w, 700*time.Millisecond, 1)
	killedAt := time.Now()
	w.kill(syscall.SIGKILL, 10*time.Second)
	time.Sleep(2 * time.Second) // the drill's restart delay, not a synchronisation
	e.spawnWorker()

	got := e.verifyDrill(ids, "note1", "note2")
	require.NotEmpty(t, got.leaseLost, "the kill interrupted no attempt")
	for _, ev := range got.leaseLost {
		require.Equal(t, execution.InfraLeaseLost, eventCode(t, ev))
	}
	reportDetection(t, "SIGKILL", killedAt, got.leaseLost)
}

// SIGTERM (a rolling deploy) with the default drain window: the worker
// stops polling, lets its running attempts finish and exits; the new
// worker does the rest, and no attempt is spent.
func TestDrillWorkerTerminatedDrains(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.spawnWorker()
	ids := e.startDrill("drill", drillGraph, drillRuns)
	e.waitMidAttempt(ids, w, 700*time.Millisecond, 1)
	took := w.kill(syscall.SIGTERM, 30*time.Second)
	t.Logf("DRILL SIGTERM: the worker drained and exited in %s", took.Round(time.Millisecond))
	time.Sleep(2 * time.Second) // the drill's restart delay
	e.spawnWorker()

	got := e.verifyDrill(ids, "note1", "note2")
	require.Less(t, took, 20*time.Second, "the worker waited for more than its running attempts")
	require.Empty(t, got.infraRetry, "every running attempt finished within the drain window")
	// A task the server hands out at the very moment the worker stops
	// polling is dropped by the SDK (servers without the
	// poll-complete-on-shutdown capability, such as the dev server's 1.29):
	// it comes back as a lost lease, recovered like any other.
	t.Logf("DRILL SIGTERM: %d attempts handed out during the stop recovered as lost leases", len(got.leaseLost))
}

// A drain window shorter than the running attempt: the worker hands the
// attempt back as WORKER_DRAINED just before the window ends, and another
// worker runs the same attempt again at once.
func TestDrillDrainWindowHandsBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.spawnWorker("WEFT_WORKER_DRAIN=1s")
	long := strings.ReplaceAll(drillGraph, `{"literal": 1500}`, `{"literal": 6000}`)
	ids := e.startDrill("drain", long, 2)
	e.waitMidAttempt(ids, w, 3*time.Second, 1)
	took := w.kill(syscall.SIGTERM, 10*time.Second)
	require.Less(t, took, 6*time.Second, "the worker waited for the 6 s nap instead of handing it back")
	e.spawnWorker()

	got := e.verifyDrill(ids, "note1", "note2")
	require.NotEmpty(t, got.infraRetry)
	drained := map[string]bool{}
	for _, ev := range got.infraRetry {
		require.Equal(t, execution.ErrWorkerDrained, eventCode(t, ev))
		drained[ev.attemptKey()] = true
	}
	// A handed-back attempt reached Temporal as such, never as a lost
	// lease; a lost lease here is a task handed out while the worker
	// stopped (see TestDrillWorkerTerminatedDrains), another attempt.
	for _, lost := range got.leaseLost {
		require.NotContains(t, drained, lost.attemptKey())
	}
	t.Logf("DRILL drain window: %d attempts handed back (WORKER_DRAINED), %d handed out during the stop recovered as lost leases",
		len(got.infraRetry), len(got.leaseLost))
}

// Two workers share the queue and one is killed for good: the survivor
// finishes every run, including those whose attempts died with the other.
func TestDrillTwoWorkersOneKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	doomed := e.spawnWorker()
	e.spawnWorker()
	ids := e.startDrill("drill", drillGraph, drillRuns)
	e.waitMidAttempt(ids, doomed, 700*time.Millisecond, 1)
	killedAt := time.Now()
	doomed.kill(syscall.SIGKILL, 10*time.Second)

	got := e.verifyDrill(ids, "note1", "note2")
	require.NotEmpty(t, got.leaseLost, "the kill interrupted no attempt")
	reportDetection(t, "two workers, one SIGKILL", killedAt, got.leaseLost)
}

// outageGraph: the write comes at the end of a 3 s nap, so an outage that
// begins during the nap meets it.
const outageGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "save", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "drill.slowNote", "version": 1},
     "mapping": {"ms": {"literal": 3000}, "title": {"literal": "outage"}, "body": {"pointer": "/in"}}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "save.in"}, {"from": "save.out", "to": "out.in"}]
}`

// PostgreSQL goes away for the API and the worker (a proxy in front of it
// is cut; the shared cluster is untouched). The API answers 503
// STORE_UNAVAILABLE at once; a write that meets the outage re-dispatches
// without spending its attempt; accepted runs finish when it is back, with
// every event exactly once.
func TestDrillPostgresOutage(t *testing.T) {
	t.Parallel()
	e := newOutageEnv(t)
	w := e.spawnWorker()
	ids := e.startDrill("outage", outageGraph, 2)
	e.waitMidAttempt(ids, w, 2*time.Second, len(ids)) // every write is still ahead when the database goes

	e.dbProxy.Cut()
	start := time.Now()
	res := e.enqueue("outage", map[string]any{"during": "outage"}, "during-outage")
	took := time.Since(start)
	require.Equal(t, http.StatusServiceUnavailable, res.Status, "%s", res.Body)
	require.Equal(t, "STORE_UNAVAILABLE", res.Code(t))
	require.Equal(t, "2", res.Header.Get("Retry-After"))
	t.Logf("DRILL PostgreSQL outage: enqueue refused with 503 STORE_UNAVAILABLE in %s", took.Round(time.Millisecond))
	res = e.do(http.MethodGet, "/v1/runs/"+ids[0], e.token, nil)
	require.Equal(t, http.StatusServiceUnavailable, res.Status, "%s", res.Body)

	// Both writes meet the outage: Temporal records their STORE_UNAVAILABLE.
	for _, id := range ids {
		e.waitActivityFailure(id, execution.ErrStoreUnavailable)
	}
	e.dbProxy.Restore()

	got := e.verifyDrill(ids, "save")
	require.Len(t, got.infraRetry, len(ids), "one STORE_UNAVAILABLE re-dispatch per run")
	for _, ev := range got.infraRetry {
		require.Equal(t, execution.ErrStoreUnavailable, eventCode(t, ev))
	}
	// The refused enqueue left nothing behind: the same key starts a fresh run now.
	res = e.enqueue("outage", map[string]any{"during": "outage"}, "during-outage")
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
}

// newOutageEnv is newEnv with the API's and the workers' PostgreSQL behind
// a proxy the test can cut. The run id lookups of waitActivityFailure
// happen before the cut.
func newOutageEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	e.dbProxy = testinfra.NewTCPProxy(t, "127.0.0.1:5432")
	e.serveAPIThrough(e.workerDBURL())
	return e
}

// workflowID is the run's Temporal workflow id, remembered after the first
// lookup (an outage drill needs it while the API cannot answer).
func (e *env) workflowID(runID string) string {
	e.t.Helper()
	if wid, ok := e.workflowIDs[runID]; ok {
		return wid
	}
	wid := e.getRun(runID).Temporal.WorkflowID
	require.NotEmpty(e.t, wid)
	e.workflowIDs[runID] = wid
	return wid
}

// waitActivityFailure waits until the run's workflow history shows an
// activity failure of type typ (Temporal's record: the event log itself
// may be unreachable).
func (e *env) waitActivityFailure(runID, typ string) {
	e.t.Helper()
	e.waitHistoryEvent(runID, 60*time.Second, "no activity failed with "+typ, func(ev *historypb.HistoryEvent) bool {
		f := ev.GetActivityTaskFailedEventAttributes().GetFailure()
		return f != nil && f.GetApplicationFailureInfo().GetType() == typ
	})
}

// waitHistoryEvent waits until the run's workflow history holds an event
// that match accepts.
func (e *env) waitHistoryEvent(runID string, timeout time.Duration, what string, match func(*historypb.HistoryEvent) bool) {
	e.t.Helper()
	wid := e.workflowID(runID)
	require.Eventually(e.t, func() bool {
		it := e.tc.GetWorkflowHistory(context.Background(), wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return false
			}
			if match(ev) {
				return true
			}
		}
		return false
	}, timeout, 100*time.Millisecond, "run %s: %s", runID, what)
}

// waitTaskAfterActivityCompleted waits until the run's history holds a
// workflow task completed after an activity's completion: the first
// workflow task that handled one.
func (e *env) waitTaskAfterActivityCompleted(runID, what string) {
	e.t.Helper()
	after := false
	e.waitHistoryEvent(runID, 2*time.Minute, what, func(ev *historypb.HistoryEvent) bool {
		switch {
		case ev.GetWorkflowExecutionStartedEventAttributes() != nil:
			after = false // each poll reads the history from its start
		case ev.GetActivityTaskCompletedEventAttributes() != nil:
			after = true
		case after && ev.GetWorkflowTaskCompletedEventAttributes() != nil:
			return true
		}
		return false
	})
}

// betweenGraph: an echo, the node whose worker dies just after answering,
// then an echo and a business write. The interpreter's events of the
// workflow task after "die" (its completion, the edge, b's start) exist
// only in its buffer until b carries them to the log.
const betweenGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "a", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "die", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "drill.dieAfterReply", "version": 1},
     "mapping": {"ms": {"pointer": "/in/ms"}}},
    {"id": "b", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "save", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "workspace.notes.write", "version": 1},
     "mapping": {"title": {"literal": "between"}, "body": {"pointer": "/in"}}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "a.in"}, {"from": "a.out", "to": "die.in"}, {"from": "die.out", "to": "b.in"},
    {"from": "b.out", "to": "save.in"}, {"from": "save.out", "to": "out.in"}]
}`

// The worker is killed between an attempt's completion and the append of
// the events that follow it (at three delays after the attempt answered,
// so the kill lands before, during and after the next workflow task): the
// run completes and its log holds every event exactly once — each
// transition once, the chain intact and gapless.
func TestDrillWorkerKilledBetweenCompletionAndAppend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publishDrill("between", betweenGraph)
	for _, ms := range []int{0, 15, 60} {
		marker := filepath.Join(t.TempDir(), "died")
		w := e.spawnWorker(dieMarkerEnv + "=" + marker)
		id := e.run("between", map[string]any{"ms": ms})
		select { // the worker kills itself after "die" answers
		case <-w.exited:
		case <-time.After(60 * time.Second):
			t.Fatalf("delay %d ms: the worker did not die: %v", ms, e.eventTypes(id))
		}
		next := e.spawnWorker(dieMarkerEnv + "=" + marker) // the marker exists: this one lives
		v := e.wait(id, 2*time.Minute)
		require.Equal(t, execution.StatusSucceeded, v.Status, "delay %d ms: %v", ms, e.eventTypes(id))
		e.checkChain(id)
		seen := map[string]int{}
		for _, ev := range e.events(id) {
			var d execution.EventData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			switch ev.Type {
			case execution.EventNodeAttemptLeaseLost, execution.EventNodeAttemptInfraRetry:
				continue // recovery evidence may repeat per re-dispatch
			}
			seen[fmt.Sprintf("%s %s#%d %s>%s", ev.Type, ev.NodeID, ev.Attempt, d.From, d.To)]++
		}
		for k, n := range seen {
			require.Equal(t, 1, n, "delay %d ms: %q appears %d times", ms, k, n)
		}
		for _, node := range []string{"in", "a", "die", "b", "save", "out"} {
			require.Equal(t, 1, seen[fmt.Sprintf("%s %s#1 >", execution.EventNodeCompleted, node)], "delay %d ms: %s completed once", ms, node)
		}
		e.requireNotesOnceFor(id, "save")
		next.kill(syscall.SIGTERM, 30*time.Second)
	}
}

// The worker dies after a read action answered but before any of the
// events its attempts carried could commit: the test holds run_events
// locked (EXCLUSIVE: readers pass, appends wait) from before the run
// starts until the worker is dead. Read actions answer without waiting for
// their carried appends, so "a" and "die" both answer with nothing
// confirmed; the log is still empty when the worker dies. Once the lock
// is released the dead worker's appends may still commit or not: either
// way the next worker carries every event again, and the log holds each
// exactly once, the chain intact, before the run is reported closed.
func TestDrillWorkerKilledBeforeCarriedEventsCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publishDrill("between", betweenGraph)
	marker := filepath.Join(t.TempDir(), "died")
	w := e.spawnWorker(dieMarkerEnv + "=" + marker)

	ctx := context.Background()
	tx, err := e.st.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `LOCK TABLE run_events IN EXCLUSIVE MODE`)
	require.NoError(t, err)
	id := e.run("between", map[string]any{"ms": 0})
	select { // the worker kills itself as soon as "die" answers
	case <-w.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("the worker did not die: %v", e.eventTypes(id))
	}
	require.Empty(t, e.eventTypes(id), "an append committed through the lock")
	require.NoError(t, tx.Rollback(ctx))

	next := e.spawnWorker(dieMarkerEnv + "=" + marker) // the marker exists: this one lives
	v := e.wait(id, 2*time.Minute)
	require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(id))
	e.checkChain(id)
	seen := map[string]int{}
	for _, ev := range e.events(id) {
		var d execution.EventData
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		switch ev.Type {
		case execution.EventNodeAttemptLeaseLost, execution.EventNodeAttemptInfraRetry:
			continue // recovery evidence may repeat per re-dispatch
		}
		seen[fmt.Sprintf("%s %s#%d %s>%s", ev.Type, ev.NodeID, ev.Attempt, d.From, d.To)]++
	}
	for k, n := range seen {
		require.Equal(t, 1, n, "%q appears %d times", k, n)
	}
	require.Equal(t, 1, seen[fmt.Sprintf("%s #0 >", execution.EventRunStarted)], "run.started: %v", seen)
	for _, node := range []string{"in", "a", "die", "b", "save", "out"} {
		require.Equal(t, 1, seen[fmt.Sprintf("%s %s#1 >", execution.EventNodeCompleted, node)], "%s completed once: %v", node, seen)
	}
	e.requireNotesOnceFor(id, "save")
	next.kill(syscall.SIGTERM, 30*time.Second)
}

// requireNotesOnceFor: run id wrote exactly one note from node.
func (e *env) requireNotesOnceFor(id, node string) {
	e.t.Helper()
	res := e.do(http.MethodGet, "/v1/notes?limit=200", e.token, nil)
	require.Equal(e.t, http.StatusOK, res.Status, "%s", res.Body)
	n := 0
	for _, v := range res.JSON(e.t)["notes"].([]any) {
		note := v.(map[string]any)
		if note["runId"] == id && note["nodeId"] == node {
			n++
		}
	}
	require.Equal(e.t, 1, n, "notes of run %s node %s", id, node)
}

// reexecGraph: two naps side by side, joined by a merge. "a" (long)
// precedes "b" (short) in compiled order, so a workflow task that learns
// of a's lost lease together with b's completion records a's evidence
// first, before b's completion. b feeds two instant naps, c and d, so b's
// completion starts two attempts and its workflow task flushes (from
// interpreter version 5 a task that only collects a completion while a
// sibling runs appends nothing, docs/reliability.md).
const reexecGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "a", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.sleep", "version": 1},
     "mapping": {"ms": {"pointer": "/in/long"}}},
    {"id": "b", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.sleep", "version": 1},
     "mapping": {"ms": {"pointer": "/in/short"}}},
    {"id": "c", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.sleep", "version": 1},
     "mapping": {"ms": {"literal": 0}}},
    {"id": "d", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.sleep", "version": 1},
     "mapping": {"ms": {"literal": 0}}},
    {"id": "m", "kind": "merge", "inputs": {"a": "any", "c": "any", "d": "any"}, "outputs": {"out": "any"}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "a.in"}, {"from": "in.out", "to": "b.in"},
    {"from": "b.out", "to": "c.in"}, {"from": "b.out", "to": "d.in"},
    {"from": "a.out", "to": "m.a"}, {"from": "c.out", "to": "m.c"}, {"from": "d.out", "to": "m.d"},
    {"from": "m.out", "to": "out.in"}]
}`

// A flush from a workflow task that never completes, its task executed
// again with more history (docs/reliability.md). b's completion starts c
// and d, so its workflow task flushes in a local activity before it
// schedules them; the test holds run_events locked (EXCLUSIVE) so that
// flush waits in PostgreSQL, then SIGKILLs the worker. a's attempt died
// with it: Temporal times its lease out. Only then is the lock released,
// and the dead worker's flush commits (its statement was already in the
// server). The next worker executes b's workflow task again, now seeing
// a's lost lease as well, which comes first in compiled order: it records
// b's completion after a's evidence, at other ordinals. From interpreter
// version 4 the keys name the events, so the log holds each exactly once;
// with ordinal keys b's completion and its edges were in it twice.
func TestDrillFlushOfATaskExecutedAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publishDrill("reexec", reexecGraph)
	w := e.spawnWorker()
	ctx := context.Background()
	// Naps long enough that, on a loaded machine, the lock is taken before
	// b answers and the worker is killed before a does.
	id := e.run("reexec", map[string]any{"long": 24000, "short": 8000})
	e.waitForEvent(id, execution.EventNodeStarted+" b", 60*time.Second) // the fan-out's flush committed

	tx, err := e.st.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `LOCK TABLE run_events IN EXCLUSIVE MODE`)
	require.NoError(t, err)
	require.NotContains(t, e.eventTypes(id), execution.EventNodeCompleted+" b", "b's flush committed before the lock")
	// b answers after its nap; its workflow task's flush waits for the lock.
	require.Eventually(t, func() bool {
		var waiting int
		err := e.st.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks l
			WHERE l.relation = 'run_events'::regclass AND NOT l.granted
			  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&waiting)
		return err == nil && waiting > 0
	}, 2*time.Minute, 50*time.Millisecond, "no append waited for the lock: %v", e.eventTypes(id))
	w.kill(syscall.SIGKILL, 30*time.Second)
	e.waitActivityTimedOut(id) // a's lost lease is in the history the task will see again

	require.NoError(t, tx.Rollback(ctx))
	require.Eventually(t, func() bool { // the dead worker's flush went through
		return slices.Contains(e.eventTypes(id), execution.EventNodeCompleted+" b")
	}, 2*time.Minute, 50*time.Millisecond, "the dead worker's flush never committed: %v", e.eventTypes(id))

	seen := e.recoverOnce(id, 3*time.Minute)
	require.Equal(t, 1, seen[fmt.Sprintf("%s #0", execution.EventRunStarted)], "run.started: %v", seen)
	require.Equal(t, 1, seen[fmt.Sprintf("%s a#1 r1", execution.EventNodeAttemptLeaseLost)], "a's lost lease: %v", seen)
	for _, node := range []string{"in", "a", "b", "c", "d", "m", "out"} {
		require.Equal(t, 1, seen[fmt.Sprintf("%s %s#1", execution.EventNodeCompleted, node)], "%s completed once: %v", node, seen)
	}
	for _, to := range []string{"c.in", "d.in"} {
		require.Equal(t, 1, seen[fmt.Sprintf("%s b#1 b.out>%s", execution.EventEdgeTaken, to)], "b's edge to %s: %v", to, seen)
	}
}

// publishDrill publishes graph under key once the drill actions are: a
// first worker publishes them as it starts, and stops.
func (e *env) publishDrill(key, graph string) {
	e.t.Helper()
	first := e.spawnWorker() // publishes the drill actions
	first.kill(syscall.SIGTERM, 30*time.Second)
	e.publish(key, graph)
}

// recoverOnce runs the next worker until the run id succeeds (within
// timeout), checks its chain and that its log holds each event once, stops
// that worker, and returns the events so named (requireEachEventOnce).
func (e *env) recoverOnce(id string, timeout time.Duration) map[string]int {
	e.t.Helper()
	next := e.spawnWorker() // a failed check leaves it to the test's cleanup
	v := e.wait(id, timeout)
	require.Equal(e.t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(id))
	e.checkChain(id)
	seen := e.requireEachEventOnce(id)
	next.kill(syscall.SIGTERM, 30*time.Second)
	return seen
}

// requireEachEventOnce fails if the run's log holds an event twice: two
// events alike in type, node, attempt and what tells such events apart
// (edge, re-dispatch, approval request). It returns the events so named.
func (e *env) requireEachEventOnce(id string) map[string]int {
	e.t.Helper()
	seen := map[string]int{}
	for _, ev := range e.events(id) {
		var d execution.EventData
		require.NoError(e.t, json.Unmarshal(ev.Data, &d))
		name := fmt.Sprintf("%s %s#%d", ev.Type, ev.NodeID, ev.Attempt)
		switch {
		case d.From != "":
			name += " " + d.From + ">" + d.To
		case d.Redispatch > 0:
			name += fmt.Sprintf(" r%d", d.Redispatch)
		case d.Request > 0:
			name += fmt.Sprintf(" q%d", d.Request)
		}
		seen[name]++
	}
	for k, n := range seen {
		require.Equal(e.t, 1, n, "%q appears %d times: %v", k, n, e.eventTypes(id))
	}
	return seen
}

// waitActivityTimedOut waits until the run's workflow history shows an
// activity timeout (a lost lease, as Temporal records it).
func (e *env) waitActivityTimedOut(runID string) {
	e.t.Helper()
	e.waitHistoryEvent(runID, 2*time.Minute, "no activity timed out", func(ev *historypb.HistoryEvent) bool {
		return ev.GetActivityTaskTimedOutEventAttributes() != nil
	})
}

// deferGraph: two naps side by side joined by a merge; b ends long
// before a, so b's completion arrives in a workflow task that starts
// nothing while a still runs.
const deferGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "a", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.sleep", "version": 1},
     "mapping": {"ms": {"pointer": "/in/long"}}},
    {"id": "b", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.sleep", "version": 1},
     "mapping": {"ms": {"pointer": "/in/short"}}},
    {"id": "m", "kind": "merge", "inputs": {"a": "any", "b": "any"}, "outputs": {"out": "any"}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "a.in"}, {"from": "in.out", "to": "b.in"},
    {"from": "a.out", "to": "m.a"}, {"from": "b.out", "to": "m.b"}, {"from": "m.out", "to": "out.in"}]
}`

// From interpreter version 5 the workflow task that collects b's
// completion while a still runs appends nothing (docs/reliability.md):
// b's completion and its edge exist only in the interpreter's buffer.
// From version 10 the fan-out of these two reads starts without a flush:
// a, the first, carries the run's start, the run's update and both
// node.started, and b's workflow task also leaves the update, which a
// still holds, in the buffer. The worker is SIGKILLed then; the next
// worker rebuilds the buffer from the history, a's lost lease
// re-dispatches it, and the run's appends put every event in the log
// exactly once, the chain intact.
func TestDrillWorkerKilledWithDeferredEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The deferral's own timer would flush b's completion 1 s after it
	// (Durability.EventDeferMs); two minutes leave the kill below all the
	// time it needs on a loaded machine.
	e.cfg.Durability.EventDeferMs = (2 * time.Minute).Milliseconds()
	e.serveAPI(e.st)
	e.publishDrill("deferred", deferGraph)
	w := e.spawnWorker()
	id := e.run("deferred", map[string]any{"long": 20000, "short": 1000})
	// The first workflow task completed after an activity's completion is
	// b's: a naps 20 s (within the node's 30 s timeout).
	e.waitTaskAfterActivityCompleted(id, "no workflow task completed after b's completion")
	types := e.eventTypes(id)
	require.Contains(t, types, execution.EventNodeStarted+" b", "the fan-out's flush, or from version 10 a's carried append")
	require.NotContains(t, types, execution.EventNodeCompleted+" b", "b's completion was deferred, not flushed")
	// Version 10: the first workflow task records the version and the
	// plan's local activity, and no flush, before it schedules the fan-out.
	markers := 0
	e.waitHistoryEvent(id, time.Minute, "no activity scheduled", func(ev *historypb.HistoryEvent) bool {
		switch {
		case ev.GetWorkflowExecutionStartedEventAttributes() != nil:
			markers = 0
		case ev.GetMarkerRecordedEventAttributes() != nil:
			markers++
		}
		return ev.GetActivityTaskScheduledEventAttributes() != nil
	})
	require.Equal(t, 2, markers, "the version and the plan's markers only: the fan-out was not flushed")
	w.kill(syscall.SIGKILL, 30*time.Second)

	seen := e.recoverOnce(id, 4*time.Minute)
	for _, node := range []string{"in", "a", "b", "m", "out"} {
		require.Equal(t, 1, seen[fmt.Sprintf("%s %s#1", execution.EventNodeCompleted, node)], "%s completed once: %v", node, seen)
	}
	require.Equal(t, 1, seen[fmt.Sprintf("%s b#1 b.out>m.b", execution.EventEdgeTaken)], "b's edge: %v", seen)
}

// readDeferGraph: two naps in a row, both core.sleep (risk read): r
// carries the run's start, s starts carrying nothing (interpreter version
// 8), so r's completion, its edge and s's start exist only in the
// interpreter's buffer while s naps.
const readDeferGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "r", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.sleep", "version": 1},
     "mapping": {"ms": {"pointer": "/in/short"}}},
    {"id": "s", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.sleep", "version": 1},
     "mapping": {"ms": {"literal": 20000}}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "r.in"}, {"from": "r.out", "to": "s.in"}, {"from": "s.out", "to": "out.in"}]
}`

// From interpreter version 8 a read action's attempt starts carrying no
// events, from version 9 carrying them lazily, to be appended only once
// they are EventDeferMs old (docs/reliability.md): s naps while its
// node.started, r's completion and r's edge exist only in the
// interpreter's buffer. The
// worker is SIGKILLed then; the next worker rebuilds the buffer from the
// history, s's lost lease re-dispatches it, and the run's appends put
// every event in the log exactly once, the chain intact.
func TestDrillWorkerKilledWithADeferredReadStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The deferral's own timer (interpreter version 8), or s's own lazy
	// append of the events it carries (version 9), would bring s's start
	// to the log 1 s after r's completion (Durability.EventDeferMs); two
	// minutes leave the kill below all the time it needs on a loaded
	// machine: it comes while s holds those events lazily, before their
	// time.
	e.cfg.Durability.EventDeferMs = (2 * time.Minute).Milliseconds()
	e.serveAPI(e.st)
	e.publishDrill("read-defer", readDeferGraph)
	w := e.spawnWorker()
	id := e.run("read-defer", map[string]any{"short": 100})
	// The first workflow task completed after an activity's completion is
	// the one that started s (20 s, within the node's 30 s timeout).
	e.waitTaskAfterActivityCompleted(id, "no workflow task completed after r's completion")
	// Time for s to start and for any append it carried to commit (a
	// version 7 interpreter's s carries these events): none did.
	time.Sleep(3 * time.Second)
	types := e.eventTypes(id)
	require.NotContains(t, types, execution.EventNodeCompleted+" r", "r's completion was deferred: %v", types)
	require.NotContains(t, types, execution.EventNodeStarted+" s", "s started carrying nothing, or carrying it lazily: %v", types)
	w.kill(syscall.SIGKILL, 30*time.Second)

	seen := e.recoverOnce(id, 4*time.Minute)
	for _, node := range []string{"in", "r", "out"} {
		require.Equal(t, 1, seen[fmt.Sprintf("%s %s#1", execution.EventNodeCompleted, node)], "%s completed once: %v", node, seen)
	}
	require.Equal(t, 1, seen[fmt.Sprintf("%s s#1", execution.EventNodeStarted)], "s's start: %v", seen)
	require.Equal(t, 1, seen[fmt.Sprintf("%s r#1 r.out>s.in", execution.EventEdgeTaken)], "r's edge: %v", seen)
}
