package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/starter"
)

// napGraph naps for the input's ms, so runs overlap long enough to count.
const napGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "nap", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"},
     "action": {"id": "core.sleep", "version": 1}, "mapping": {"ms": {"pointer": "/in/ms"}}, "timeoutMs": 60000},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "nap.in"}, {"from": "nap.out", "to": "out.in"}]
}`

// capView is what the cap tests read of a run through the API.
type capView struct {
	RunID      string     `json:"runId"`
	Status     string     `json:"status"`
	CreatedAt  time.Time  `json:"createdAt"`
	AdmittedAt *time.Time `json:"admittedAt"`
	Position   int        `json:"position"`
}

func (e *env) capRun(id string) capView {
	e.t.Helper()
	res := e.do(http.MethodGet, "/v1/runs/"+id, e.token, nil)
	require.Equal(e.t, http.StatusOK, res.Status, "%s", res.Body)
	var v capView
	require.NoError(e.t, json.Unmarshal(res.Body, &v))
	return v
}

// slotSampler reads, every 100 ms, how many runs of the workflow are
// running, and how many hold a slot (queued or running), straight from
// PostgreSQL, and keeps the highest of each.
type slotSampler struct {
	mu                   sync.Mutex
	maxRunning, maxSlots int
	samples              int
	stop                 chan struct{}
	done                 chan struct{}
}

func (e *env) sampleSlots(key string) *slotSampler {
	s := &slotSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			var running, slots int
			err := e.st.Pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE status = 'running'),
				count(*) FILTER (WHERE status IN ('queued', 'running')) FROM runs WHERE tenant_id = $1 AND workflow_key = $2`,
				e.tenant, key).Scan(&running, &slots)
			if err == nil {
				s.mu.Lock()
				s.samples++
				s.maxRunning, s.maxSlots = max(s.maxRunning, running), max(s.maxSlots, slots)
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *slotSampler) finish() (maxRunning, maxSlots, samples int) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxRunning, s.maxSlots, s.samples
}

// eventAt returns the time of the run's first event of type typ.
func (e *env) eventAt(id, typ string) (time.Time, bool) {
	for _, ev := range e.events(id) {
		if ev.Type == typ {
			return ev.At, true
		}
	}
	return time.Time{}, false
}

// maxOverlap is the most intervals [start, end] open at once.
func maxOverlap(starts, ends []time.Time) int {
	type edge struct {
		at   time.Time
		open int
	}
	var edges []edge
	for i := range starts {
		edges = append(edges, edge{starts[i], 1}, edge{ends[i], -1})
	}
	// At a tie an end comes first: a run settled before the next started.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].open < edges[j].open
		}
		return edges[i].at.Before(edges[j].at)
	})
	open, most := 0, 0
	for _, e := range edges {
		open += e.open
		most = max(most, open)
	}
	return most
}

// apiProc is a second API replica: the weft binary built from this tree
// running `weft api` (with its own sweeper and dispatcher) against the
// env's database, dev server and task queue.
type apiProc struct {
	url    string
	logs   *testinfra.SyncBuffer
	exited chan struct{}
}

