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
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/weftworks/weft/activities"
	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/devserver"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/internal/testinfra/inproc"
	"github.com/weftworks/weft/metrics"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/temporalclient"
	"github.com/weftworks/weft/worker"
)

// Options configure a benchmark run.
type Options struct {
	Rounds      int
	Warmup      int
	Concurrency int // runs per throughput burst
	Bursts      int
	Enqueues    int // starts per enqueue-throughput measurement
	Clients     int // concurrent clients starting them
	// EnqueueRounds is how many measured rounds of both enqueue sides run
	// (each after one unrecorded pass), the sides' order alternating.
	EnqueueRounds int
	// PoolMaxConns sizes the PostgreSQL pool of the API, starter and
	// worker (one pool here); 0 is weft's default (WEFT_DB_POOL_MAX_CONNS).
	PoolMaxConns int
	Capacity     int // concurrent chain10 runs of the worker-capacity measurement
	// Blocks and BlockRuns shape the dev-server comparison: blocks of
	// back-to-back runs per server.
	Blocks, BlockRuns int
	TemporalCLI       string
	AdminURL          string
	// CPUProfile, when set, receives a CPU profile of this process (the
	// API, the starter and the worker, weft's and the hand-written
	// workflow's alike) over ProfileSection.
	CPUProfile string
	// ProfileSection is the measurement CPUProfile covers: "latency" (the
	// default), "throughput", "enqueue" or "capacity".
	ProfileSection string
	// MemProfile, when set, receives a heap profile of this process at
	// the end, after a GC: its alloc_space and alloc_objects samples count
	// what was allocated since the process started (every section, both
	// sides); inuse_* what is still live.
	MemProfile string
	// Spans, when positive, runs each workload this many more times per
	// side after the latency rounds and splits their wall time by their
	// histories' events (SpanSummary).
	Spans int
	// HistoryDir, when set, receives the histories of the history section
	// (one run of each workload per side) as JSON, the form `temporal
	// workflow show -o json` prints: weft-<workload>.json, hand-<workload>.json.
	HistoryDir string
	// ThroughputTail, when positive, extends each throughput burst's CPU
	// measurement this long past its last run's end (less the processes'
	// idle use over as long, measured once before the bursts), so the
	// timer tasks a burst's activities leave behind (heartbeat and
	// start-to-close timeouts, fired by the dev server seconds after the
	// activities completed) count for the side that caused them instead of
	// for whichever burst runs when they fire.
	ThroughputTail time.Duration
	// CapacitySettle is how long the capacity measurement waits before its
	// first burst, so that the timer tasks the earlier sections' activities
	// left (weft's 5 s heartbeat timeout, the hand-written 10 s
	// start-to-close) fire before it rather than inside whichever side
	// runs first.
	CapacitySettle time.Duration
	// DevServerMetrics, when set, reads the tuned dev server's Prometheus
	// counters around each throughput burst and prints, per run, those on
	// which the sides differ.
	DevServerMetrics bool
}

// The dev servers a run starts, each from bin/temporal.
const (
	// serverTuned: weft's dynamic config, in memory (what the tests run):
	// every weft-vs-hand-written comparison runs here.
	serverTuned = "tuned"
	// serverWeftDev: what `weft dev` runs: the tuning, a SQLite file and
	// its WAL pragmas.
	serverWeftDev = "weft dev"
	// serverStock: `temporal server start-dev` as it ships, in memory.
	serverStock = "stock"
	// serverFile: the tuning and a SQLite file without the WAL pragmas:
	// what the pragmas buy.
	serverFile = "tuned + SQLite file, no WAL"
	// serverEager: the tuning plus eager activity dispatch, which the SDK
	// asks for by default and only this server flag stops.
	serverEager = "tuned + eager activities"
)

// env is one dev server with everything weft runs against it.
type env struct {
	name   string
	srv    *testsuite.DevServer
	tc     client.Client // the worker's client
	worker sdkworker.Worker
	queue  string
	tenant string
	token  string
	store  *store.Store
	// api serves requests like `weft api` (a client of its own, no worker
	// behind it); devAPI like `weft dev` (the worker's client, eager starts).
	api, devAPI http.Handler
	split       client.Client
	// idleAPI enqueues onto a task queue no worker polls: the starts alone.
	idleAPI   http.Handler
	idleQueue string
	// stopCache stops the worker's revocation cache (nil when off).
	stopCache context.CancelFunc
	// cpu measures the CPU its dev server, the bench database's backends
	// and this process use.
	cpu *cpuMeter
	// sdk holds the Temporal SDK's metrics of the worker's client, as
	// weft's processes record them (metrics.Metrics.Temporal).
	sdk *metrics.Metrics
}

