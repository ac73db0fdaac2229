// Command weftbench measures weft against real Temporal dev servers and
// reports every figure as a ratio against a baseline measured in the same
// run (the machine is noisy; absolute numbers from different runs do not
// compare). `make bench` runs it after the Go benchmarks.
//
// It creates a fresh PostgreSQL database, starts two dev servers from
// bin/temporal — one with weft's tuning (package devserver), one with the
// stock flags — and, in this process, a worker registering exactly what
// `weft worker` registers, the starter and the HTTP API on each. Then:
//
//   - latency: a 10-node linear core.echo chain, from the enqueue request
//     to the run's completion, on the tuned server vs the stock one, and vs
//     a hand-written Temporal workflow running 10 echo activities in
//     sequence on the tuned server (what weft costs over writing the
//     workflow by hand);
//   - throughput: N such runs enqueued at once, weft vs the hand-written
//     workflow, with the bytes this process allocates per run.
//
// Samples of the configurations are interleaved (round-robin, rotating the
// order) so load spikes hit all of them alike.
//
//	go run ./cmd/weftbench [-rounds 30] [-concurrency 30] [-bursts 3]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/weftworks/weft/internal/testinfra"
)

func main() {
	opts := Options{}
	flag.IntVar(&opts.Rounds, "rounds", 30, "latency samples per configuration")
	flag.IntVar(&opts.Warmup, "warmup", 3, "unrecorded runs per configuration first")
	flag.IntVar(&opts.Concurrency, "concurrency", 30, "runs enqueued at once in a throughput burst")
	flag.IntVar(&opts.Bursts, "bursts", 3, "throughput bursts per configuration")
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
