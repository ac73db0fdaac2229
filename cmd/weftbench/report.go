package main

import (
	"fmt"
	"io"
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
	// Latency: weft tuned, weft stock, hand-written tuned (in that order).
	Latency []LatencySummary
	// Throughput: weft tuned, hand-written tuned.
	Throughput []ThroughputSummary
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
}

func summarizeBursts(name string, bs []burstResult) ThroughputSummary {
	out := ThroughputSummary{Name: name}
	var allocs, mallocs []float64
	for _, b := range bs {
		out.RunsPerSecond = append(out.RunsPerSecond, float64(b.runs)/b.wall.Seconds())
		allocs = append(allocs, float64(b.allocBytes)/float64(b.runs))
		mallocs = append(mallocs, float64(b.mallocs)/float64(b.runs))
	}
	out.Median, out.AllocPerRun, out.MallocsPerRun = medianF(out.RunsPerSecond), medianF(allocs), medianF(mallocs)
	return out
}

func medianF(v []float64) float64 {
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

// Ratios derived from the report (all from the same run).
func (r *Report) TunedVsStock() float64 {
	return r.Latency[1].Median.Seconds() / r.Latency[0].Median.Seconds()
}

// WeftVsHand is weft's median latency over the hand-written workflow's.
func (r *Report) WeftVsHand() float64 {
	return r.Latency[0].Median.Seconds() / r.Latency[2].Median.Seconds()
}

// PerNodeOverhead is what weft adds per node over the hand-written workflow.
func (r *Report) PerNodeOverhead() time.Duration {
	return (r.Latency[0].Median - r.Latency[2].Median) / chainLength
}

// pairedRatio is the median over rounds of num[r]/den[r]: samples of one
// round ran back to back, so each ratio sees the same load.
func pairedRatio(num, den []time.Duration) float64 {
	var rs []float64
	for i := range min(len(num), len(den)) {
		rs = append(rs, num[i].Seconds()/den[i].Seconds())
	}
	return medianF(rs)
}

// ThroughputRatio is weft's runs/s over the hand-written workflow's.
func (r *Report) ThroughputRatio() float64 { return r.Throughput[0].Median / r.Throughput[1].Median }

// AllocRatio is weft's bytes allocated per run over the hand-written workflow's.
func (r *Report) AllocRatio() float64 {
	return r.Throughput[0].AllocPerRun / r.Throughput[1].AllocPerRun
}

func (r *Report) write(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "\n## weftbench %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "%s, %d CPUs; load average %s before, %s after; %s in all.\n", r.GoVersion, r.CPUs, r.LoadBefore, r.LoadAfter, r.Elapsed.Round(time.Second))
	fmt.Fprintf(w, "Options: -rounds %d -warmup %d -concurrency %d -bursts %d.\n\n", o.Rounds, o.Warmup, o.Concurrency, o.Bursts)

	fmt.Fprintf(w, "### Latency: %d-node core.echo chain, enqueue request → run succeeded (ms, %d sequential runs each, interleaved)\n\n", chainLength, o.Rounds)
	fmt.Fprintln(w, "| configuration | min | median | p90 | max |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: |")
	for _, l := range r.Latency {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", l.Name, ms(l.Min), ms(l.Median), ms(l.P90), ms(l.Max))
	}
	fmt.Fprintf(w, "\n### Throughput: %d runs enqueued at once (%d bursts each, interleaved)\n\n", o.Concurrency, o.Bursts)
	fmt.Fprintln(w, "| configuration | runs/s per burst | median runs/s | KiB allocated per run | allocations per run |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: |")
	for _, t := range r.Throughput {
		per := ""
		for i, v := range t.RunsPerSecond {
			if i > 0 {
				per += ", "
			}
			per += fmt.Sprintf("%.1f", v)
		}
		fmt.Fprintf(w, "| %s | %s | %.1f | %.0f | %.0f |\n", t.Name, per, t.Median, t.AllocPerRun/1024, t.MallocsPerRun)
	}
	fmt.Fprintf(w, "\n### Ratios (medians of this run)\n\n")
	fmt.Fprintf(w, "- tuned vs stock dev server, weft latency: stock/tuned = **%.1fx** (%s ms vs %s ms)\n",
		r.TunedVsStock(), ms(r.Latency[1].Median), ms(r.Latency[0].Median))
	fmt.Fprintf(w, "- weft vs hand-written workflow, latency: weft/hand-written = **%.2fx** (%s ms vs %s ms); weft adds **%s ms per node**\n",
		r.WeftVsHand(), ms(r.Latency[0].Median), ms(r.Latency[2].Median), ms(r.PerNodeOverhead()))
	fmt.Fprintf(w, "- the same two ratios as medians of per-round ratios (each round's samples ran back to back): stock/tuned **%.1fx**, weft/hand-written **%.2fx**\n",
		pairedRatio(r.Latency[1].Samples, r.Latency[0].Samples), pairedRatio(r.Latency[0].Samples, r.Latency[2].Samples))
	fmt.Fprintf(w, "- weft vs hand-written workflow, throughput: weft/hand-written = **%.2fx** (%.1f vs %.1f runs/s)\n",
		r.ThroughputRatio(), r.Throughput[0].Median, r.Throughput[1].Median)
	fmt.Fprintf(w, "- weft vs hand-written workflow, bytes allocated per run in this process: weft/hand-written = **%.1fx**\n", r.AllocRatio())
}