// Run runs the benchmark and writes a Markdown report to out; progress
// goes to progress.
func Run(ctx context.Context, o Options, out, progress io.Writer) (*Report, error) {
	if o.Rounds < 1 || o.Concurrency < 1 || o.Bursts < 1 || o.Warmup < 0 || o.Enqueues < 1 || o.Clients < 1 || o.Capacity < 1 ||
		o.Blocks < 1 || o.BlockRuns < 1 || o.EnqueueRounds < 1 || o.PoolMaxConns < 0 {
		return nil, errors.New("rounds, concurrency, bursts, enqueues, clients, enqueue rounds, capacity, blocks and block runs must be positive, warmup and pool size non-negative")
	}
	if o.ProfileSection == "" {
		o.ProfileSection = sectionLatency
	}
	if !slices.Contains([]string{sectionLatency, sectionThroughput, sectionEnqueue, sectionCapacity}, o.ProfileSection) {
		return nil, fmt.Errorf("profile section %q is none of latency, throughput, enqueue, capacity", o.ProfileSection)
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
	// One pool for every process this one stands in for, sized as weft's
	// defaults size each (WEFT_DB_POOL_MAX_CONNS).
	defaults, err := config.FromEnv(func(string) string { return "" })
	if err != nil {
		return nil, err
	}
	if o.PoolMaxConns == 0 {
		o.PoolMaxConns = defaults.DBPoolMaxConns
	}
	rep.Options.PoolMaxConns = o.PoolMaxConns
	st, err := store.OpenWith(ctx, dbURL, store.Options{MaxConns: o.PoolMaxConns})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if err := store.Migrate(ctx, st.Pool); err != nil {
		return nil, err
	}
	dataDir, err := os.MkdirTemp("", "weftbench-")
	fileDir := filepath.Join(dataDir, "nowal")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dataDir)
	logf("fresh database %s", dbURL)

	servers := map[string][]string{
		serverTuned:   devserver.ExtraArgs(),
		serverWeftDev: append(append([]string{"--db-filename", filepath.Join(dataDir, "temporal.db")}, devserver.PragmaArgs()...), devserver.ExtraArgs()...),
		serverStock:   nil,
		serverFile:    append([]string{"--db-filename", filepath.Join(fileDir, "temporal.db")}, devserver.ExtraArgs()...),
		serverEager:   append(devserver.ExtraArgs(), "--dynamic-config-value", "system.enableActivityEagerExecution=true"),
	}
	envs := map[string]*env{}
	if err := os.MkdirAll(fileDir, 0o755); err != nil {
		return nil, err
	}
	var metrics *devMetrics
	if o.DevServerMetrics {
		port, err := testinfra.FreePortE() // outside the ephemeral range the dev servers bind their own ports in
		if err != nil {
			return nil, err
		}
		servers[serverTuned] = append(servers[serverTuned], "--metrics-port", strconv.Itoa(port))
		metrics = &devMetrics{url: fmt.Sprintf("http://127.0.0.1:%d/metrics", port), client: &http.Client{Timeout: 10 * time.Second}}
	}
	for _, name := range []string{serverTuned, serverWeftDev, serverStock, serverEager, serverFile} {
		e, err := newEnv(ctx, name, o.TemporalCLI, servers[name], st, logger, progress)
		if err != nil {
			return nil, err
		}
		defer e.close()
		envs[name] = e
	}
	tuned := envs[serverTuned]
	rep.CPUMeasured = tuned.cpu.ok()
	if !rep.CPUMeasured {
		logf("CPU per run: not measured (no /proc, or the %s dev server's process was not found)", serverTuned)
	}

	// Latency: every configuration once per round, the order rotating.
	wls := workloads()
	var configs []latencyConfig
	for _, w := range wls {
		configs = append(configs,
			latencyConfig{"weft " + w.key, w, func(ctx context.Context, idem string) (time.Duration, error) {
				return tuned.weftRun(ctx, tuned.api, w, idem)
			}},
			latencyConfig{"hand-written " + w.key, w, func(ctx context.Context, idem string) (time.Duration, error) {
				return tuned.handRun(ctx, w, idem)
			}})
	}
	chain := wls[0]
	configs = append(configs, []latencyConfig{
		{"weft chain10, weft dev shape (eager start)", chain, func(ctx context.Context, idem string) (time.Duration, error) {
			return tuned.weftRun(ctx, tuned.devAPI, chain, idem)
		}},
		{"weft chain10, weft dev's server, weft dev shape", chain, func(ctx context.Context, idem string) (time.Duration, error) {
			e := envs[serverWeftDev]
			return e.weftRun(ctx, e.devAPI, chain, idem)
		}},
		{"weft chain10, eager activities", chain, func(ctx context.Context, idem string) (time.Duration, error) {
			e := envs[serverEager]
			return e.weftRun(ctx, e.api, chain, idem)
		}},
		{"hand-written chain10, eager activities", chain, func(ctx context.Context, idem string) (time.Duration, error) {
			return envs[serverEager].handRun(ctx, chain, idem)
		}},
	}...)
	for _, c := range configs {
		for i := 0; i < o.Warmup; i++ {
			if _, err := c.run(ctx, "warmup-"+uuid.NewString()); err != nil {
				return nil, fmt.Errorf("warmup %s: %w", c.name, err)
			}
		}
	}
	startProfile, stopProfile := profiler(o)
	defer stopProfile(sectionNone)
	if err := startProfile(sectionLatency); err != nil {
		return nil, err
	}
	logf("latency: %d rounds of %d configurations", o.Rounds, len(configs))
	sdkBefore, err := sdkSnapshot(tuned.sdk.Registry)
	if err != nil {
		return nil, err
	}
	samples := make([][]time.Duration, len(configs))
	for r := 0; r < o.Rounds; r++ {
		for k := range configs {
			i := (r + k) % len(configs)
			d, err := configs[i].run(ctx, fmt.Sprintf("lat-%d-%d-%s", r, i, uuid.NewString()))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", configs[i].name, err)
			}
			samples[i] = append(samples[i], d)
		}
	}
	stopProfile(sectionLatency)
	sdkAfter, err := sdkSnapshot(tuned.sdk.Registry)
	if err != nil {
		return nil, err
	}
	rep.SDK = sdkDiff(sdkBefore, sdkAfter)
	for i, c := range configs {
		rep.Latency = append(rep.Latency, summarize(c.name, samples[i]))
	}
	if o.Spans > 0 {
		logf("spans: %d runs of each workload per side", o.Spans)
		if rep.Spans, err = measureSpans(ctx, tuned, o.Spans); err != nil {
			return nil, fmt.Errorf("spans: %w", err)
		}
	}

	// Dev servers under sustained use: a rate limiter of the stock server
	// (history.transferProcessorMaxPollRPS) refills while the server is
	// idle, so interleaved single runs hide it; blocks of back-to-back runs
	// are what a developer's loop or a test suite does.
	logf("dev servers: %d blocks of %d back-to-back hand-written chain10 runs per server", o.Blocks, o.BlockRuns)
	compared := []string{serverWeftDev, serverStock, serverTuned, serverFile}
	for _, name := range compared {
		if _, err := envs[name].handRun(ctx, chain, "sustained-warmup-"+uuid.NewString()); err != nil {
			return nil, err
		}
	}
	sustained := make([][]time.Duration, len(compared))
	for b := 0; b < o.Blocks; b++ {
		for k := range compared {
			i := (b + k) % len(compared)
			for n := 0; n < o.BlockRuns; n++ {
				d, err := envs[compared[i]].handRun(ctx, chain, fmt.Sprintf("sustained-%d-%d-%s", b, n, uuid.NewString()))
				if err != nil {
					return nil, fmt.Errorf("%s: %w", compared[i], err)
				}
				sustained[i] = append(sustained[i], d)
			}
		}
	}
	for i, name := range compared {
		rep.Servers = append(rep.Servers, summarize(name, sustained[i]))
	}

	logf("history: one run of each workload")
	for _, w := range wls {
		idem := "history-" + uuid.NewString()
		if _, err := tuned.weftRun(ctx, tuned.api, w, idem); err != nil {
			return nil, err
		}
		if _, err := tuned.handRun(ctx, w, idem); err != nil {
			return nil, err
		}
		weft, err := tuned.history(ctx, tuned.workflowID(w, idem), historyFile(o.HistoryDir, "weft", w.key))
		if err != nil {
			return nil, err
		}
		hand, err := tuned.history(ctx, "hand-"+idem, historyFile(o.HistoryDir, "hand", w.key))
		if err != nil {
			return nil, err
		}
		rep.History = append(rep.History, HistorySummary{Workload: w.key, Activities: w.activities, Weft: weft, Hand: hand})
	}

	logf("throughput: %d bursts of %d chain10 runs per side, after one unrecorded warm-up burst per side", o.Bursts, o.Concurrency)
	sides := []struct {
		name string
		run  func(ctx context.Context, idem string) (time.Duration, error)
	}{
		{"weft chain10", func(ctx context.Context, idem string) (time.Duration, error) {
			return tuned.weftRun(ctx, tuned.api, chain, idem)
		}},
		{"hand-written chain10", func(ctx context.Context, idem string) (time.Duration, error) {
			return tuned.handRun(ctx, chain, idem)
		}},
	}
	// One unrecorded burst per side first, both sides alike: it opens and
	// warms the pool connections a burst of this size needs (a fresh
	// connection spends tens of ms of PostgreSQL CPU on its first appends),
	// so the recorded bursts measure the steady state.
	for i := range sides {
		if _, err := burst(ctx, tuned.cpu, o.Concurrency, o.Concurrency, fmt.Sprintf("burst-warmup-%d", i), sides[i].run); err != nil {
			return nil, fmt.Errorf("%s warm-up burst: %w", sides[i].name, err)
		}
	}
	results := make([][]burstResult, len(sides))
	// The processes' use while nothing runs, subtracted from each tail:
	// measured after waiting as long first, so the timers the warm-up
	// bursts left have fired.
	var idle CPUUse
	if o.ThroughputTail > 0 {
		if err := sleepCtx(ctx, o.ThroughputTail); err != nil {
			return nil, err
		}
		if idle, err = tuned.cpu.measure(ctx, func() error { return sleepCtx(ctx, o.ThroughputTail) }); err != nil {
			return nil, err
		}
		logf("throughput: each burst measured %s past its end; idle use over as long (ms): dev server %s, PostgreSQL %s, this process %s",
			o.ThroughputTail, ms(idle.DevServer), ms(idle.Postgres), ms(idle.Self))
	}
	var diffs metricDiffs
	if err := startProfile(sectionThroughput); err != nil {
		return nil, err
	}
	for b := 0; b < o.Bursts; b++ {
		for k := range sides {
			i := (b + k) % len(sides)
			var before map[string]float64
			if metrics != nil {
				if before, err = metrics.snapshot(ctx); err != nil {
					return nil, err
				}
			}
			res, err := burst(ctx, tuned.cpu, o.Concurrency, o.Concurrency, fmt.Sprintf("burst-%d-%d", b, i), sides[i].run)
			if err != nil {
				return nil, fmt.Errorf("%s burst: %w", sides[i].name, err)
			}
			if o.ThroughputTail > 0 {
				tail, err := tuned.cpu.measure(ctx, func() error { return sleepCtx(ctx, o.ThroughputTail) })
				if err != nil {
					return nil, err
				}
				logf("throughput: %s burst %d: the tail's CPU per run (ms, idle use subtracted): dev server %s, PostgreSQL %s, this process %s",
					sides[i].name, b+1, ms((tail.DevServer-idle.DevServer)/time.Duration(res.runs)),
					ms((tail.Postgres-idle.Postgres)/time.Duration(res.runs)), ms((tail.Self-idle.Self)/time.Duration(res.runs)))
				res.cpu = res.cpu.add(CPUUse{tail.DevServer - idle.DevServer, tail.Postgres - idle.Postgres, tail.Self - idle.Self})
			}
			if metrics != nil {
				after, err := metrics.snapshot(ctx)
				if err != nil {
					return nil, err
				}
				diffs.add(sides[i].name, before, after, res.runs)
			}
			// Burst by burst, so a cost still paid once (after the warm-up)
			// shows beside the steady state the later ones reach.
			cpu := res.cpu.perRun(res.runs)
			logf("throughput: %s burst %d: %.1f runs/s; CPU per run (ms): dev server %s, PostgreSQL %s, this process %s",
				sides[i].name, b+1, float64(res.runs)/res.wall.Seconds(), ms(cpu.DevServer), ms(cpu.Postgres), ms(cpu.Self))
			results[i] = append(results[i], res)
		}
	}
	stopProfile(sectionThroughput)
	if metrics != nil {
		diffs.write(progress, []string{sides[0].name, sides[1].name}, 0.5)
	}
	for i, s := range sides {
		rep.Throughput = append(rep.Throughput, summarizeBursts(s.name, results[i]))
	}

	logf("enqueue: %d rounds (after one unrecorded) of %d starts from %d clients per side, onto a queue no worker polls", o.EnqueueRounds, o.Enqueues, o.Clients)
	enqSides := []struct {
		name string
		run  func(ctx context.Context, idem string) (time.Duration, error)
	}{
		{"weft: POST /v1/workflows/chain10/runs", func(ctx context.Context, idem string) (time.Duration, error) { return tuned.enqueueIdle(ctx, idem) }},
		{"raw SDK: client.ExecuteWorkflow", func(ctx context.Context, idem string) (time.Duration, error) { return tuned.startIdle(ctx, idem) }},
		{"raw SDK with weft's start options", func(ctx context.Context, idem string) (time.Duration, error) {
			return tuned.startIdleWeftOptions(ctx, idem)
		}},
	}
	enqResults := make([][]burstResult, len(enqSides))
	for b := 0; b <= o.EnqueueRounds; b++ {
		if b == 1 { // round 0 warms both sides up
			if err := startProfile(sectionEnqueue); err != nil {
				return nil, err
			}
		}
		for k := range enqSides {
			i := (b + k) % len(enqSides)
			res, err := burst(ctx, tuned.cpu, o.Enqueues, o.Clients, fmt.Sprintf("enqueue-%d-%d", b, i), enqSides[i].run)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", enqSides[i].name, err)
			}
			if b > 0 {
				enqResults[i] = append(enqResults[i], res)
			}
		}
	}
	stopProfile(sectionEnqueue)
	for i, s := range enqSides {
		rep.Enqueue = append(rep.Enqueue, summarizeBursts(s.name, enqResults[i]))
	}

	logf("capacity: %d chain10 runs at once per side, twice, in the order weft, hand-written, hand-written, weft, after %s for earlier timers to fire",
		o.Capacity, o.CapacitySettle)
	if err := sleepCtx(ctx, o.CapacitySettle); err != nil {
		return nil, err
	}
	if err := startProfile(sectionCapacity); err != nil {
		return nil, err
	}
	capResults := make([][]burstResult, len(sides))
	for _, i := range []int{0, 1, 1, 0} {
		res, err := burst(ctx, tuned.cpu, o.Capacity, o.Capacity, "capacity-"+uuid.NewString()[:8], sides[i].run)
		if err != nil {
			return nil, fmt.Errorf("%s capacity: %w", sides[i].name, err)
		}
		capResults[i] = append(capResults[i], res)
	}
	stopProfile(sectionCapacity)
	for i, side := range sides {
		rep.Capacity = append(rep.Capacity, summarizeCapacity(side.name, chain.activities, capResults[i]))
	}
	rep.RSS, rep.PeakRSS = memoryOfThisProcess()
	if rep.Storage, err = storagePerRun(ctx, st); err != nil {
		return nil, err
	}

	if o.MemProfile != "" {
		if err := writeHeapProfile(o.MemProfile); err != nil {
			return nil, err
		}
	}

	rep.LoadAfter = loadAverage()
	rep.Elapsed = time.Since(rep.Started)
	rep.write(out)
	return rep, nil
}

