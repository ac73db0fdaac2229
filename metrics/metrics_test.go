package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weftworks/weft/metrics"
)

// TestNewIsolated: each New has its own registry (no global state), so two
// servers in one process, or two tests, never collide.
func TestNewIsolated(t *testing.T) {
	a, b := metrics.New(), metrics.New()
	a.HTTPRequestDuration.WithLabelValues("/x", "GET", "200").Observe(0.01)

	body := func(m *metrics.Metrics) string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		return string(b)
	}
	if !strings.Contains(body(a), `weft_api_request_duration_seconds_count{method="GET",route="/x",status="200"} 1`) {
		t.Error("a lacks its observation")
	}
	if strings.Contains(body(b), `route="/x"`) {
		t.Error("b sees a's observation")
	}
	for _, want := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if !strings.Contains(body(b), want) {
			t.Errorf("registry lacks %s", want)
		}
	}
}
