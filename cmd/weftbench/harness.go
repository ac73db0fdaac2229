package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/devserver"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/worker"
)

// Options configure a benchmark run.
type Options struct {
	Rounds      int
	Warmup      int
	Concurrency int
	Bursts      int
	TemporalCLI string
	AdminURL    string
}

// chainLength is the number of core.echo nodes in the measured graph.
const chainLength = 10

// chainKey is the measured workflow's key.
const chainKey = "chain10"

// Hand-written baseline: one workflow running chainLength echo activities in
// sequence, on the same worker and task queue as weft's interpreter.
const (
	handWorkflowName = "bench.HandWritten"
	handActivityName = "bench.Echo"
)

// handWritten is the baseline workflow as one would write it by hand for
// Temporal: the same number of activities, each with a summary naming it.
func handWritten(ctx workflow.Context, input json.RawMessage) (json.RawMessage, error) {
	v := input
	for i := 1; i <= chainLength; i++ {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 10 * time.Second,
			Summary:             fmt.Sprintf("e%d · echo", i),
		})
		if err := workflow.ExecuteActivity(actx, handActivityName, v).Get(ctx, &v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func handEcho(_ context.Context, in json.RawMessage) (json.RawMessage, error) { return in, nil }

// chainGraph is input → e1 → … → e10 → output, every e a core.echo@1 action.
func chainGraph() json.RawMessage {
	nodes := []map[string]any{{"id": "in", "kind": "input", "outputs": map[string]string{"out": "any"}}}
	edges := []map[string]string{}
	prev := "in"
	for i := 1; i <= chainLength; i++ {
		id := fmt.Sprintf("e%d", i)
		nodes = append(nodes, map[string]any{"id": id, "kind": "action",
			"inputs": map[string]string{"in": "any"}, "outputs": map[string]string{"out": "any"},
			"action": map[string]any{"id": "core.echo", "version": 1}})
		edges = append(edges, map[string]string{"from": prev + ".out", "to": id + ".in"})
		prev = id
	}
	nodes = append(nodes, map[string]any{"id": "out", "kind": "output", "inputs": map[string]string{"in": "any"}})
	edges = append(edges, map[string]string{"from": prev + ".out", "to": "out.in"})
	raw, _ := json.Marshal(map[string]any{"schemaVersion": 1, "nodes": nodes, "edges": edges})
	return raw
}

var benchInput = json.RawMessage(`{"text":"hello from weftbench","n":42}`)

// env is one dev server with everything weft runs against it.
type env struct {
	name    string
	srv     *testsuite.DevServer
	tc      client.Client
	queue   string
	tenant  string
	token   string
	handler http.Handler
	store   *store.Store
	worker  sdkworker.Worker
}

// Run runs the benchmark and writes a Markdown report to out; progress
// goes to progress.
func Run(ctx context.Context, o Options, out, progress io.Writer) (*Report, error) {
	if o.Rounds < 1 || o.Concurrency < 1 || o.Bursts < 1 || o.Warmup < 0 {
		return nil, errors.New("rounds, concurrency and bursts must be positive, warmup non-negative")
	}
	if _, err := os.Stat(o.TemporalCLI); err != nil {
		return nil, fmt.Errorf("%s is required (make bin/temporal): %w", o.TemporalCLI, err)
	}
	logf := func(format string, args ...any) { fmt.Fprintf(progress, "weftbench: "+format+"\n", args...) }
	logger := slog.New(slog.NewJSONHandler(progress, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rep := &Report{Options: o, Started: time.Now(), LoadBefore: loadAverage(), CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}

	dbURL, dropDB, err := createDatabase(ctx, o.AdminURL)
	if err != nil {
		return nil, err
	}
	defer dropDB()
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if err := store.Migrate(ctx, st.Pool); err != nil {
		return nil, err
	}
	logf("fresh database %s", dbURL)

	tuned, err := newEnv(ctx, "tuned", o.TemporalCLI, true, st, logger, progress)
	if err != nil {
		return nil, err
	}
	defer tuned.close()
	stock, err := newEnv(ctx, "stock", o.TemporalCLI, false, st, logger, progress)
	if err != nil {
		return nil, err
	}
	defer stock.close()
	logf("dev servers: tuned %s, stock %s", tuned.srv.FrontendHostPort(), stock.srv.FrontendHostPort())

	type config struct {
		name string
		run  func(ctx context.Context, idem string) (time.Duration, error)
	}
	configs := []config{
		{"weft, tuned dev server", tuned.weftRun},
		{"weft, stock dev server", stock.weftRun},
		{"hand-written workflow, tuned dev server", tuned.handRun},
	}
	for _, c := range configs {
		for i := 0; i < o.Warmup; i++ {
			if _, err := c.run(ctx, "warmup-"+uuid.NewString()); err != nil {
				return nil, fmt.Errorf("warmup %s: %w", c.name, err)
			}
		}
	}
	logf("latency: %d rounds of %d configurations", o.Rounds, len(configs))
	samples := make([][]time.Duration, len(configs))
	for r := 0; r < o.Rounds; r++ {
		for k := range configs {
			i := (r + k) % len(configs) // rotate the order every round
			d, err := configs[i].run(ctx, fmt.Sprintf("lat-%d-%d-%s", r, i, uuid.NewString()))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", configs[i].name, err)
			}
			samples[i] = append(samples[i], d)
		}
	}
	for i, c := range configs {
		rep.Latency = append(rep.Latency, summarize(c.name, samples[i]))
	}

	logf("throughput: %d bursts of %d runs per configuration", o.Bursts, o.Concurrency)
	bursts := []struct {
		name string
		run  func(ctx context.Context, idem string) (time.Duration, error)
	}{
		{"weft, tuned dev server", tuned.weftRun},
		{"hand-written workflow, tuned dev server", tuned.handRun},
	}
	results := make([][]burstResult, len(bursts))
	for b := 0; b < o.Bursts; b++ {
		for k := range bursts {
			i := (b + k) % len(bursts)
			res, err := burst(ctx, o.Concurrency, fmt.Sprintf("burst-%d-%d", b, i), bursts[i].run)
			if err != nil {
				return nil, fmt.Errorf("%s burst: %w", bursts[i].name, err)
			}
			results[i] = append(results[i], res)
		}
	}
	for i, b := range bursts {
		rep.Throughput = append(rep.Throughput, summarizeBursts(b.name, results[i]))
	}
	rep.LoadAfter = loadAverage()
	rep.Elapsed = time.Since(rep.Started)
	rep.write(out)
	return rep, nil
}

// newEnv starts a dev server (tuned: weft's dynamic config; otherwise the
// stock flags) with weft's search attributes, and wires a worker, the
// starter and the API to it, then publishes the chain.
func newEnv(ctx context.Context, name, bin string, tuned bool, st *store.Store, logger *slog.Logger, progress io.Writer) (*env, error) {
	args := devserver.SearchAttributeArgs() // weft's runs carry them; without them starts fail
	if tuned {
		args = append(devserver.ExtraArgs(), args...)
	}
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	srv, err := testsuite.StartDevServer(sctx, testsuite.DevServerOptions{
		ExistingPath: bin,
		ClientOptions: &client.Options{Namespace: "default",
			Logger: sdklog.NewStructuredLogger(logger.With("component", "temporal-sdk", "server", name))},
		LogLevel:  "error",
		ExtraArgs: args,
		Stdout:    progress,
		Stderr:    progress,
	})
	if err != nil {
		return nil, fmt.Errorf("start %s dev server: %w", name, err)
	}
	e := &env{name: name, srv: srv, tc: srv.Client(), queue: "bench-" + name, tenant: "bench-" + name, store: st}
	cfg, err := config.FromEnv(func(string) string { return "" })
	if err != nil {
		e.close()
		return nil, err
	}
	cfg.TaskQueue = e.queue
	w := sdkworker.New(e.tc, e.queue, worker.Options(cfg, logger))
	if err := worker.Register(w, worker.Deps{Config: cfg, Store: st, Temporal: e.tc, Logger: logger}); err != nil {
		e.close()
		return nil, err
	}
	w.RegisterWorkflowWithOptions(handWritten, workflow.RegisterOptions{Name: handWorkflowName})
	w.RegisterActivityWithOptions(handEcho, activity.RegisterOptions{Name: handActivityName})
	if err := w.Start(); err != nil {
		e.close()
		return nil, err
	}
	e.worker = w
	runs, err := starter.New(starter.Deps{Store: st, Temporal: e.tc, TaskQueue: e.queue,
		UIURL: "http://localhost:8233", Namespace: "default", Logger: logger})
	if err != nil {
		e.close()
		return nil, err
	}
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	keys, err := auth.NewKeys(hex.EncodeToString(secret))
	if err != nil {
		e.close()
		return nil, err
	}
	e.token, err = keys.Mint(auth.Principal{Tenant: e.tenant, Sub: "bench", Scopes: auth.AllScopes}, 24*time.Hour)
	if err != nil {
		e.close()
		return nil, err
	}
	e.handler = api.New(api.Deps{Config: cfg, Store: st, Keys: keys, Temporal: e.tc, Logger: logger, Starter: runs})
	if err := e.publish(); err != nil {
		e.close()
		return nil, fmt.Errorf("%s: publish %s: %w", name, chainKey, err)
	}
	return e, nil
}

func (e *env) close() {
	if e.worker != nil {
		e.worker.Stop()
	}
	if e.tc != nil {
		e.tc.Close()
	}
	_ = e.srv.Stop()
}

// request serves one API request in process (no network).
func (e *env) request(ctx context.Context, method, path string, body any) (int, []byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req := httptest.NewRequestWithContext(ctx, method, path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.token)
	rec := httptest.NewRecorder()
	e.handler.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes(), nil
}

func (e *env) publish() error {
	ctx := context.Background()
	code, body, err := e.request(ctx, http.MethodPost, "/v1/workflows", map[string]any{"key": chainKey, "graph": chainGraph()})
	if err != nil || code != http.StatusCreated {
		return fmt.Errorf("create: %d %s %v", code, body, err)
	}
	code, body, err = e.request(ctx, http.MethodPost, "/v1/workflows/"+chainKey+"/publish", map[string]any{"expectedRevision": 1})
	if err != nil || code != http.StatusCreated {
		return fmt.Errorf("publish: %d %s %v", code, body, err)
	}
	return nil
}

// weftRun enqueues the chain through the API and waits for the run to
// end; it checks the run succeeded with the input as its output.
func (e *env) weftRun(ctx context.Context, idem string) (time.Duration, error) {
	start := time.Now()
	code, body, err := e.request(ctx, http.MethodPost, "/v1/workflows/"+chainKey+"/runs",
		map[string]any{"input": benchInput, "idempotencyKey": idem})
	if err != nil {
		return 0, err
	}
	if code != http.StatusAccepted {
		return 0, fmt.Errorf("enqueue: %d %s", code, body)
	}
	var acc struct {
		RunID string `json:"runId"`
	}
	if err := json.Unmarshal(body, &acc); err != nil {
		return 0, err
	}
	// The interpreter stores the run's final status before its workflow
	// completes, so the workflow's end is the run's end.
	if err := e.tc.GetWorkflow(ctx, starter.WorkflowID(e.tenant, chainKey, idem), "").Get(ctx, nil); err != nil {
		return 0, fmt.Errorf("run %s: %w", acc.RunID, err)
	}
	d := time.Since(start)
	run, err := e.store.GetRun(ctx, e.tenant, acc.RunID)
	if err != nil {
		return 0, err
	}
	if run.Status != execution.StatusSucceeded || !bytes.Contains(run.Output, []byte("hello from weftbench")) {
		return 0, fmt.Errorf("run %s ended %s with output %s", acc.RunID, run.Status, run.Output)
	}
	return d, nil
}

// handRun starts the hand-written workflow and waits for its result.
func (e *env) handRun(ctx context.Context, idem string) (time.Duration, error) {
	start := time.Now()
	run, err := e.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "hand-" + idem, TaskQueue: e.queue}, handWorkflowName, benchInput)
	if err != nil {
		return 0, err
	}
	var out json.RawMessage
	if err := run.Get(ctx, &out); err != nil {
		return 0, err
	}
	d := time.Since(start)
	if !bytes.Contains(out, []byte("hello from weftbench")) {
		return 0, fmt.Errorf("hand-written workflow returned %s", out)
	}
	return d, nil
}

