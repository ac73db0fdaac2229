package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/internal/testinfra/inproc"
	"github.com/weftworks/weft/metrics"
	"github.com/weftworks/weft/temporalclient"
)

type healthBody struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
	Error  struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details struct {
			Checks map[string]string `json:"checks"`
		} `json:"details"`
	} `json:"error"`
}

func healthGet(t *testing.T, h http.Handler, path string, header ...string) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

func healthReadyz(t *testing.T, h http.Handler) (int, healthBody) {
	t.Helper()
	code, raw := healthGet(t, h, "/readyz")
	var b healthBody
	require.NoError(t, json.Unmarshal(raw, &b), "readyz body %s", raw)
	return code, b
}

func TestHealthAndReadiness(t *testing.T) {
	// A dev server WITHOUT weft's search attributes, so one server shows
	// /readyz both failing and passing.
	tc := testinfra.BareTemporal(t).Client()
	st := testinfra.NewStore(t)
	keys := testinfra.Keys(t, "health-test-secret-0123456789")
	cfg, err := config.FromEnv(func(string) string { return "" })
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := inproc.API(t, api.Deps{Config: cfg, Store: st, Keys: keys, Temporal: tc, Logger: logger, Metrics: metrics.New()})

	code, body := healthGet(t, h, "/healthz")
	require.Equal(t, http.StatusOK, code, "/healthz = %d %s", code, body)
	require.Equal(t, `{"status":"ok"}`, strings.TrimSpace(string(body)), "/healthz = %d %s", code, body)

	// Search attributes not registered yet: 503 naming them.
	code, b := healthReadyz(t, h)
	require.Equal(t, http.StatusServiceUnavailable, code, "/readyz without search attributes = %d %+v", code, b)
	require.Equal(t, "UNAVAILABLE", b.Error.Code, "/readyz without search attributes = %d %+v", code, b)
	checks := b.Error.Details.Checks
	require.Equal(t, "ok", checks["postgres"], "checks = %v", checks)
	require.Equal(t, "ok", checks["temporal"], "checks = %v", checks)
	require.Contains(t, checks["searchAttributes"], "WeftRevision", "checks = %v", checks)
	assert.Contains(t, b.Error.Message, "searchAttributes", "message %q does not name the failed check", b.Error.Message)

	// Registered: ready.
	_, err = temporalclient.RegisterSearchAttributes(context.Background(), tc, "default")
	require.NoError(t, err)
	code, b = healthReadyz(t, h)
	require.Equal(t, http.StatusOK, code, "/readyz = %d %+v", code, b)
	require.Equal(t, "ready", b.Status, "/readyz = %d %+v", code, b)
	for _, name := range []string{"postgres", "temporal", "searchAttributes"} {
		assert.Equal(t, "ok", b.Checks[name], "check %s = %q", name, b.Checks[name])
	}
}

func TestReadinessFailures(t *testing.T) {
	cfg, err := config.FromEnv(func(string) string { return "" })
	require.NoError(t, err)
	keys := testinfra.Keys(t, "health-test-secret-0123456789")
	// A closed pool and a client aimed where nothing listens.
	st := testinfra.NewStore(t)
	st.Close()
	tc, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	require.NoError(t, err)
	defer tc.Close()
	h := inproc.API(t, api.Deps{Config: cfg, Store: st, Keys: keys, Temporal: tc,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	start := time.Now()
	code, b := healthReadyz(t, h)
	require.Equal(t, http.StatusServiceUnavailable, code, "/readyz = %d, want 503", code)
	checks := b.Error.Details.Checks
	require.Equal(t, "unreachable", checks["postgres"], "checks = %v", checks)
	require.Equal(t, "unreachable", checks["temporal"], "checks = %v", checks)
	require.True(t, strings.HasPrefix(checks["searchAttributes"], "skipped"), "checks = %v", checks)
	require.LessOrEqual(t, time.Since(start), 10*time.Second, "/readyz took %s; each check must be bounded", time.Since(start))
	// Without Metrics there is no /metrics route.
	code, _ = healthGet(t, h, "/metrics")
	require.Equal(t, http.StatusNotFound, code, "/metrics without a registry = %d", code)
}

func TestMetrics(t *testing.T) {
	cfg, err := config.FromEnv(func(string) string { return "" })
	require.NoError(t, err)
	keys := testinfra.Keys(t, "health-test-secret-0123456789")
	h := inproc.API(t, api.Deps{Config: cfg, Store: testinfra.NewStore(t), Keys: keys, Metrics: metrics.New(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	healthGet(t, h, "/healthz")
	healthGet(t, h, "/v1/no-such-route/12345")                                        // 401: no token
	healthGet(t, h, "/no-such-page-67890")                                            // 404
	healthGet(t, h, "/v1/no-such-route/12345", "Authorization", "Bearer not-a-token") // 401
	code, body := healthGet(t, h, "/metrics")
	require.Equal(t, http.StatusOK, code, "/metrics = %d", code)
	text := string(body)
	for _, want := range []string{
		"go_goroutines",
		"process_cpu_seconds_total",
		`weft_api_request_duration_seconds_count{method="GET",route="/healthz",status="200"} 1`,
		`weft_api_request_duration_seconds_count{method="GET",route="/v1/*",status="401"} 2`,
	} {
		assert.Contains(t, text, want, "/metrics lacks %s", want)
	}
	// Labels carry route templates, never raw paths. Only label text is
	// searched: sample values (memory, CPU seconds) may contain any digits.
	for _, line := range strings.Split(text, "\n") {
		open, end := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
		if open < 0 || end < open {
			continue
		}
		labels := line[open:end]
		for _, raw := range []string{"no-such-route", "12345", "no-such-page", "67890"} {
			assert.NotContains(t, labels, raw, "/metrics carries a raw path segment %q: %s", raw, line)
		}
	}
}
