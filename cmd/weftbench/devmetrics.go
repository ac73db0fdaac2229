package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// devMetrics reads the tuned dev server's Prometheus endpoint, so a
// throughput burst's dev-server work can be counted (requests, persistence
// operations, tasks by type) per run and side: counts do not move with the
// machine's load the way CPU time does, so they say which side makes the
// dev server do more, and of what.
type devMetrics struct {
	url    string
	client *http.Client
}

// metricLabels are the labels a counter keeps; the rest (instance, host,
// namespace) are the same for every series of one dev server.
var metricLabels = regexp.MustCompile(`(operation|service_name|task_type|queue_type|type)="([^"]*)"`)

// metricsSettle is how long a snapshot waits first: the dev server's
// metrics reach its endpoint once per reporting interval (1 s, tally's
// root scope), so a burst's last requests show only after that.
const metricsSettle = 2 * time.Second

// snapshot reads every counter (and histogram count) whose name says it
// counts requests, tasks or persistence operations, summed by name and
// metricLabels, after metricsSettle.
func (m *devMetrics) snapshot(ctx context.Context) (map[string]float64, error) {
	if err := sleepCtx(ctx, metricsSettle); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("dev server metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("dev server metrics: %s", resp.Status)
	}
	return parseMetrics(resp.Body)
}

func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		series, value := line[:sp], line[sp+1:]
		name, labels := series, ""
		if i := strings.IndexByte(series, '{'); i >= 0 {
			name, labels = series[:i], series[i:]
		}
		if strings.HasSuffix(name, "_bucket") || strings.HasSuffix(name, "_sum") ||
			!(strings.Contains(name, "request") || strings.Contains(name, "task") || strings.Contains(name, "persistence")) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		var kept []string
		for _, l := range metricLabels.FindAllStringSubmatch(labels, -1) {
			kept = append(kept, l[1]+"="+l[2])
		}
		if len(kept) > 0 {
			name += "{" + strings.Join(kept, ",") + "}"
		}
		out[name] += v
	}
	return out, sc.Err()
}

// metricDiffs accumulates, per side, what bursts added to each counter.
type metricDiffs struct {
	sum  map[string]map[string]float64 // side → counter → increase
	runs map[string]int
}

func (d *metricDiffs) add(side string, before, after map[string]float64, runs int) {
	if d.sum == nil {
		d.sum, d.runs = map[string]map[string]float64{}, map[string]int{}
	}
	if d.sum[side] == nil {
		d.sum[side] = map[string]float64{}
	}
	for k, v := range after {
		d.sum[side][k] += v - before[k]
	}
	d.runs[side] += runs
}

// write prints, per run, every counter on which the sides differ by at
// least minDiff.
func (d *metricDiffs) write(w io.Writer, sides []string, minDiff float64) {
	keys := map[string]bool{}
	for _, s := range sides {
		for k := range d.sum[s] {
			keys[k] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	perRun := func(s, k string) float64 {
		if d.runs[s] == 0 {
			return 0
		}
		return d.sum[s][k] / float64(d.runs[s])
	}
	fmt.Fprintf(w, "weftbench: throughput: dev-server counters per run (%s), where the sides differ by >= %.1f:\n", strings.Join(sides, " | "), minDiff)
	for _, k := range sorted {
		lo, hi := perRun(sides[0], k), perRun(sides[0], k)
		for _, s := range sides[1:] {
			lo, hi = min(lo, perRun(s, k)), max(hi, perRun(s, k))
		}
		if hi-lo < minDiff {
			continue
		}
		fmt.Fprintf(w, "  %-110s", k)
		for _, s := range sides {
			fmt.Fprintf(w, " %9.2f", perRun(s, k))
		}
		fmt.Fprintln(w)
	}
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
