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
	rep, err := Run(ctx, Options{Rounds: 1, Warmup: 0, Concurrency: 3, Bursts: 1,
		TemporalCLI: testinfra.TemporalBinary(), AdminURL: testinfra.AdminURL()}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Latency) != 3 || len(rep.Throughput) != 2 {
		t.Fatalf("report = %+v", rep)
	}
	for _, l := range rep.Latency {
		if len(l.Samples) != 1 || l.Median <= 0 {
			t.Errorf("%s: samples %v", l.Name, l.Samples)
		}
	}
	for _, want := range []string{"stock/tuned", "weft/hand-written", "per node", "runs/s", "load average"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestChainGraphShape(t *testing.T) {
	g := string(chainGraph())
	if strings.Count(g, `"core.echo"`) != chainLength || !strings.Contains(g, `"from":"e10.out","to":"out.in"`) {
		t.Fatalf("chain graph = %s", g)
	}
}
