package metrics_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
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
	assert.Contains(t, body(a), `weft_api_request_duration_seconds_count{method="GET",route="/x",status="200"} 1`, "a lacks its observation")
	assert.NotContains(t, body(b), `route="/x"`, "b sees a's observation")
	for _, want := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		assert.Contains(t, body(b), want, "registry lacks %s", want)
	}
}

// TestObserveNodeNilSafe: a process without metrics passes a nil *Metrics.
func TestObserveNodeNilSafe(t *testing.T) {
	var m *metrics.Metrics
	m.ObserveNode("action", metrics.OutcomeSucceeded, time.Millisecond)

	m = metrics.New()
	m.ObserveNode("gate", metrics.OutcomeSucceeded, 2*time.Millisecond)
	m.ObserveNode("action", metrics.OutcomeFailed, time.Second)
	got := scrape(t, m)
	for _, want := range []string{
		`weft_node_duration_seconds_count{kind="gate",outcome="succeeded"} 1`,
		`weft_node_duration_seconds_count{kind="action",outcome="failed"} 1`,
		`weft_node_duration_seconds_bucket{kind="action",outcome="failed",le="1"} 1`,
	} {
		assert.Contains(t, got, want, "scrape lacks %s", want)
	}
}

// TestRunsByStatus counts runs in a real database at scrape time: every
// status is reported (0 when none) and the counts follow the table.
func TestRunsByStatus(t *testing.T) {
	st := testinfra.NewStore(t)
	m := metrics.New()
	require.NoError(t, m.RegisterRuns(st, 0, nil))
	got := scrape(t, m)
	for _, s := range execution.RunStatuses() {
		want := `weft_runs{status="` + s + `"} 0`
		assert.Contains(t, got, want, "empty table: scrape lacks %s", want)
	}
	assert.Contains(t, got, "weft_runs_collector_up 1", "collector not up")

	for i, status := range []string{"succeeded", "succeeded", "failed", "running"} {
		_, err := st.Pool.Exec(context.Background(), `INSERT INTO runs
			(run_id, tenant_id, workflow_key, revision, checksum, mode, status, input, input_hash, origin, actor, permissions, workflow_id)
			VALUES ($1, 't', 'k', 1, 'c', 'live', $2, '{}', 'h', '{"kind":"api"}', '{"kind":"user","sub":"u"}', '{}', $1)`,
			fmt.Sprintf("run-%d", i), status)
		require.NoError(t, err)
	}
	got = scrape(t, m)
	for _, want := range []string{
		`weft_runs{status="succeeded"} 2`, `weft_runs{status="failed"} 1`,
		`weft_runs{status="running"} 1`, `weft_runs{status="queued"} 0`, `weft_runs{status="cancelled"} 0`,
	} {
		assert.Contains(t, got, want, "scrape lacks %s", want)
	}
}

// hangingCounter never answers before its context ends.
type hangingCounter struct{}

func (hangingCounter) RunsByStatus(ctx context.Context) (map[string]int64, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestRunsTimeout: a database that does not answer costs the scrape at
// most the timeout, reports weft_runs_collector_up 0, and the other
// metrics are still served.
func TestRunsTimeout(t *testing.T) {
	m := metrics.New()
	require.NoError(t, m.RegisterRuns(hangingCounter{}, 50*time.Millisecond, slog.New(slog.DiscardHandler)))
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, 200, rec.Code, "scrape = %d", rec.Code)
	got := rec.Body.String()
	assert.False(t, !strings.Contains(got, "weft_runs_collector_up 0") || strings.Contains(got, "weft_runs{"), "want up 0 and no weft_runs series:\n%s", grep(got, "weft_runs"))
	assert.Contains(t, got, "go_goroutines", "other metrics missing")
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, 200, rec.Code, "scrape = %d: %s", rec.Code, rec.Body)
	return rec.Body.String()
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
