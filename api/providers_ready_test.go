package api_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/internal/testinfra/inproc"
)

const providerKey = "sk-readyz-SECRET-9876543210"

// TestReadyzReportsProvidersApart: with PostgreSQL and Temporal up, a model
// provider that is down is reported in /readyz's own providers section and
// the process stays ready (200); verdicts are cached between probes, a
// hung endpoint answers within the probe timeout, and the key never shows.
func TestReadyzReportsProvidersApart(t *testing.T) {
	tc := testinfra.OwnTemporal(t).Client()
	st := testinfra.NewStore(t)
	cfg, err := config.FromEnv(func(string) string { return "" })
	require.NoError(t, err)

	var status atomic.Int32
	var hold atomic.Bool
	var probes atomic.Int32
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probes.Add(1)
		if hold.Load() {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(int(status.Load()))
		_, _ = w.Write([]byte(`{"error":"bad key ` + providerKey + `"}`))
	}))
	defer endpoint.Close()
	p, err := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: endpoint.URL + "/v1", APIKey: providerKey})
	require.NoError(t, err)

	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var clockMu atomic.Int64
	clock := func() time.Time { return now.Add(time.Duration(clockMu.Load())) }
	ready := provider.NewReadiness([]provider.Provider{p}, provider.ReadinessOptions{
		TTL: time.Minute, Timeout: 500 * time.Millisecond, Logger: logger, Now: clock})
	h := inproc.API(t, api.Deps{Config: cfg, Store: st, Keys: testinfra.Keys(t, "providers-ready-secret-0123456789"), Temporal: tc, Logger: logger, Providers: ready})

	readyz := func() (int, map[string]any) {
		t.Helper()
		code, raw := healthGet(t, h, "/readyz")
		require.NotContains(t, string(raw), providerKey)
		var body map[string]any
		require.NoError(t, json.Unmarshal(raw, &body), "%s", raw)
		return code, body
	}

	status.Store(http.StatusServiceUnavailable)
	code, body := readyz()
	require.Equal(t, http.StatusOK, code, "a provider down does not make the process unready: %v", body)
	require.Equal(t, "ready", body["status"])
	require.Equal(t, map[string]any{"openai": "unreachable"}, body["providers"])
	require.Equal(t, "ok", body["checks"].(map[string]any)["postgres"])

	// Cached: the next answers do not probe again within the TTL.
	status.Store(http.StatusOK)
	readyz()
	readyz()
	require.Equal(t, int32(1), probes.Load())

	clockMu.Add(int64(time.Minute))
	_, body = readyz()
	require.Equal(t, map[string]any{"openai": "ok"}, body["providers"])

	clockMu.Add(int64(time.Minute))
	status.Store(http.StatusUnauthorized)
	_, body = readyz()
	require.Equal(t, map[string]any{"openai": "refused"}, body["providers"])

	// A hung endpoint: answered within the probe timeout, not held.
	clockMu.Add(int64(time.Minute))
	hold.Store(true)
	start := time.Now()
	code, body = readyz()
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, map[string]any{"openai": "unreachable"}, body["providers"])
	require.Less(t, time.Since(start), 15*time.Second)

	require.NotContains(t, logs.String(), providerKey, "the key is never logged")
	require.True(t, strings.Contains(logs.String(), `"provider":"openai"`), "state changes are logged: %s", logs.String())

	// Without providers the section is empty, still present.
	_, raw := healthGet(t, inproc.API(t, api.Deps{Config: cfg, Store: st, Keys: testinfra.Keys(t, "providers-ready-secret-0123456789"), Temporal: tc, Logger: logger}), "/readyz")
	require.Contains(t, string(raw), `"providers":{}`)
}
