package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Report is what a benchmark run measured.
type Report struct {
	Options    Options
	Started    time.Time
	Elapsed    time.Duration
	LoadBefore string
	LoadAfter  string
	CPUs       int
	GoVersion  string
	// Latency, in configuration order: per workload weft then
	// hand-written (tuned server, `weft api` shape), then the chain10
	// variants (Run lists them).
	Latency []LatencySummary
	// Servers: hand-written chain10 in blocks of back-to-back runs, weft
	// dev's server first, then stock, tuned in memory, and a file without WAL.
	Servers []LatencySummary
	// History: one run of each workload, weft and hand-written.
	History []HistorySummary
	// Throughput: weft chain10, hand-written chain10.
	Throughput []ThroughputSummary
	// Enqueue: weft's API, the raw SDK start, the raw SDK start with
	// weft's start options.
	Enqueue []ThroughputSummary
	// Capacity: weft chain10, hand-written chain10, Options.Capacity at once.
	Capacity []CapacitySummary
	// Storage is the event log's and the runs table's size per run.
	Storage StorageSummary
	// Spans: where runs spend their time, by history span (Options.Spans).
	Spans []SpanSummary
	// SDK: the Temporal SDK's timers over the latency section (tuned
	// server), by workflow and activity type.
	SDK []SDKTimer
	// CPUMeasured says whether the throughput, enqueue and capacity
	// summaries carry CPU per run (Linux, the dev server's process found).
	CPUMeasured bool
	// RSS and PeakRSS of this process at the end (API, starter, workers of
	// four dev servers, both sides).
	RSS, PeakRSS int64
}

// LatencySummary summarizes sequential end-to-end samples.
type LatencySummary struct {
	Name             string
	Samples          []time.Duration
	Min, Median, P90 time.Duration
	Max              time.Duration
}

func summarize(name string, d []time.Duration) LatencySummary {
	s := sortedCopy(d)
	return LatencySummary{Name: name, Samples: d, Min: s[0], Median: percentile(s, 0.5), P90: percentile(s, 0.9), Max: s[len(s)-1]}
}

// HistoryCount is one closed execution's history.
type HistoryCount struct {
	Events, Bytes, WorkflowTasks, Activities, Markers int
}

// HistorySummary compares one run of a workload on both sides.
type HistorySummary struct {
	Workload   string
	Activities int // a run executes
	Weft, Hand HistoryCount
}

// ThroughputSummary summarizes the bursts of one configuration.
type ThroughputSummary struct {
	Name string
	// RunsPerSecond per burst, and their median.
	RunsPerSecond []float64
	Median        float64
	// AllocPerRun is the median bytes this process allocated per run
	// (API, starter and worker of both sides are in this process).
	AllocPerRun   float64
	MallocsPerRun float64
	// CPUPerRun is the CPU every burst used over every run (zero when
	// not measured).
	CPUPerRun CPUUse
}

func summarizeBursts(name string, bs []burstResult) ThroughputSummary {
	out := ThroughputSummary{Name: name}
	var allocs, mallocs []float64
	var cpu CPUUse
	runs := 0
	for _, b := range bs {
		cpu, runs = cpu.add(b.cpu), runs+b.runs
		out.RunsPerSecond = append(out.RunsPerSecond, float64(b.runs)/b.wall.Seconds())
		allocs = append(allocs, float64(b.allocBytes)/float64(b.runs))
		mallocs = append(mallocs, float64(b.mallocs)/float64(b.runs))
	}
	out.Median, out.AllocPerRun, out.MallocsPerRun = medianF(out.RunsPerSecond), medianF(allocs), medianF(mallocs)
	out.CPUPerRun = cpu.perRun(runs)
	return out
}

// StorageSummary is PostgreSQL's tables at the end of a run.
type StorageSummary struct {
	Runs, Events         int64
	EventBytes, RunBytes int64
}

// CapacitySummary is how many node attempts per second one worker ran.
type CapacitySummary struct {
	Name string
	// AttemptsPerSecond is over all of the side's bursts: their node
	// attempts over their summed wall time.
	AttemptsPerSecond float64
	Walls             []time.Duration // each burst's
	CPUPerRun         CPUUse          // zero when not measured
}

