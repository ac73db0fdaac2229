package main

import (
	"bytes"
	"strings"
	"testing"
)

const sampleMetrics = `# HELP persistence_requests persistence_requests counter
# TYPE persistence_requests counter
persistence_requests{namespace="all",operation="CreateTasks",service_name="matching"} 10
persistence_requests{namespace="default",operation="CreateTasks",service_name="matching"} 5
persistence_requests{operation="GetTimerTasks",service_name="history"} 3
persistence_latency_bucket{operation="CreateTasks",service_name="matching",le="0.001"} 7
persistence_latency_sum{operation="CreateTasks",service_name="matching"} 0.5
persistence_latency_count{operation="CreateTasks",service_name="matching"} 15
memory_heap{service_name="history"} 123456
`

func TestParseMetricsKeepsCountersByOperation(t *testing.T) {
	got, err := parseMetrics(strings.NewReader(sampleMetrics))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		// Series differing only in a dropped label (namespace) are summed.
		`persistence_requests{operation=CreateTasks,service_name=matching}`:      15,
		`persistence_requests{operation=GetTimerTasks,service_name=history}`:     3,
		`persistence_latency_count{operation=CreateTasks,service_name=matching}`: 15,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v (buckets, sums and gauges left out)", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func TestMetricDiffsWritesPerRunDifferences(t *testing.T) {
	var d metricDiffs
	d.add("weft", map[string]float64{"a": 10, "b": 0}, map[string]float64{"a": 40, "b": 30}, 30)
	d.add("hand", map[string]float64{"a": 40, "b": 30}, map[string]float64{"a": 70, "b": 90}, 30)
	var out bytes.Buffer
	d.write(&out, []string{"weft", "hand"}, 0.5)
	s := out.String()
	if strings.Contains(s, "  a ") {
		t.Errorf("a grew by 1 per run on both sides, yet it is listed:\n%s", s)
	}
	if !strings.Contains(s, "  b ") || !strings.Contains(s, "1.00") || !strings.Contains(s, "2.00") {
		t.Errorf("b (1 per weft run, 2 per hand-written run) is missing:\n%s", s)
	}
}
