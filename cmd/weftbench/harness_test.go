package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/testinfra"
)

// TestHarnessRuns runs the harness at its smallest against real dev servers
// and PostgreSQL, so `make bench` cannot rot: every configuration completes
// and checks its runs, and the report carries every ratio. It asserts no
// timing (figures are what `make bench` records, never test verdicts).
func TestHarnessRuns(t *testing.T) {
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Rounds: 1, Warmup: 0, Concurrency: 3, Bursts: 1, Enqueues: 4, Clients: 2, Capacity: 3, Blocks: 1, BlockRuns: 1,
		TemporalCLI: testinfra.TemporalBinary(), AdminURL: testinfra.AdminURL()}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Latency) != 2*len(workloads())+4 || len(rep.Servers) != 4 || len(rep.Throughput) != 2 || len(rep.Enqueue) != 2 ||
		len(rep.Capacity) != 2 || len(rep.History) != len(workloads()) {
		t.Fatalf("report = %+v", rep)
	}
	for _, h := range rep.History {
		if h.Weft.Activities != h.Activities || h.Hand.Activities < 1 || h.Weft.Events <= 0 {
			t.Errorf("history of %s: %+v", h.Workload, h)
		}
	}
	for _, l := range rep.Latency {
		if len(l.Samples) != 1 || l.Median <= 0 {
			t.Errorf("%s: samples %v", l.Name, l.Samples)
		}
	}
	for _, want := range []string{"weft / hand-written, chain10", "fanout10", "stock dev server / weft dev's server",
		"enqueue weft / raw SDK", "node attempts/s", "history events per action node", "load average"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestWorkloadShapes(t *testing.T) {
	for _, w := range workloads() {
		if n := strings.Count(string(w.graph), `"core.echo"`); n != w.nodes {
			t.Errorf("%s has %d echo nodes, says %d", w.key, n, w.nodes)
		}
	}
	if g := string(chainGraph(10)); !strings.Contains(g, `"from":"e10.out","to":"out.in"`) {
		t.Fatalf("chain graph = %s", g)
	}
}
