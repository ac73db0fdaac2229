// Command weftbench measures weft against real Temporal dev servers and
// reports every figure as a ratio against a baseline measured in the same
// run (the machine is noisy; absolute numbers from different runs do not
// compare). `make bench` runs it after the Go benchmarks.
//
// It creates a fresh PostgreSQL database and starts four dev servers from
// bin/temporal: "tuned" (weft's dynamic config, in memory), "weft dev"
// (the same with a SQLite file in WAL mode, as `weft dev` runs it),
// "stock" (`temporal server start-dev` as shipped) and "tuned + eager
// activities". On each, in this process, a worker registering exactly what
// `weft worker` registers plus hand-written Temporal workflows doing the
// same work, and the starter and HTTP API. Then:
//
//   - latency of four workloads (a chain of 10 and of 50 core.echo
//     actions, a fan-out of 10 with a merge, a diamond with a gate and a
//     merge), weft against the hand-written workflow, from the enqueue
//     request to the run's end; chain10 also in the `weft dev` shape
//     (eager start), on weft dev's server, on the stock server and with
//     eager activities;
//   - history events and bytes per run of each workload;
//   - throughput: N chain10 runs enqueued at once, with the bytes this
//     process allocates per run;
//   - enqueue throughput: starts through the API against raw SDK starts;
//   - worker capacity: node attempts per second with many runs at once
//     (two bursts per side in the order weft, hand-written, hand-written,
//     weft, after -capacity-settle for earlier sections' timers to fire);
//   - with the throughput, enqueue and capacity figures, the CPU time per
//     run (user + system, from /proc) of the dev server, the bench
//     database's PostgreSQL backends and this process: where each side's
//     runs cost, independent of how loaded the machine is;
//   - with -throughput-tail D, each throughput burst's CPU measured D past
//     its end, so the timer tasks its activities leave (fired seconds
//     later by the dev server) count for that burst's side; with
//     -devserver-metrics, the tuned dev server's requests, tasks and
//     persistence operations per throughput run and side (its counters);
//   - with -spans N, where each workload's runs spend their time: N more
//     runs per side, their wall time split by their histories' events.
//
// Samples are interleaved (round-robin, rotating the order) so load spikes
// hit all configurations alike.
//
//	go run ./cmd/weftbench [-rounds 15] [-concurrency 30] [-spans 12] [-enqueue-rounds 6] [-db-pool-max-conns 0]
//		[-cpuprofile cpu.out [-cpuprofile-section latency|throughput|enqueue|capacity]] [-memprofile mem.out] [-history-dir DIR]
//		[-throughput-tail 11s] [-devserver-metrics] [-capacity-settle 11s]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/weftworks/weft/internal/testinfra"
)

func main() {
	opts := Options{}
	flag.IntVar(&opts.Rounds, "rounds", 15, "latency samples per configuration")
	flag.IntVar(&opts.Warmup, "warmup", 2, "unrecorded runs per configuration first")
	flag.IntVar(&opts.Concurrency, "concurrency", 30, "runs enqueued at once in a throughput burst")
	flag.IntVar(&opts.Bursts, "bursts", 3, "throughput bursts per configuration")
	flag.IntVar(&opts.Enqueues, "enqueues", 200, "starts per enqueue-throughput measurement")
	flag.IntVar(&opts.Clients, "clients", 20, "concurrent clients of the enqueue measurement")
	flag.IntVar(&opts.EnqueueRounds, "enqueue-rounds", 6, "measured rounds of the enqueue measurement (both sides each, after one unrecorded round; six is the fewest a 95% interval of their ratio needs)")
	flag.IntVar(&opts.PoolMaxConns, "db-pool-max-conns", 0, "PostgreSQL pool size of this process (0: weft's default, WEFT_DB_POOL_MAX_CONNS's)")
	flag.IntVar(&opts.Capacity, "capacity", 50, "chain10 runs at once in the worker-capacity measurement")
	flag.IntVar(&opts.Blocks, "blocks", 3, "blocks of back-to-back runs per dev server in the dev-server comparison")
	flag.IntVar(&opts.BlockRuns, "block-runs", 5, "back-to-back runs per block")
	flag.StringVar(&opts.CPUProfile, "cpuprofile", "", "write a CPU profile of this process over the -cpuprofile-section measurement")
	flag.StringVar(&opts.ProfileSection, "cpuprofile-section", sectionLatency, "the measurement -cpuprofile covers: latency, throughput, enqueue or capacity")
	flag.StringVar(&opts.MemProfile, "memprofile", "", "write a heap profile of this process at the end, after a GC (alloc_space: every byte allocated since the start)")
	flag.StringVar(&opts.HistoryDir, "history-dir", "", "write the history section's histories (one run of each workload per side) as JSON into this directory")
	flag.IntVar(&opts.Spans, "spans", 0, "after the latency rounds, this many runs of each workload per side split by their histories' events")
	flag.DurationVar(&opts.CapacitySettle, "capacity-settle", 11*time.Second, "wait this long before the capacity measurement, so the timers earlier sections' activities left fire before it")
	flag.DurationVar(&opts.ThroughputTail, "throughput-tail", 0, "measure each throughput burst's CPU this long past its end (e.g. 11s: the timers its activities leave fire within it), idle use subtracted")
	flag.BoolVar(&opts.DevServerMetrics, "devserver-metrics", false, "count the tuned dev server's requests, tasks and persistence operations per throughput run and side (its Prometheus endpoint)")
	flag.StringVar(&opts.TemporalCLI, "temporal", "bin/temporal", "the temporal CLI (dev server)")
	flag.StringVar(&opts.AdminURL, "admin-url", testinfra.AdminURL(), "PostgreSQL URL the benchmark database is created from (WEFT_TEST_DATABASE_URL)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := Run(ctx, opts, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "weftbench:", err)
		os.Exit(1)
	}
}