// The measurements -cpuprofile-section names.
const (
	sectionNone       = ""
	sectionLatency    = "latency"
	sectionThroughput = "throughput"
	sectionEnqueue    = "enqueue"
	sectionCapacity   = "capacity"
)

// profiler returns functions starting and stopping the CPU profile at the
// edges of o.ProfileSection: each does nothing for another section (stop
// with sectionNone stops whatever runs, for an early return).
func profiler(o Options) (start func(section string) error, stop func(section string)) {
	var f *os.File
	start = func(section string) error {
		if o.CPUProfile == "" || section != o.ProfileSection {
			return nil
		}
		var err error
		if f, err = os.Create(o.CPUProfile); err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			f = nil
			return err
		}
		return nil
	}
	stop = func(section string) {
		if f == nil || (section != sectionNone && section != o.ProfileSection) {
			return
		}
		pprof.StopCPUProfile()
		f.Close()
		f = nil
	}
	return start, stop
}

// latencyConfig is one latency configuration.
type latencyConfig struct {
	name     string
	workload workload
	run      func(ctx context.Context, idem string) (time.Duration, error)
}

// newEnv starts a dev server with args and weft's search attributes, and
// wires a worker (weft's registrations and the hand-written workflows), the
// starter and the API to it, then publishes the workloads.
func newEnv(ctx context.Context, name, bin string, args []string, st *store.Store, logger *slog.Logger, progress io.Writer) (*env, error) {
	args = append(slices.Clone(args), devserver.SearchAttributeArgs()...) // weft's runs carry them; without them starts fail
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	sdk := metrics.New()
	srv, err := testsuite.StartDevServer(sctx, testsuite.DevServerOptions{
		ExistingPath: bin,
		// Uncompressed, as temporalclient dials a loopback address, for
		// weft's side and the hand-written side alike; weft's data
		// converter, whose shortcut only weft's payload types take.
		ClientOptions: &client.Options{Namespace: "default",
			Logger:            sdklog.NewStructuredLogger(logger.With("component", "temporal-sdk", "server", name)),
			ConnectionOptions: client.ConnectionOptions{GrpcCompression: &client.GrpcCompressionNone{}},
			DataConverter:     temporalclient.DataConverter(),
			MetricsHandler:    sdk.Temporal()},
		LogLevel:  "error",
		ExtraArgs: args,
		Stdout:    progress,
		Stderr:    progress,
	})
	if err != nil {
		return nil, fmt.Errorf("start %s dev server: %w", name, err)
	}
	slug := strings.NewReplacer(" ", "-", "+", "").Replace(name)
	e := &env{name: name, srv: srv, tc: srv.Client(), queue: "bench-" + slug, idleQueue: "bench-idle-" + slug,
		tenant: "bench-" + slug, store: st, cpu: &cpuMeter{devServer: devServerPID(srv.FrontendHostPort()), store: st}, sdk: sdk}
	fail := func(err error) (*env, error) {
		e.close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cfg, err := config.FromEnv(func(string) string { return "" })
	if err != nil {
		return fail(err)
	}
	cfg.TaskQueue = e.queue
	// One process, one release: lean inputs, as `weft dev` runs
	// (config.DefaultLeanInputs; WEFT_LEAN_INPUTS is not read here).
	cfg.DefaultLeanInputs()
	// The worker's revocation cache, as worker.Serve runs it
	// (WEFT_REVOCATION_CACHE, on by default).
	var revocations activities.RevocationSource
	cache, err := worker.RevocationCache(cfg, st, logger)
	if err != nil {
		return fail(err)
	}
	if cache != nil {
		cctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		e.stopCache = stop
		go cache.Run(cctx)
		revocations = cache
	}
	w, err := inproc.NewWorker(worker.Deps{Config: cfg, Store: st, Temporal: e.tc, Logger: logger, Revocations: revocations})
	if err != nil {
		return fail(err)
	}
	w.RegisterActivityWithOptions(handEcho, activity.RegisterOptions{Name: handActivityName})
	for _, wl := range workloads() {
		if strings.HasPrefix(wl.hand, handChainPrefix) {
			w.RegisterWorkflowWithOptions(handChain(wl.nodes), workflow.RegisterOptions{Name: wl.hand})
		}
	}
	w.RegisterWorkflowWithOptions(handFanOut, workflow.RegisterOptions{Name: handFanOutName})
	w.RegisterWorkflowWithOptions(handDiamond, workflow.RegisterOptions{Name: handDiamondName})
	if err := w.Start(); err != nil {
		return fail(err)
	}
	e.worker = w
	e.split, err = client.NewClientFromExisting(e.tc, client.Options{Namespace: "default", DataConverter: temporalclient.DataConverter(),
		Logger: sdklog.NewStructuredLogger(logger.With("component", "temporal-sdk", "server", name, "client", "split"))})
	if err != nil {
		return fail(err)
	}

	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	keys, err := auth.NewKeys(hex.EncodeToString(secret))
	if err != nil {
		return fail(err)
	}
	e.token, err = keys.Mint(auth.Principal{Tenant: e.tenant, Sub: "bench", Scopes: auth.AllScopes}, 24*time.Hour)
	if err != nil {
		return fail(err)
	}
	handler := func(tc client.Client, queue string, eager bool) (http.Handler, error) {
		runs, err := inproc.NewStarter(starter.Deps{Store: st, Temporal: tc, TaskQueue: queue,
			UIURL: "http://localhost:8233", Namespace: "default", Logger: logger, EagerStart: eager, LeanInputs: cfg.LeanInputs})
		if err != nil {
			return nil, err
		}
		return inproc.NewAPI(api.Deps{Config: cfg, Store: st, Keys: keys, Temporal: tc, Logger: logger, Starter: runs})
	}
	if e.api, err = handler(e.split, e.queue, false); err != nil {
		return fail(err)
	}
	if e.devAPI, err = handler(e.tc, e.queue, true); err != nil {
		return fail(err)
	}
	if e.idleAPI, err = handler(e.split, e.idleQueue, false); err != nil {
		return fail(err)
	}
	for _, wl := range workloads() {
		if err := e.publish(wl); err != nil {
			return fail(fmt.Errorf("publish %s: %w", wl.key, err))
		}
	}
	return e, nil
}

func (e *env) close() {
	if e.worker != nil {
		e.worker.Stop()
	}
	if e.stopCache != nil {
		e.stopCache()
	}
	if e.split != nil {
		e.split.Close()
	}
	if e.tc != nil {
		e.tc.Close()
	}
	_ = e.srv.Stop()
}

// request serves one API request in process (no network).
func (e *env) request(ctx context.Context, h http.Handler, method, path string, body any) (int, []byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req := httptest.NewRequestWithContext(ctx, method, path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes(), nil
}

func (e *env) publish(w workload) error {
	ctx := context.Background()
	code, body, err := e.request(ctx, e.api, http.MethodPost, "/v1/workflows", map[string]any{"key": w.key, "graph": w.graph})
	if err != nil || code != http.StatusCreated {
		return fmt.Errorf("create: %d %s %v", code, body, err)
	}
	code, body, err = e.request(ctx, e.api, http.MethodPost, "/v1/workflows/"+w.key+"/publish", map[string]any{"expectedRevision": 1})
	if err != nil || code != http.StatusCreated {
		return fmt.Errorf("publish: %d %s %v", code, body, err)
	}
	return nil
}

func (e *env) workflowID(w workload, idem string) string {
	return starter.WorkflowID(e.tenant, w.key, idem)
}

// weftRun enqueues w through the API h and waits for the run to end; it
// checks the run succeeded and carried the input through.
func (e *env) weftRun(ctx context.Context, h http.Handler, w workload, idem string) (time.Duration, error) {
	start := time.Now()
	code, body, err := e.request(ctx, h, http.MethodPost, "/v1/workflows/"+w.key+"/runs",
		map[string]any{"input": benchInput, "idempotencyKey": idem})
	if err != nil {
		return 0, err
	}
	if code != http.StatusAccepted {
		return 0, fmt.Errorf("enqueue: %d %s", code, body)
	}
	var acc struct {
		RunID    string `json:"runId"`
		Temporal struct {
			WorkflowID string `json:"workflowId"`
			RunID      string `json:"runId"`
		} `json:"temporal"`
	}
	if err := json.Unmarshal(body, &acc); err != nil {
		return 0, err
	}
	if acc.Temporal.WorkflowID != e.workflowID(w, idem) || acc.Temporal.RunID == "" {
		return 0, fmt.Errorf("enqueue: the answer names no started execution: %s", body)
	}
	// The interpreter stores the run's final status before its workflow
	// completes, so the workflow's end is the run's end. Waited for as the
	// hand-written side waits: on the execution its start named.
	if err := e.tc.GetWorkflow(ctx, acc.Temporal.WorkflowID, acc.Temporal.RunID).Get(ctx, nil); err != nil {
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

// handRun starts w's hand-written workflow and waits for its result.
func (e *env) handRun(ctx context.Context, w workload, idem string) (time.Duration, error) {
	start := time.Now()
	run, err := e.split.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "hand-" + idem, TaskQueue: e.queue}, w.hand, benchInput)
	if err != nil {
		return 0, err
	}
	var out json.RawMessage
	if err := run.Get(ctx, &out); err != nil {
		return 0, err
	}
	d := time.Since(start)
	if !bytes.Contains(out, []byte("hello from weftbench")) {
		return 0, fmt.Errorf("hand-written %s returned %s", w.hand, out)
	}
	return d, nil
}

// enqueueIdle enqueues chain10 through the API onto a queue no worker
// polls: the enqueue alone (idempotency binding, run row, start).
func (e *env) enqueueIdle(ctx context.Context, idem string) (time.Duration, error) {
	start := time.Now()
	code, body, err := e.request(ctx, e.idleAPI, http.MethodPost, "/v1/workflows/chain10/runs",
		map[string]any{"input": benchInput, "idempotencyKey": idem})
	if err != nil {
		return 0, err
	}
	if code != http.StatusAccepted {
		return 0, fmt.Errorf("enqueue: %d %s", code, body)
	}
	return time.Since(start), nil
}

// startIdle starts the hand-written chain with the SDK onto the same idle queue.
func (e *env) startIdle(ctx context.Context, idem string) (time.Duration, error) {
	start := time.Now()
	_, err := e.split.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "idle-" + idem, TaskQueue: e.idleQueue},
		handChainName(10), benchInput)
	return time.Since(start), err
}

