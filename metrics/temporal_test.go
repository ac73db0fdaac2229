package metrics_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/client"

	"github.com/weftworks/weft/metrics"
)

// TestTemporalHandlerExports: what the SDK records through the handler is
// served at /metrics under Prometheus' names (counters "_total", timers
// as histograms in seconds), labelled by the tags it was recorded with.
func TestTemporalHandlerExports(t *testing.T) {
	m := metrics.New()
	h := m.Temporal().WithTags(map[string]string{"namespace": "default", "task_queue": "q"})
	wf := h.WithTags(map[string]string{"workflow_type": "weft.Run"})
	wf.Timer("temporal_workflow_task_execution_latency").Record(3 * time.Millisecond)
	wf.Timer("temporal_workflow_task_execution_latency").Record(2 * time.Second)
	wf.Counter("temporal_workflow_completed").Inc(2)
	h.Gauge("temporal_worker_task_slots_available").Update(7)

	got := scrape(t, m)
	for _, want := range []string{
		`temporal_workflow_task_execution_latency_seconds_count{namespace="default",task_queue="q",workflow_type="weft.Run"} 2`,
		`temporal_workflow_task_execution_latency_seconds_bucket{namespace="default",task_queue="q",workflow_type="weft.Run",le="0.005"} 1`,
		`temporal_workflow_task_execution_latency_seconds_bucket{namespace="default",task_queue="q",workflow_type="weft.Run",le="2.5"} 2`,
		`temporal_workflow_completed_total{namespace="default",task_queue="q",workflow_type="weft.Run"} 2`,
		`temporal_worker_task_slots_available{namespace="default",task_queue="q"} 7`,
		`go_goroutines`, // the registry's own collectors are still there
	} {
		assert.Contains(t, got, want, "scrape lacks %s", want)
	}
	// WithTags copies: the parent handler's tags did not grow.
	h.Counter("temporal_request").Inc(1)
	assert.Contains(t, scrape(t, m), `temporal_request_total{namespace="default",task_queue="q"} 1`)
}

// TestTemporalHandlerKeepsTheFirstLabels: a metric recorded again with
// other tag keys keeps the labels of its first record (a missing tag is
// empty, an extra one dropped), so the scrape never fails.
func TestTemporalHandlerKeepsTheFirstLabels(t *testing.T) {
	m := metrics.New()
	h := m.Temporal()
	h.WithTags(map[string]string{"operation": "StartWorkflowExecution"}).Counter("temporal_request").Inc(1)
	h.WithTags(map[string]string{"operation": "PollWorkflowTaskQueue", "extra": "x"}).Counter("temporal_request").Inc(1)
	h.Counter("temporal_request").Inc(1)

	got := scrape(t, m)
	assert.Contains(t, got, `temporal_request_total{operation="StartWorkflowExecution"} 1`)
	assert.Contains(t, got, `temporal_request_total{operation="PollWorkflowTaskQueue"} 1`)
	assert.Contains(t, got, `temporal_request_total{operation=""} 1`)
	assert.NotContains(t, got, `extra=`)
}

// TestTemporalHandlerDropsWhatPrometheusRefuses: an invalid name or tag
// key, or a name another collector holds, records nothing and breaks
// nothing; a nil *Metrics gives a handler that records nothing.
func TestTemporalHandlerDropsWhatPrometheusRefuses(t *testing.T) {
	m := metrics.New()
	h := m.Temporal()
	h.Timer("temporal.bad-name").Record(time.Millisecond)
	h.WithTags(map[string]string{"bad-key": "v"}).Counter("temporal_bad_tag").Inc(1)
	// weft's own histogram holds this name with other labels.
	h.Gauge("weft_node_duration_seconds").Update(1)
	h.Gauge("weft_node_duration_seconds").Update(2) // refused once, dropped after

	got := scrape(t, m)
	assert.NotContains(t, got, "bad")
	for _, line := range strings.Split(got, "\n") {
		assert.False(t, strings.HasPrefix(line, "weft_node_duration_seconds "), "the gauge replaced weft's histogram: %s", line)
	}

	var none *metrics.Metrics
	assert.Equal(t, client.MetricsNopHandler, none.Temporal())
	none.Temporal().Timer("temporal_workflow_task_execution_latency").Record(time.Millisecond)
}

// TestTemporalHandlerCachesWhatItDerives: the handler the SDK derives for
// the same tags is the same one (so its metrics are found without
// allocating), other values make other series, more than three tags
// still record, and concurrent records all count.
func TestTemporalHandlerCachesWhatItDerives(t *testing.T) {
	m := metrics.New()
	root := m.Temporal()
	a := root.WithTags(map[string]string{"operation": "Poll", "namespace": "default"})
	assert.Same(t, a, root.WithTags(map[string]string{"namespace": "default", "operation": "Poll"}))
	assert.NotSame(t, a, root.WithTags(map[string]string{"namespace": "default", "operation": "Start"}))
	wide := map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}
	root.WithTags(wide).Counter("temporal_wide").Inc(1)
	root.WithTags(wide).Counter("temporal_wide").Inc(1)

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				root.WithTags(map[string]string{"namespace": "default", "operation": "Poll"}).Counter("temporal_request").Inc(1)
				root.WithTags(map[string]string{"namespace": "default", "operation": "Start"}).Timer("temporal_request_latency").Record(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	got := scrape(t, m)
	assert.Contains(t, got, `temporal_wide_total{a="1",b="2",c="3",d="4"} 2`)
	assert.Contains(t, got, `temporal_request_total{namespace="default",operation="Poll"} 8000`)
	assert.Contains(t, got, `temporal_request_latency_seconds_count{namespace="default",operation="Start"} 8000`)
}