func (e *env) spawnAPI() *apiProc {
	e.t.Helper()
	bin := filepath.Join(e.t.TempDir(), "weft")
	build := exec.Command("go", "build", "-o", bin, "./cmd/weft")
	build.Dir = testinfra.RepoRoot()
	out, err := build.CombinedOutput()
	require.NoError(e.t, err, "build weft: %s", out)
	port := testinfra.FreePort(e.t)
	cmd := exec.Command(bin, "api")
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+e.dbURL,
		"TEMPORAL_ADDRESS="+e.temporal.HostPort,
		"TEMPORAL_NAMESPACE=default",
		"TEMPORAL_API_KEY=", "TEMPORAL_TLS_CERT=", "TEMPORAL_TLS_KEY=",
		"WEFT_TASK_QUEUE="+e.queue,
		"WEFT_JWT_SECRET="+jwtSecret,
		"WEFT_HTTP_ADDR=127.0.0.1:"+strconv.Itoa(port),
		"WEFT_DATA_DIR="+e.t.TempDir(),
	)
	p := &apiProc{url: "http://127.0.0.1:" + strconv.Itoa(port), logs: &testinfra.SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(e.t, cmd.Start())
	go func() { _ = cmd.Wait(); close(p.exited) }()
	e.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if e.t.Failed() {
			e.t.Logf("weft api output:\n%s", p.logs.String())
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-p.exited:
			e.t.Fatalf("weft api exited:\n%s", p.logs.String())
		default:
		}
		if res, err := http.Get(p.url + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("weft api never answered /healthz:\n%s", p.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// capScenario is the concurrency must-show: maxConcurrentRuns 2, 8 runs
// enqueued at once from 4 threads (through the APIs given, in turn), a 9th
// cancelled while throttled, repeats of every enqueue and sweeps all
// along; sampled every 100 ms, never more than 2 hold a slot.
func (e *env) capScenario(key string, apis []string) {
	t := e.t
	e.publish(key, napGraph)
	res := e.do(http.MethodPut, "/v1/workflows/"+key+"/limits", e.token, map[string]any{"maxConcurrentRuns": 2})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	sampler := e.sampleSlots(key)

	const threads, perThread = 4, 2
	type enqueued struct{ id, idem string }
	var mu sync.Mutex
	var runs []enqueued
	var wg sync.WaitGroup
	start := make(chan struct{})
	for th := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range perThread {
				idem := fmt.Sprintf("%s-%d-%d", key, th, i)
				base := apis[(th*perThread+i)%len(apis)]
				r := testinfra.Do(t, base, http.MethodPost, "/v1/workflows/"+key+"/runs", e.token,
					map[string]any{"input": map[string]any{"ms": 1200}, "idempotencyKey": idem})
				if r.Status != http.StatusAccepted {
					t.Errorf("enqueue %s: %d %s", idem, r.Status, r.Body)
					return
				}
				mu.Lock()
				runs = append(runs, enqueued{r.JSON(t)["runId"].(string), idem})
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Len(t, runs, threads*perThread)

	// A 9th run waits behind them and is cancelled: it never starts.
	res = e.do(http.MethodPost, "/v1/workflows/"+key+"/runs", e.token, map[string]any{"input": map[string]any{"ms": 1}, "idempotencyKey": key + "-cancelled"})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Equal(t, "throttled", res.JSON(t)["status"], "%s", res.Body)
	require.Positive(t, res.JSON(t)["position"])
	cancelledID := res.JSON(t)["runId"].(string)
	res = e.do(http.MethodPost, "/v1/runs/"+cancelledID+"/cancel", e.token, nil)
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Equal(t, "cancelled", res.JSON(t)["status"])

	// Repeats of every enqueue and sweeps, all along, start nothing extra.
	ctx, stopHammer := context.WithCancel(context.Background())
	hammered := make(chan int)
	go func() {
		n := 0
		defer func() { hammered <- n }()
		for ctx.Err() == nil {
			for _, r := range runs {
				base := apis[n%len(apis)]
				rr := testinfra.Do(t, base, http.MethodPost, "/v1/workflows/"+key+"/runs", e.token,
					map[string]any{"input": map[string]any{"ms": 1200}, "idempotencyKey": r.idem})
				if rr.Status != http.StatusOK {
					t.Errorf("repeat %s: %d %s", r.idem, rr.Status, rr.Body)
				}
			}
			if _, err := e.starter.Sweep(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("sweep: %v", err)
			}
			n++
		}
	}()

	var views []capView
	for _, r := range runs {
		v := e.wait(r.id, 3*time.Minute)
		require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(r.id))
	}
	stopHammer()
	require.Positive(t, <-hammered, "the repeats and sweeps ran while the runs did")
	maxRunning, maxSlots, samples := sampler.finish()
	t.Logf("%s: %d samples; at most %d running, %d holding a slot", key, samples, maxRunning, maxSlots)
	require.LessOrEqual(t, maxRunning, 2)
	require.LessOrEqual(t, maxSlots, 2)
	require.Equal(t, 2, maxRunning, "the cap was reached")

	// Exactly, from the event log: never more than 2 runs between their
	// run.started and run.succeeded.
	var starts, ends []time.Time
	for _, r := range runs {
		s, ok1 := e.eventAt(r.id, execution.EventRunStarted)
		f, ok2 := e.eventAt(r.id, execution.EventRunSucceeded)
		require.True(t, ok1 && ok2, "%v", e.eventTypes(r.id))
		starts, ends = append(starts, s), append(ends, f)
		views = append(views, e.capRun(r.id))
	}
	require.Equal(t, 2, maxOverlap(starts, ends))

	// Started in enqueue order: sorted by when they were accepted, the runs
	// were admitted (their start issued) in the same order.
	sort.Slice(views, func(i, j int) bool { return views[i].CreatedAt.Before(views[j].CreatedAt) })
	for i, v := range views {
		require.NotNil(t, v.AdmittedAt, v.RunID)
		if i > 0 {
			require.False(t, v.AdmittedAt.Before(*views[i-1].AdmittedAt), "run %d was admitted before run %d", i, i-1)
		}
	}
	// How promptly a freed slot is taken: for each run that waited, from
	// the latest settlement before its admission to the admission.
	var lags []time.Duration
	for _, v := range views {
		var freed time.Time
		for _, end := range ends {
			if !end.After(*v.AdmittedAt) && end.After(freed) {
				freed = end
			}
		}
		if !freed.IsZero() {
			lags = append(lags, v.AdmittedAt.Sub(freed))
		}
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	if len(lags) > 0 {
		t.Logf("%s: settlement to next admission: median %s, max %s (%d admissions)", t.Name(), lags[len(lags)/2], lags[len(lags)-1], len(lags))
	}
	throttled := 0
	for _, r := range runs {
		for _, ev := range e.events(r.id) {
			if ev.Type == execution.EventRunThrottled {
				throttled++
			}
		}
	}
	require.GreaterOrEqual(t, throttled, len(runs)-2, "at least 6 of 8 runs waited for a slot")

	// The cancelled run never started: no workflow, no run.started.
	c := e.capRun(cancelledID)
	require.Equal(t, execution.StatusCancelled, c.Status)
	require.Nil(t, c.AdmittedAt)
	require.Equal(t, []string{execution.EventRunThrottled, execution.EventRunCancelled}, e.eventTypes(cancelledID))
	_, err := e.tc.DescribeWorkflow(context.Background(), starter.WorkflowID(e.tenant, key, key+"-cancelled"), "")
	var nf *serviceerror.NotFound
	require.True(t, errors.As(err, &nf), "the cancelled throttled run has a workflow: %v", err)
}

// TestConcurrencyCapHoldsAcrossAPIReplicas is the concurrency must-show,
// first through one API, then with a second API process (`weft api`)
// enqueuing every other run: the decision is PostgreSQL's, so the cap holds
// across replicas.
func TestConcurrencyCapHoldsAcrossAPIReplicas(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go e.starter.RunDispatcher(ctx)

	t.Run("one API", func(t *testing.T) {
		e.t = t
		e.capScenario("capped-one", []string{e.srv.URL})
	})
	t.Run("two API processes", func(t *testing.T) {
		e.t = t
		second := e.spawnAPI()
		e.capScenario("capped-two", []string{e.srv.URL, second.url})
	})
}

// TestStartRateOverABurst: maxStartsPerMinute 2 and a burst of 4 runs. Two
// start at once; the others wait throttled until the minute of the first
// two admissions has passed (the dispatcher's timer wakes them: no
// settlement does); in no minute are more than 2 admitted.
func TestStartRateOverABurst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go e.starter.RunDispatcher(ctx)
	e.publish("paced", itemGraph)
	res := e.do(http.MethodPut, "/v1/workflows/paced/limits", e.token, map[string]any{"maxStartsPerMinute": 2})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	var ids []string
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.enqueue("paced", map[string]any{"id": fmt.Sprint(i)}, uuid.NewString())
			if r.Status != http.StatusAccepted {
				t.Errorf("enqueue %d: %d %s", i, r.Status, r.Body)
				return
			}
			mu.Lock()
			ids = append(ids, r.JSON(t)["runId"].(string))
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.Len(t, ids, 4)
	// Two finish while the other two still wait: the rate, not a slot, holds them.
	var waiting []string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		done, throttled := 0, 0
		waiting = waiting[:0]
		for _, id := range ids {
			switch e.capRun(id).Status {
			case execution.StatusSucceeded:
				done++
			case execution.StatusThrottled:
				throttled++
				waiting = append(waiting, id)
			}
		}
		if done == 2 && throttled == 2 {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d succeeded and %d throttled after a minute, want 2 and 2", done, throttled)
	}
	lim := e.do(http.MethodGet, "/v1/workflows/paced/limits", e.token, nil).JSON(t)
	require.EqualValues(t, 2, lim["startsLastMinute"])
	require.EqualValues(t, 2, lim["throttled"])

	var views []capView
	for _, id := range ids {
		require.Equal(t, execution.StatusSucceeded, e.wait(id, 3*time.Minute).Status)
		views = append(views, e.capRun(id))
	}
	sort.Slice(views, func(i, j int) bool { return views[i].AdmittedAt.Before(*views[j].AdmittedAt) })
	for i := range views {
		for j := i + 2; j < len(views); j++ {
			gap := views[j].AdmittedAt.Sub(*views[i].AdmittedAt)
			require.GreaterOrEqual(t, gap, time.Minute, "3 admissions within %s", gap)
		}
	}
	// They were started a minute after the first, not much later (the
	// dispatcher's timer, not the sweeper, woke them).
	require.Less(t, views[2].AdmittedAt.Sub(*views[0].AdmittedAt), time.Minute+15*time.Second)
	require.ElementsMatch(t, waiting, []string{views[2].RunID, views[3].RunID})
}

// spenderAgent declares 100 input and 50 output tokens per turn: a tool
// call, then its answer.
const spenderAgent = `{
  "instructions": "Spend.", "allowedTools": ["core.echo@1"],
  "outputSchema": {"type": "object"},
  "sim": {"toolCalls": [{"tool": "core.echo@1", "input": {"x": 1}}], "output": {"ok": true},
          "usage": {"inputTokens": 100, "outputTokens": 50}}
}`

const spendGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "spend", "kind": "agent", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "agent": {"key": "spender", "revision": 1},
     "retry": {"maxAttempts": 3, "initialIntervalMs": 100, "backoff": 1.0}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "spend.in"}, {"from": "spend.out", "to": "out.in"}]
}`

const parallelSpendGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "left", "kind": "agent", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "agent": {"key": "spender", "revision": 1}},
    {"id": "right", "kind": "agent", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "agent": {"key": "spender", "revision": 1}},
    {"id": "join", "kind": "merge", "inputs": {"l": "any", "r": "any"}, "outputs": {"out": "any"}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "left.in"}, {"from": "in.out", "to": "right.in"},
    {"from": "left.out", "to": "join.l"}, {"from": "right.out", "to": "join.r"}, {"from": "join.out", "to": "out.in"}]
}`