// startIdleWeftOptions starts the hand-written chain onto the idle queue
// with the options weft starts a run with (starter.StartOptions: the
// search attributes, summary and details, the id policies), so the
// report can tell what those Temporal features cost from what weft's
// enqueue adds (the API, the run's row, its parameters).
func (e *env) startIdleWeftOptions(ctx context.Context, idem string) (time.Duration, error) {
	start := time.Now()
	opts := starter.StartOptions(store.Run{RunID: uuid.NewString(), TenantID: e.tenant, WorkflowKey: "chain10", Revision: 1,
		Mode: string(execution.ModeLive), Origin: execution.Origin{Kind: "api"}, Actor: execution.Actor{Kind: "user", Sub: "bench"},
		WorkflowID: "idle-options-" + idem}, e.idleQueue, false)
	_, err := e.split.ExecuteWorkflow(ctx, opts, handChainName(10), benchInput)
	return time.Since(start), err
}

// historyFile is where a side's history of a workload is written, "" when
// histories are not kept.
func historyFile(dir, side, workload string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, side+"-"+workload+".json")
}

// history counts a closed workflow's history events and their encoded
// bytes, and writes the history as JSON to file unless file is "".
func (e *env) history(ctx context.Context, workflowID, file string) (HistoryCount, error) {
	it := e.tc.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var c HistoryCount
	var all historypb.History
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return HistoryCount{}, err
		}
		all.Events = append(all.Events, ev)
		c.Events++
		c.Bytes += proto.Size(ev)
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			c.WorkflowTasks++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			c.Activities++
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			c.Markers++
		}
	}
	if file != "" {
		raw, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&all)
		if err != nil {
			return HistoryCount{}, err
		}
		if err := os.WriteFile(file, raw, 0o644); err != nil {
			return HistoryCount{}, err
		}
	}
	return c, nil
}

