package metrics_test

import (
	"testing"
	"time"

	"github.com/weftworks/weft/metrics"
)

// BenchmarkTemporalHandler is the SDK's pattern per task: tags for the
// task's type, then a timer and a counter recorded on them.
func BenchmarkTemporalHandler(b *testing.B) {
	h := metrics.New().Temporal().WithTags(map[string]string{"namespace": "default", "task_queue": "q", "client_name": "temporal_go"})
	b.ReportAllocs()
	for b.Loop() {
		t := h.WithTags(map[string]string{"workflow_type": "weft.Run", "activity_type": "none", "worker_type": "WorkflowWorker"})
		t.Timer("temporal_workflow_task_execution_latency").Record(time.Millisecond)
		t.Counter("temporal_workflow_task_completed").Inc(1)
	}
}
