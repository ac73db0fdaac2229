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
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("readyz body %s: %v", raw, err)
	}
	return code, b
}

func TestHealthAndReadiness(t *testing.T) {
	// A dev server WITHOUT weft's search attributes, so one server shows
	// /readyz both failing and passing.
	tc := testinfra.BareTemporal(t).Client()
	st := testinfra.NewStore(t)
	keys := testinfra.Keys(t, "health-test-secret-0123456789")
	cfg, err := config.FromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := inproc.API(t, api.Deps{Config: cfg, Store: st, Keys: keys, Temporal: tc, Logger: logger, Metrics: metrics.New()})

	if code, body := healthGet(t, h, "/healthz"); code != http.StatusOK || strings.TrimSpace(string(body)) != `{"status":"ok"}` {
		t.Fatalf("/healthz = %d %s", code, body)
	}

	// Search attributes not registered yet: 503 naming them.
	code, b := healthReadyz(t, h)
	if code != http.StatusServiceUnavailable || b.Error.Code != "UNAVAILABLE" {
		t.Fatalf("/readyz without search attributes = %d %+v", code, b)
	}
	checks := b.Error.Details.Checks
	if checks["postgres"] != "ok" || checks["temporal"] != "ok" || !strings.Contains(checks["searchAttributes"], "WeftRevision") {
		t.Fatalf("checks = %v", checks)
	}
	if !strings.Contains(b.Error.Message, "searchAttributes") {
		t.Errorf("message %q does not name the failed check", b.Error.Message)
	}

	// Registered: ready.
	if _, err := temporalclient.RegisterSearchAttributes(context.Background(), tc, "default"); err != nil {
		t.Fatal(err)
	}
	code, b = healthReadyz(t, h)
	if code != http.StatusOK || b.Status != "ready" {
		t.Fatalf("/readyz = %d %+v", code, b)
	}
	for _, name := range []string{"postgres", "temporal", "searchAttributes"} {
		if b.Checks[name] != "ok" {
			t.Errorf("check %s = %q", name, b.Checks[name])
		}
	}
}

func TestReadinessFailures(t *testing.T) {
	cfg, err := config.FromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	keys := testinfra.Keys(t, "health-test-secret-0123456789")
	// A closed pool and a client aimed where nothing listens.
	st := testinfra.NewStore(t)
	st.Close()
	tc, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	h := inproc.API(t, api.Deps{Config: cfg, Store: st, Keys: keys, Temporal: tc,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	start := time.Now()
	code, b := healthReadyz(t, h)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d, want 503", code)
	}
	checks := b.Error.Details.Checks
	if checks["postgres"] != "unreachable" || checks["temporal"] != "unreachable" || !strings.HasPrefix(checks["searchAttributes"], "skipped") {
		t.Fatalf("checks = %v", checks)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("/readyz took %s; each check must be bounded", time.Since(start))
	}
	// Without Metrics there is no /metrics route.
	if code, _ := healthGet(t, h, "/metrics"); code != http.StatusNotFound {
		t.Fatalf("/metrics without a registry = %d", code)
	}
}

func TestMetrics(t *testing.T) {
	cfg, err := config.FromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	keys := testinfra.Keys(t, "health-test-secret-0123456789")
	h := inproc.API(t, api.Deps{Config: cfg, Store: testinfra.NewStore(t), Keys: keys, Metrics: metrics.New(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	healthGet(t, h, "/healthz")
	healthGet(t, h, "/v1/no-such-route/12345")                                        // 401: no token
	healthGet(t, h, "/no-such-page-67890")                                            // 404
	healthGet(t, h, "/v1/no-such-route/12345", "Authorization", "Bearer not-a-token") // 401
	code, body := healthGet(t, h, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	text := string(body)
	for _, want := range []string{
		"go_goroutines",
		"process_cpu_seconds_total",
		`weft_api_request_duration_seconds_count{method="GET",route="/healthz",status="200"} 1`,
		`weft_api_request_duration_seconds_count{method="GET",route="/v1/*",status="401"} 2`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
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
			if strings.Contains(labels, raw) {
				t.Errorf("/metrics carries a raw path segment %q: %s", raw, line)
			}
		}
	}
}