type burstResult struct {
	wall       time.Duration
	runs       int
	allocBytes uint64 // allocated by this process during the burst
	mallocs    uint64
	cpu        CPUUse // the processes' CPU during the burst (zero if not measured)
}

// burst runs n calls of run, at most clients at once, and waits for all;
// meter measures the processes' CPU meanwhile.
func burst(ctx context.Context, meter *cpuMeter, n, clients int, prefix string, run func(context.Context, string) (time.Duration, error)) (burstResult, error) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var wall time.Duration
	errs := make([]error, n)
	cpu, err := meter.measure(ctx, func() error {
		start := time.Now()
		var wg sync.WaitGroup
		slots := make(chan struct{}, clients)
		for i := 0; i < n; i++ {
			wg.Add(1)
			slots <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				_, errs[i] = run(ctx, fmt.Sprintf("%s-%d-%s", prefix, i, uuid.NewString()))
			}()
		}
		wg.Wait()
		wall = time.Since(start)
		return errors.Join(errs...)
	})
	runtime.ReadMemStats(&after)
	if err != nil {
		return burstResult{}, err
	}
	return burstResult{wall: wall, runs: n, allocBytes: after.TotalAlloc - before.TotalAlloc, mallocs: after.Mallocs - before.Mallocs, cpu: cpu}, nil
}

// writeHeapProfile writes this process's heap profile to path after a GC,
// so the in-use figures are up to date.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("write heap profile: %w", err)
	}
	return f.Close()
}

// storagePerRun is what PostgreSQL holds per run after the benchmark: the
// event log (rows, indexes, TOAST) and the run rows, over every run of
// every workload.
func storagePerRun(ctx context.Context, st *store.Store) (StorageSummary, error) {
	var s StorageSummary
	err := st.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM run_events),
		pg_total_relation_size('run_events'), pg_total_relation_size('runs')`).Scan(&s.Runs, &s.Events, &s.EventBytes, &s.RunBytes)
	return s, err
}

// memoryOfThisProcess is VmRSS and VmHWM of /proc/self/status, in bytes
// (0 elsewhere).
func memoryOfThisProcess() (rss, peak int64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		var kb int64
		if _, err := fmt.Sscanf(line, "VmRSS: %d kB", &kb); err == nil {
			rss = kb << 10
		}
		if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil {
			peak = kb << 10
		}
	}
	return rss, peak
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