type burstResult struct {
	wall       time.Duration
	runs       int
	allocBytes uint64 // allocated by this process during the burst
	mallocs    uint64
}

// burst starts n runs at once and waits for all of them.
func burst(ctx context.Context, n int, prefix string, run func(context.Context, string) (time.Duration, error)) (burstResult, error) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = run(ctx, fmt.Sprintf("%s-%d-%s", prefix, i, uuid.NewString()))
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	runtime.ReadMemStats(&after)
	if err := errors.Join(errs...); err != nil {
		return burstResult{}, err
	}
	return burstResult{wall: wall, runs: n, allocBytes: after.TotalAlloc - before.TotalAlloc, mallocs: after.Mallocs - before.Mallocs}, nil
}

// createDatabase creates weft_bench_<random> next to adminURL's database
// and returns its URL and a function dropping it.
func createDatabase(ctx context.Context, adminURL string) (string, func(), error) {
	cfg, err := pgx.ParseConfig(adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("admin url: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", nil, fmt.Errorf("PostgreSQL is required: %w", err)
	}
	defer conn.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "weft_bench_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create database: %w", err)
	}
	url := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	return url, drop, nil
}

// loadAverage is /proc/loadavg's first three fields ("" elsewhere).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// percentile of sorted samples (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func sortedCopy(d []time.Duration) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}