// summarizeCapacity sums one side's capacity bursts of chain runs with
// activities node attempts each.
func summarizeCapacity(name string, activities int, bursts []burstResult) CapacitySummary {
	c := CapacitySummary{Name: name}
	var wall time.Duration
	var cpu CPUUse
	runs := 0
	for _, b := range bursts {
		c.Walls = append(c.Walls, b.wall)
		wall += b.wall
		cpu = cpu.add(b.cpu)
		runs += b.runs
	}
	if wall > 0 {
		c.AttemptsPerSecond = float64(runs*activities) / wall.Seconds()
	}
	c.CPUPerRun = cpu.perRun(runs)
	return c
}

// medianF is v's median, 0 for no values.
func medianF(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	for i := 1; i < len(s); i++ { // insertion sort: a handful of values
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }

// latency returns the summary named name (the zero value if absent).
func (r *Report) latency(name string) LatencySummary {
	for _, l := range r.Latency {
		if l.Name == name {
			return l
		}
	}
	return LatencySummary{}
}

// ratio is the median of a over the median of b, with the median of
// per-round ratios (each round's samples ran back to back, so each ratio
// sees the same load).
func (r *Report) ratio(a, b string) (medians, paired float64) {
	la, lb := r.latency(a), r.latency(b)
	if lb.Median == 0 {
		return 0, 0
	}
	return la.Median.Seconds() / lb.Median.Seconds(), medianF(r.roundRatios(a, b))
}

// roundRatios are a's per-round latencies over b's.
func (r *Report) roundRatios(a, b string) []float64 {
	return pairedRatios(seconds(r.latency(a).Samples), seconds(r.latency(b).Samples))
}

func seconds(d []time.Duration) []float64 {
	out := make([]float64, len(d))
	for i, x := range d {
		out[i] = x.Seconds()
	}
	return out
}

// WeftVsHand is weft's median chain10 latency over the hand-written one's.
func (r *Report) WeftVsHand() float64 {
	m, _ := r.ratio("weft chain10", "hand-written chain10")
	return m
}

// ThroughputRatio is weft's runs/s over the hand-written workflow's.
func (r *Report) ThroughputRatio() float64 { return r.Throughput[0].Median / r.Throughput[1].Median }

// AllocRatio is weft's bytes allocated per run over the hand-written workflow's.
func (r *Report) AllocRatio() float64 {
	return r.Throughput[0].AllocPerRun / r.Throughput[1].AllocPerRun
}

// EnqueueRatio is weft's median enqueue rate over the raw SDK's.
func (r *Report) EnqueueRatio() float64 { return r.Enqueue[0].Median / r.Enqueue[1].Median }

// EnqueuePairedRatio is the median over rounds of weft's rate over the raw
// SDK's in the same round (the two ran back to back).
func (r *Report) EnqueuePairedRatio() float64 { return medianF(r.enqueueRoundRatios()) }

func (r *Report) enqueueRoundRatios() []float64 {
	return pairedRatios(r.Enqueue[0].RunsPerSecond, r.Enqueue[1].RunsPerSecond)
}

// server returns the sustained summary of the named dev server.
func (r *Report) server(name string) LatencySummary {
	for _, l := range r.Servers {
		if l.Name == name {
			return l
		}
	}
	return LatencySummary{}
}

// DevServerVsStock is stock over weft dev's server, hand-written chain10
// run back to back.
func (r *Report) DevServerVsStock() float64 {
	dev := r.server(serverWeftDev).Median
	if dev == 0 {
		return 0
	}
	return r.server(serverStock).Median.Seconds() / dev.Seconds()
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

func (r *Report) write(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "\n## weftbench %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "%s, %d CPUs; load average %s before, %s after; %s in all.\n", r.GoVersion, r.CPUs, r.LoadBefore, r.LoadAfter, r.Elapsed.Round(time.Second))
	fmt.Fprintf(w, "Options: -rounds %d -warmup %d -concurrency %d -bursts %d -enqueues %d -clients %d -enqueue-rounds %d -capacity %d -blocks %d -block-runs %d; PostgreSQL pool %d connections.\n\n",
		o.Rounds, o.Warmup, o.Concurrency, o.Bursts, o.Enqueues, o.Clients, o.EnqueueRounds, o.Capacity, o.Blocks, o.BlockRuns, o.PoolMaxConns)

	fmt.Fprintf(w, "### Latency: enqueue request → run succeeded (ms, %d sequential runs each, interleaved)\n\n", o.Rounds)
	fmt.Fprintf(w, "Dev servers: %q (weft's tuning, in memory) unless named; %q adds a SQLite file in WAL mode; %q is `temporal server start-dev` as shipped; %q adds `system.enableActivityEagerExecution`. weft's API is on a client of its own (the `weft api` shape) unless it says `weft dev shape` (the worker's client, eager starts).\n\n",
		serverTuned, serverWeftDev, serverStock, serverEager)
	fmt.Fprintln(w, "| configuration | min | median | p90 | max |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: |")
	for _, l := range r.Latency {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", l.Name, ms(l.Min), ms(l.Median), ms(l.P90), ms(l.Max))
	}

	writeSDK(w, r.SDK)
	writeSpans(w, r.Spans)

	fmt.Fprintf(w, "\n### Dev servers under sustained use: hand-written chain10, %d blocks of %d back-to-back runs each, interleaved (ms)\n\n", o.Blocks, o.BlockRuns)
	fmt.Fprintln(w, "| dev server | min | median | p90 | max |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: |")
	for _, l := range r.Servers {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", l.Name, ms(l.Min), ms(l.Median), ms(l.P90), ms(l.Max))
	}

	fmt.Fprintf(w, "\n### History per run (one run of each, tuned server)\n\n")
	fmt.Fprintln(w, "| workload | weft events | hand-written events | extra events per activity | weft KiB | hand-written KiB | weft workflow tasks | hand-written workflow tasks | weft markers |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, h := range r.History {
		fmt.Fprintf(w, "| %s | %d | %d | %.2f | %.1f | %.1f | %d | %d | %d |\n", h.Workload, h.Weft.Events, h.Hand.Events,
			float64(h.Weft.Events-h.Hand.Events)/float64(h.Activities), float64(h.Weft.Bytes)/1024, float64(h.Hand.Bytes)/1024,
			h.Weft.WorkflowTasks, h.Hand.WorkflowTasks, h.Weft.Markers)
	}

	fmt.Fprintf(w, "\n### Throughput: %d chain10 runs at once (%d bursts each, interleaved, after one unrecorded warm-up burst each: steady state)\n\n", o.Concurrency, o.Bursts)
	writeThroughput(w, r.Throughput)
	r.writeCPU(w, r.Throughput[0].Name, r.Throughput[0].CPUPerRun, r.Throughput[1].Name, r.Throughput[1].CPUPerRun)
	fmt.Fprintf(w, "\n### Enqueue: %d starts from %d concurrent clients onto a task queue no worker polls (%d rounds after an unrecorded one, the sides' order alternating)\n\n", o.Enqueues, o.Clients, o.EnqueueRounds)
	writeThroughput(w, r.Enqueue)
	r.writeCPU(w, r.Enqueue[0].Name, r.Enqueue[0].CPUPerRun, r.Enqueue[1].Name, r.Enqueue[1].CPUPerRun, r.Enqueue[2:]...)
	fmt.Fprintf(w, "\n### Worker capacity: %d chain10 runs at once on one worker (two bursts per side, in the order weft, hand-written, hand-written, weft)\n\n", o.Capacity)
	fmt.Fprintln(w, "| side | node attempts/s | wall per burst |")
	fmt.Fprintln(w, "| --- | ---: | ---: |")
	for _, c := range r.Capacity {
		walls := make([]string, len(c.Walls))
		for i, d := range c.Walls {
			walls[i] = d.Round(time.Millisecond).String()
		}
		fmt.Fprintf(w, "| %s | %.0f | %s |\n", c.Name, c.AttemptsPerSecond, strings.Join(walls, ", "))
	}
	if len(r.Capacity) == 2 {
		r.writeCPU(w, r.Capacity[0].Name, r.Capacity[0].CPUPerRun, r.Capacity[1].Name, r.Capacity[1].CPUPerRun)
	}
	fmt.Fprintf(w, "\nThis process at the end: RSS %.0f MiB, peak %.0f MiB (API, starter and workers of four dev servers, both sides).\n",
		float64(r.RSS)/(1<<20), float64(r.PeakRSS)/(1<<20))

	if s := r.Storage; s.Runs > 0 {
		fmt.Fprintf(w, "PostgreSQL after %d runs: %d events (%.1f per run); run_events %.1f KiB per run, runs %.1f KiB per run (rows, indexes and TOAST).\n",
			s.Runs, s.Events, float64(s.Events)/float64(s.Runs), float64(s.EventBytes)/1024/float64(s.Runs), float64(s.RunBytes)/1024/float64(s.Runs))
	}
	fmt.Fprintf(w, "\n### Ratios (this run) and targets\n\n")
	line := func(what, a, b string, target float64, below bool) {
		m, p := r.ratio(a, b)
		ok := m <= target
		if !below {
			ok = m >= target
		}
		cmp := "≤"
		if !below {
			cmp = "≥"
		}
		fmt.Fprintf(w, "- %s: **%.2fx** (medians %s / %s ms; per-round median %.2fx); target %s %.2fx: %s; %s\n",
			what, m, ms(r.latency(a).Median), ms(r.latency(b).Median), p, cmp, target, verdict(ok),
			describeInterval(r.roundRatios(a, b), target, below))
	}
	for _, wl := range workloads() {
		target := 0.0
		switch wl.key {
		case "chain10", "fanout10":
			target = 1.10
		}
		if target > 0 {
			line("weft / hand-written, "+wl.key, "weft "+wl.key, "hand-written "+wl.key, target, true)
		} else {
			m, p := r.ratio("weft "+wl.key, "hand-written "+wl.key)
			fmt.Fprintf(w, "- weft / hand-written, %s: **%.2fx** (per-round median %.2fx)\n", wl.key, m, p)
		}
	}
	m, p := r.ratio("weft chain10, weft dev shape (eager start)", "weft chain10")
	fmt.Fprintf(w, "- eager start (`weft dev` shape) / `weft api` shape, weft chain10: **%.2fx** (per-round median %.2fx); a production split of API and worker processes cannot have it\n", m, p)
	m, p = r.ratio("weft chain10, eager activities", "hand-written chain10, eager activities")
	fmt.Fprintf(w, "- with eager activities on the server, weft / hand-written chain10: **%.2fx** (per-round median %.2fx)\n", m, p)
	fmt.Fprintf(w, "- stock dev server / weft dev's server, hand-written chain10 back to back: **%.1fx** (medians %s / %s ms); target ≥ 5x: %s; the WAL pragmas: file without / with WAL **%.2fx**; weft dev's file / in memory **%.2fx**\n",
		r.DevServerVsStock(), ms(r.server(serverStock).Median), ms(r.server(serverWeftDev).Median), verdict(r.DevServerVsStock() >= 5),
		r.server(serverFile).Median.Seconds()/r.server(serverWeftDev).Median.Seconds(),
		r.server(serverWeftDev).Median.Seconds()/r.server(serverTuned).Median.Seconds())
	fmt.Fprintf(w, "- throughput weft / hand-written: **%.2fx** (%.1f vs %.1f runs/s); target ≥ 0.90x: %s\n",
		r.ThroughputRatio(), r.Throughput[0].Median, r.Throughput[1].Median, verdict(r.ThroughputRatio() >= 0.9))
	if r.CPUMeasured {
		c, h := r.Throughput[0].CPUPerRun, r.Throughput[1].CPUPerRun
		fmt.Fprintf(w, "- CPU per throughput run weft / hand-written: **%.2fx** (%s vs %s ms: dev server %s vs %s, PostgreSQL %s vs %s, this process %s vs %s)\n",
			c.Total().Seconds()/max(h.Total().Seconds(), 1e-9), ms(c.Total()), ms(h.Total()), ms(c.DevServer), ms(h.DevServer), ms(c.Postgres), ms(h.Postgres), ms(c.Self), ms(h.Self))
	}
	fmt.Fprintf(w, "- bytes allocated per run weft / hand-written: **%.2fx**; target ≤ 1.50x: %s\n", r.AllocRatio(), verdict(r.AllocRatio() <= 1.5))
	fmt.Fprintf(w, "- enqueue weft / raw SDK starts: **%.2fx** (medians %.0f vs %.0f starts/s; per-round median %.2fx); target ≥ 0.80x: %s; %s\n",
		r.EnqueueRatio(), r.Enqueue[0].Median, r.Enqueue[1].Median, r.EnqueuePairedRatio(), verdict(r.EnqueueRatio() >= 0.8),
		describeInterval(r.enqueueRoundRatios(), 0.8, false))
	if len(r.Enqueue) == 3 {
		fmt.Fprintf(w, "  - split: raw SDK starts with weft's start options (search attributes, summary and details, id policies) / raw SDK starts **%.2fx**; weft / raw SDK starts with those options **%.2fx** (the API, the run's row in PostgreSQL, the run's parameters)\n",
			r.Enqueue[2].Median/r.Enqueue[1].Median, r.Enqueue[0].Median/r.Enqueue[2].Median)
	}
	if len(r.Capacity) == 2 {
		fmt.Fprintf(w, "- worker capacity weft / hand-written: **%.2fx** (%.0f vs %.0f node attempts/s)\n",
			r.Capacity[0].AttemptsPerSecond/r.Capacity[1].AttemptsPerSecond, r.Capacity[0].AttemptsPerSecond, r.Capacity[1].AttemptsPerSecond)
	}
	for _, h := range r.History {
		if h.Workload == "chain10" {
			extra := float64(h.Weft.Events-h.Hand.Events) / float64(h.Activities)
			fmt.Fprintf(w, "- history events per action node over hand-written, chain10: **%.2f** (target: at most one per workflow task, i.e. %.2f here): %s\n",
				extra, float64(h.Weft.WorkflowTasks)/float64(h.Activities), verdict(extra <= float64(h.Weft.WorkflowTasks)/float64(h.Activities)))
		}
	}
}

func writeThroughput(w io.Writer, ts []ThroughputSummary) {
	fmt.Fprintln(w, "| side | per burst /s | median /s | KiB allocated per run | allocations per run |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: |")
	for _, t := range ts {
		per := make([]string, len(t.RunsPerSecond))
		for i, v := range t.RunsPerSecond {
			per[i] = fmt.Sprintf("%.1f", v)
		}
		fmt.Fprintf(w, "| %s | %s | %.1f | %.0f | %.0f |\n", t.Name, strings.Join(per, ", "), t.Median, t.AllocPerRun/1024, t.MallocsPerRun)
	}
}

// writeCPU writes the CPU per run of two sides (weft's first), of any
// more sides after them, and the first two's ratio per process, when
// measured.
func (r *Report) writeCPU(w io.Writer, nameA string, a CPUUse, nameB string, b CPUUse, more ...ThroughputSummary) {
	if !r.CPUMeasured {
		return
	}
	fmt.Fprintln(w, "\nCPU per run (ms; user + system from /proc, so load-robust: the tuned dev server's process, the bench database's PostgreSQL backends, this process):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| side | dev server | PostgreSQL | this process | total |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: |")
	for _, s := range []struct {
		name string
		c    CPUUse
	}{{nameA, a}, {nameB, b}} {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", s.name, ms(s.c.DevServer), ms(s.c.Postgres), ms(s.c.Self), ms(s.c.Total()))
	}
	for _, t := range more {
		c := t.CPUPerRun
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", t.Name, ms(c.DevServer), ms(c.Postgres), ms(c.Self), ms(c.Total()))
	}
	ratio := func(x, y time.Duration) string {
		if y == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", x.Seconds()/y.Seconds())
	}
	label := "ratio"
	if len(more) > 0 {
		label = "ratio of the first two"
	}
	fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", label, ratio(a.DevServer, b.DevServer), ratio(a.Postgres, b.Postgres), ratio(a.Self, b.Self), ratio(a.Total(), b.Total()))
}
