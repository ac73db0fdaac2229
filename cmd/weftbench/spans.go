package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// SpanSummary is where one workload's runs spent their time, weft against
// the hand-written workflow (Options.Spans runs each, interleaved): per
// span of the history (from one event to the next, named by the two event
// types), its median total per run, and the spans outside the history
// (the client's start or enqueue request until WorkflowExecutionStarted,
// the completion until the client has the result).
type SpanSummary struct {
	Workload string
	Runs     int
	// Weft and Hand map a span's name to its median milliseconds per run.
	Weft, Hand map[string]float64
}

// Names of the spans outside the history.
const (
	spanBefore = "client → WorkflowExecutionStarted"
	spanAfter  = "WorkflowExecutionCompleted → client"
	spanTotal  = "total (client)"
)

// measureSpans runs each workload n times per side on e, alternating, and
// splits every run's wall time by its history's events.
func measureSpans(ctx context.Context, e *env, n int) ([]SpanSummary, error) {
	var out []SpanSummary
	for _, w := range workloads() {
		weft, hand := map[string][]float64{}, map[string][]float64{}
		for r := 0; r < n; r++ {
			for side := 0; side < 2; side++ {
				idem := fmt.Sprintf("spans-%d-%s", r, uuid.NewString())
				start := time.Now()
				var (
					d   time.Duration
					err error
					id  string
					acc = weft
				)
				if (r+side)%2 == 0 {
					d, err = e.weftRun(ctx, e.api, w, idem)
					id = e.workflowID(w, idem)
				} else {
					d, err = e.handRun(ctx, w, idem)
					id, acc = "hand-"+idem, hand
				}
				if err != nil {
					return nil, err
				}
				spans, err := e.spans(ctx, id, start, start.Add(d))
				if err != nil {
					return nil, err
				}
				for k, v := range spans {
					acc[k] = append(acc[k], v)
				}
			}
		}
		out = append(out, SpanSummary{Workload: w.key, Runs: n, Weft: medians(weft, n), Hand: medians(hand, n)})
	}
	return out, nil
}

// spans splits one closed run's wall time (start to end, this process's
// clock, which the dev server on this machine shares) by its history.
func (e *env) spans(ctx context.Context, workflowID string, start, end time.Time) (map[string]float64, error) {
	it := e.tc.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	out := map[string]float64{spanTotal: msOf(end.Sub(start))}
	var events []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, err
		}
		events = append(events, ev)
	}
	if len(events) == 0 {
		return nil, fmt.Errorf("%s has no history", workflowID)
	}
	// Workflow tasks are told apart: the first (the run's setup) and the
	// last (its end) from the ones between.
	tasks, task := 0, 0
	for _, ev := range events {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED {
			tasks++
		}
	}
	out[spanBefore] = msOf(events[0].GetEventTime().AsTime().Sub(start))
	for k := 1; k < len(events); k++ {
		prev, ev := events[k-1], events[k]
		name := prev.GetEventType().String() + " → " + ev.GetEventType().String()
		if prev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED {
			task++
			switch task {
			case 1:
				name += " (first task)"
			case tasks:
				name += " (last task)"
			default:
				name += " (tasks between)"
			}
		}
		out[name] += msOf(ev.GetEventTime().AsTime().Sub(prev.GetEventTime().AsTime()))
	}
	out[spanAfter] = msOf(end.Sub(events[len(events)-1].GetEventTime().AsTime()))
	return out, nil
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// medians of each span over n runs; a run without the span counts as 0.
func medians(samples map[string][]float64, n int) map[string]float64 {
	out := make(map[string]float64, len(samples))
	for k, v := range samples {
		s := slices.Clone(v)
		for len(s) < n {
			s = append(s, 0)
		}
		slices.Sort(s)
		out[k] = s[len(s)/2]
	}
	return out
}

// writeSpans writes one table per workload, the spans by weft's median
// minus the hand-written one's, largest first.
func writeSpans(w io.Writer, spans []SpanSummary) {
	for _, s := range spans {
		fmt.Fprintf(w, "\n#### %s: where a run's time goes (median ms per run over %d runs each; tuned dev server)\n\n", s.Workload, s.Runs)
		fmt.Fprintln(w, "| span | weft | hand-written | weft − hand-written |")
		fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
		keys := map[string]bool{}
		for k := range s.Weft {
			keys[k] = true
		}
		for k := range s.Hand {
			keys[k] = true
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		sort.Slice(names, func(i, j int) bool {
			if (names[i] == spanTotal) != (names[j] == spanTotal) {
				return names[i] == spanTotal
			}
			di, dj := s.Weft[names[i]]-s.Hand[names[i]], s.Weft[names[j]]-s.Hand[names[j]]
			if di != dj {
				return di > dj
			}
			return names[i] < names[j]
		})
		for _, k := range names {
			fmt.Fprintf(w, "| %s | %.1f | %.1f | %+.1f |\n", k, s.Weft[k], s.Hand[k], s.Weft[k]-s.Hand[k])
		}
	}
}
