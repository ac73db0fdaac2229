package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// SDKTimer is one of the Temporal SDK's timers over a section of the run,
// for one workflow and activity type: how many it recorded and their sum.
type SDKTimer struct {
	Metric       string // the SDK's name, without "temporal_" and "_seconds"
	WorkflowType string
	ActivityType string // "none" for a workflow task's
	Count        uint64
	Sum          float64 // seconds
}

// Mean is the mean record in milliseconds.
func (t SDKTimer) Mean() float64 {
	if t.Count == 0 {
		return 0
	}
	return t.Sum / float64(t.Count) * 1000
}

func (t SDKTimer) key() string { return t.Metric + "|" + t.WorkflowType + "|" + t.ActivityType }

// sdkSnapshot reads the Temporal SDK's timers from a registry (the
// worker's client records them there: metrics.Metrics' Temporal handler).
func sdkSnapshot(g prometheus.Gatherer) (map[string]SDKTimer, error) {
	families, err := g.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]SDKTimer{}
	for _, f := range families {
		name := f.GetName()
		if f.GetType() != dto.MetricType_HISTOGRAM || !strings.HasPrefix(name, "temporal_") || !strings.HasSuffix(name, "_seconds") {
			continue
		}
		for _, m := range f.GetMetric() {
			t := SDKTimer{Metric: strings.TrimSuffix(strings.TrimPrefix(name, "temporal_"), "_seconds")}
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "workflow_type":
					t.WorkflowType = l.GetValue()
				case "activity_type":
					t.ActivityType = l.GetValue()
				}
			}
			t.Count, t.Sum = m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			prev := out[t.key()]
			t.Count, t.Sum = t.Count+prev.Count, t.Sum+prev.Sum // other labels (task queue) summed
			out[t.key()] = t
		}
	}
	return out, nil
}

// sdkDiff is what each timer recorded between two snapshots.
func sdkDiff(before, after map[string]SDKTimer) []SDKTimer {
	var out []SDKTimer
	for k, a := range after {
		b := before[k]
		if a.Count > b.Count {
			a.Count, a.Sum = a.Count-b.Count, a.Sum-b.Sum
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// sdkSide sums a timer over one side's types: weft's interpreter
// (weft.Run and its activities) or the hand-written workflows.
func sdkSide(ts []SDKTimer, metric string, weft bool, activity func(string) bool) SDKTimer {
	sum := SDKTimer{Metric: metric}
	for _, t := range ts {
		if t.Metric != metric || (t.WorkflowType == weftWorkflowType) != weft || !activity(t.ActivityType) {
			continue
		}
		sum.Count += t.Count
		sum.Sum += t.Sum
	}
	return sum
}

// weftWorkflowType is the interpreter's workflow type (workflows.Register).
const weftWorkflowType = "weft.Run"

// writeSDK writes where the worker's own time goes, from the SDK's
// timers over the latency section: what the worker spends per task
// against what the task waits for (the server, the network), weft beside
// the hand-written workflows. Per task, not per run: weft's workflow
// tasks include its local activities.
func writeSDK(w io.Writer, ts []SDKTimer) {
	if len(ts) == 0 {
		return
	}
	all := func(string) bool { return true }
	regular := func(a string) bool { return a != "none" }
	rows := []struct {
		label, metric string
		activity      func(string) bool
	}{
		{"workflow task: scheduled → started (waits for a poller)", "workflow_task_schedule_to_start_latency", all},
		{"workflow task: in the worker (local activities included)", "workflow_task_execution_latency", all},
		{"activity task: scheduled → started", "activity_schedule_to_start_latency", regular},
		{"activity task: in the worker", "activity_execution_latency", regular},
		{"activity task: scheduled → completed", "activity_succeed_endtoend_latency", regular},
	}
	fmt.Fprintf(w, "\n#### Per task, from the Temporal SDK's metrics (the latency section on the tuned server; mean ms, tasks counted)\n\n")
	fmt.Fprintln(w, "| task | weft | hand-written | weft − hand-written |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
	for _, r := range rows {
		a, b := sdkSide(ts, r.metric, true, r.activity), sdkSide(ts, r.metric, false, r.activity)
		if a.Count == 0 && b.Count == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s | %.2f (%d) | %.2f (%d) | %+.2f |\n", r.label, a.Mean(), a.Count, b.Mean(), b.Count, a.Mean()-b.Mean())
	}
	for _, t := range ts {
		if t.Metric == "local_activity_execution_latency" && t.WorkflowType == weftWorkflowType {
			fmt.Fprintf(w, "| local activity %s: in the worker | %.2f (%d) | | |\n", t.ActivityType, t.Mean(), t.Count)
		}
	}
}
