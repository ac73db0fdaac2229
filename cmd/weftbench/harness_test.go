package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/internal/testinfra"
)

// TestHarnessRuns runs the harness at its smallest against real dev servers
// and PostgreSQL, so `make bench` cannot rot: every configuration completes
// and checks its runs, and the report carries every ratio. It asserts no
// timing (figures are what `make bench` records, never test verdicts).
func TestHarnessRuns(t *testing.T) {
	var out bytes.Buffer
	memProfile := filepath.Join(t.TempDir(), "mem.out")
	cpuProfile := filepath.Join(t.TempDir(), "cpu.out")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Rounds: 1, Warmup: 0, Concurrency: 3, Bursts: 1, Enqueues: 4, Clients: 2, EnqueueRounds: 2, Capacity: 3, Blocks: 1, BlockRuns: 1,
		MemProfile: memProfile, CPUProfile: cpuProfile, ProfileSection: sectionCapacity, Spans: 1,
		TemporalCLI: testinfra.TemporalBinary(), AdminURL: testinfra.AdminURL()}, &out, io.Discard)
	require.NoError(t, err)
	prof, err := os.ReadFile(memProfile)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(prof, []byte{0x1f, 0x8b}), "the heap profile is not gzipped protobuf: % x", prof[:min(len(prof), 8)])
	cpu, err := os.ReadFile(cpuProfile)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(cpu, []byte{0x1f, 0x8b}), "the CPU profile is not gzipped protobuf: % x", cpu[:min(len(cpu), 8)])
	require.Len(t, rep.Latency, 2*len(workloads())+4, "report = %+v", rep)
	require.Len(t, rep.Servers, 4, "report = %+v", rep)
	require.Len(t, rep.Throughput, 2, "report = %+v", rep)
	require.Len(t, rep.Enqueue, 3, "report = %+v", rep)
	for _, e := range rep.Enqueue {
		assert.Len(t, e.RunsPerSecond, 2, "%s: one rate per enqueue round", e.Name)
	}
	require.Len(t, rep.Capacity, 2, "report = %+v", rep)
	for _, c := range rep.Capacity {
		require.Len(t, c.Walls, 2, "%s: two capacity bursts per side", c.Name)
		require.Positive(t, c.AttemptsPerSecond, c.Name)
	}
	require.Len(t, rep.History, len(workloads()), "report = %+v", rep)
	for _, h := range rep.History {
		assert.False(t, h.Weft.Activities != h.Activities || h.Hand.Activities < 1 || h.Weft.Events <= 0, "history of %s: %+v", h.Workload, h)
	}
	require.Len(t, rep.Spans, len(workloads()), "report = %+v", rep)
	for _, s := range rep.Spans {
		for _, side := range []map[string]float64{s.Weft, s.Hand} {
			assert.Positive(t, side[spanTotal], "%s spans: %v", s.Workload, side)
			assert.Contains(t, side, "WorkflowTaskStarted → WorkflowTaskCompleted (last task)", "%s spans: %v", s.Workload, side)
		}
	}
	for _, l := range rep.Latency {
		assert.False(t, len(l.Samples) != 1 || l.Median <= 0, "%s: samples %v", l.Name, l.Samples)
	}
	// The SDK's timers over the latency section: both sides' workflow and
	// activity tasks, and weft's local activities (LoadPlan, the flushes).
	for _, side := range []bool{true, false} {
		for _, m := range []string{"workflow_task_execution_latency", "activity_execution_latency"} {
			got := sdkSide(rep.SDK, m, side, func(a string) bool { return a != "none" || m == "workflow_task_execution_latency" })
			assert.False(t, got.Count == 0 || got.Sum <= 0, "weft side %v, %s: %+v", side, m, got)
		}
	}
	for _, la := range []string{"weft.LoadPlan", "weft.AppendEvents"} {
		found := false
		for _, tm := range rep.SDK {
			found = found || (tm.Metric == "local_activity_execution_latency" && tm.WorkflowType == weftWorkflowType && tm.ActivityType == la && tm.Count > 0)
		}
		assert.True(t, found, "no %s local activity in %+v", la, rep.SDK)
	}
	if runtime.GOOS == "linux" {
		// The dev server is this process's child and the bench database's
		// backends are local: every side's runs cost some CPU in each.
		require.True(t, rep.CPUMeasured, "the tuned dev server's process was not found")
		for _, c := range []CPUUse{rep.Throughput[0].CPUPerRun, rep.Throughput[1].CPUPerRun, rep.Capacity[0].CPUPerRun, rep.Capacity[1].CPUPerRun} {
			assert.False(t, c.DevServer <= 0 || c.Self <= 0 || c.Postgres < 0, "CPU per run %+v", c)
		}
		// weft's runs write their events and run row; hand-written ones
		// write nothing to PostgreSQL.
		assert.Positive(t, rep.Throughput[0].CPUPerRun.Postgres, "weft's CPU per run %+v", rep.Throughput[0].CPUPerRun)
		assert.Contains(t, out.String(), "CPU per throughput run weft / hand-written")
	}
	for _, want := range []string{"weft / hand-written, chain10", "fanout10", "stock dev server / weft dev's server",
		"enqueue weft / raw SDK", "node attempts/s", "history events per action node", "load average", "where a run's time goes", "Per task, from the Temporal SDK's metrics",
		"too few rounds (1) for a 95% interval", "too few rounds (2) for a 95% interval"} {
		assert.Contains(t, out.String(), want, "report lacks %q:\n%s", want, out.String())
	}
}

func TestWorkloadShapes(t *testing.T) {
	for _, w := range workloads() {
		n := strings.Count(string(w.graph), `"core.echo"`)
		assert.Equal(t, w.nodes, n, "%s has %d echo nodes, says %d", w.key, n, w.nodes)
	}
	g := string(chainGraph(10))
	require.Contains(t, g, `"from":"e10.out","to":"out.in"`, "chain graph = %s", g)
}

func TestParseStatCPU(t *testing.T) {
	// A command with spaces and a parenthesis: fields count after the last ')'.
	line := []byte("4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 3 4 20 0 8 0 1000 0 0\n")
	d, err := parseStatCPU(line)
	require.NoError(t, err)
	assert.Equal(t, 3250*time.Millisecond, d, "utime 250 + stime 75 ticks")
	assert.Equal(t, 1, parentPID(line))
	_, err = parseStatCPU([]byte("4242 (x) S 1 2"))
	assert.Error(t, err)
	if runtime.GOOS == "linux" {
		_, err := processCPU("self")
		require.NoError(t, err)
	}
}