// TestBudgetsEndRunsBeforeTheyOverspend: a budget below what the sim agent
// uses ends the run BUDGET_EXCEEDED before the call that would exceed it;
// two parallel agent nodes sharing the workflow's default budget never
// overspend it; the budget is bound with the idempotency key.
func TestBudgetsEndRunsBeforeTheyOverspend(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	e.addAgent("spender", spenderAgent)
	e.publish("spend", spendGraph)
	e.publish("twins", parallelSpendGraph)
	e.startWorker()

	res := e.do(http.MethodPost, "/v1/workflows/spend/runs", e.token,
		map[string]any{"input": map[string]any{}, "idempotencyKey": "small", "budget": map[string]any{"maxTokens": 200}})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	id := res.JSON(t)["runId"].(string)
	res = e.do(http.MethodPost, "/v1/workflows/spend/runs", e.token,
		map[string]any{"input": map[string]any{}, "idempotencyKey": "small", "budget": map[string]any{"maxTokens": 300}})
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	require.Equal(t, "IDEMPOTENCY_CONFLICT", res.Code(t))

	v := e.wait(id, time.Minute)
	require.Equal(t, execution.StatusFailed, v.Status)
	require.Equal(t, execution.RunErrNodeFailed, v.Error.Code)
	require.Equal(t, "spend", v.Error.NodeID)
	require.Contains(t, v.Error.Message, "spent 150 of its 200 tokens and the next model call needs 150")
	status, attempt, _, reason := v.node(t, "spend")
	require.Equal(t, execution.NodeFailed, status)
	require.Equal(t, execution.ErrBudgetExceeded, reason)
	require.Equal(t, 1, attempt, "not retryable: one attempt of three")
	require.EqualValues(t, 150, v.Usage["totalTokens"])
	require.EqualValues(t, 1, v.Usage["calls"])
	turns := 0
	var exceeded map[string]any
	for _, ev := range e.events(id) {
		switch ev.Type {
		case agents.EventAgentTurn:
			turns++
		case agents.EventBudgetExceeded:
			require.NoError(t, json.Unmarshal(ev.Data, &exceeded))
		}
	}
	require.Equal(t, 1, turns, "the call that would exceed the budget was never made")
	require.Equal(t, map[string]any{"total": 150.0, "costUsd": 0.0}, exceeded["spent"])
	require.Equal(t, 200.0, exceeded["allowed"].(map[string]any)["total"])
	e.checkChain(id)

	// The workflow's default budget, shared by two parallel agent nodes
	// whose four calls need 600: exactly three fit.
	res = e.do(http.MethodPut, "/v1/workflows/twins/limits", e.token, map[string]any{"budget": map[string]any{"maxTokens": 450}})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	for i := range 3 {
		id := e.run("twins", map[string]any{"i": i})
		v := e.wait(id, time.Minute)
		require.Equal(t, execution.StatusFailed, v.Status, "%v", e.eventTypes(id))
		require.EqualValues(t, 450, v.Usage["totalTokens"], "spent exactly the budget")
		require.EqualValues(t, 3, v.Usage["calls"])
		failed := 0
		for _, node := range []string{"left", "right"} {
			if s, _, _, r := v.node(t, node); s == execution.NodeFailed {
				require.Equal(t, execution.ErrBudgetExceeded, r)
				failed++
			}
		}
		require.Equal(t, 1, failed)
		var b struct {
			Budget struct {
				MaxTokens *int64 `json:"maxTokens"`
			} `json:"budget"`
		}
		require.NoError(t, json.Unmarshal(e.do(http.MethodGet, "/v1/runs/"+id, e.token, nil).Body, &b))
		require.EqualValues(t, 450, *b.Budget.MaxTokens, "the workflow's default")
	}
}
