package provider_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/agents/provider"
)

// probeEndpoint answers GET /v1/models with status (200 by default) after
// an optional hold, and counts the probes.
type probeEndpoint struct {
	status atomic.Int32
	hold   atomic.Int64 // nanoseconds
	probes atomic.Int32
	auth   atomic.Value // the last Authorization header
}

func (p *probeEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/models" || r.Method != http.MethodGet {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	p.probes.Add(1)
	p.auth.Store(r.Header.Get("Authorization"))
	if d := time.Duration(p.hold.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	status := int(p.status.Load())
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	// An endpoint that echoes the credential must not get it into a verdict.
	_, _ = w.Write([]byte(`{"error":"key ` + secretKey + ` rejected"}`))
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newReadiness(t *testing.T, base string, o provider.ReadinessOptions) (*provider.Readiness, *bytes.Buffer) {
	t.Helper()
	p, err := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: base + "/v1", APIKey: secretKey, Model: "m"})
	require.NoError(t, err)
	var logs bytes.Buffer
	o.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	return provider.NewReadiness([]provider.Provider{provider.Sim{}, p}, o), &logs
}

func TestReadinessProbesCachesAndClassifies(t *testing.T) {
	ep := &probeEndpoint{}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	clk := &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	r, logs := newReadiness(t, srv.URL, provider.ReadinessOptions{TTL: 10 * time.Second, Now: clk.now})
	ctx := context.Background()

	require.Equal(t, []string{provider.NameOpenAI}, r.Names(), "sim has no endpoint to probe")
	_, ok := r.Check(ctx, provider.NameSim)
	require.False(t, ok)

	ep.status.Store(http.StatusServiceUnavailable)
	st, ok := r.Check(ctx, provider.NameOpenAI)
	require.True(t, ok)
	require.True(t, st.Down(), "%+v", st)
	require.Equal(t, "Bearer "+secretKey, ep.auth.Load(), "the probe is an authenticated call")
	require.Equal(t, int32(1), ep.probes.Load())

	// Cached for the TTL: no second call, even when asked often.
	ep.status.Store(http.StatusOK)
	for range 5 {
		st, _ = r.Check(ctx, provider.NameOpenAI)
		require.True(t, st.Down())
	}
	require.Equal(t, int32(1), ep.probes.Load())

	clk.add(10 * time.Second)
	st, _ = r.Check(ctx, provider.NameOpenAI)
	require.Equal(t, provider.StateUp, st.State)
	require.Equal(t, int32(2), ep.probes.Load())

	for status, want := range map[int]string{
		http.StatusUnauthorized: provider.StateRefused, http.StatusForbidden: provider.StateRefused,
		http.StatusNotFound: provider.StateUp, http.StatusTooManyRequests: provider.StateUp,
		http.StatusBadGateway: provider.StateDown, http.StatusRequestTimeout: provider.StateDown,
	} {
		ep.status.Store(int32(status))
		clk.add(10 * time.Second)
		st, _ = r.Check(ctx, provider.NameOpenAI)
		require.Equal(t, want, st.State, "status %d", status)
		require.NotContains(t, st.Detail, secretKey)
	}

	// A network failure is down too.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	rd, _ := newReadiness(t, dead.URL, provider.ReadinessOptions{})
	st, ok = rd.Check(ctx, provider.NameOpenAI)
	require.True(t, ok)
	require.True(t, st.Down(), "%+v", st)

	require.NotContains(t, logs.String(), secretKey, "the key is never logged")
	require.Contains(t, logs.String(), "model provider not ready")
}

func TestReadinessProbeIsBoundedAndSingleFlight(t *testing.T) {
	ep := &probeEndpoint{}
	ep.hold.Store(int64(time.Minute)) // a hung endpoint
	srv := httptest.NewServer(ep)
	defer srv.Close()
	r, _ := newReadiness(t, srv.URL, provider.ReadinessOptions{Timeout: 300 * time.Millisecond})

	start := time.Now()
	var wg sync.WaitGroup
	results := make([]provider.Status, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _ = r.Check(context.Background(), provider.NameOpenAI)
		}()
	}
	wg.Wait()
	// Generous: the probe timeout is 300 ms; a loaded machine adds delay,
	// never a minute.
	require.Less(t, time.Since(start), 20*time.Second, "a probe is bounded by its timeout")
	for _, st := range results {
		require.True(t, st.Down(), "%+v", st)
		require.True(t, strings.Contains(st.Detail, "in time"), st.Detail)
	}
	require.Equal(t, int32(1), ep.probes.Load(), "concurrent askers share one probe")

	// A caller whose own context ends gets no made-up verdict.
	r2, _ := newReadiness(t, srv.URL, provider.ReadinessOptions{Timeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, ok := r2.Check(ctx, provider.NameOpenAI)
	require.False(t, ok)
}

func TestReadinessObservesRealCalls(t *testing.T) {
	ep := &probeEndpoint{}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	clk := &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	r, _ := newReadiness(t, srv.URL, provider.ReadinessOptions{TTL: time.Minute, Now: clk.now})
	r.Observe(provider.NameOpenAI, &provider.Error{Code: provider.CodeUnavailable, Message: "the endpoint answered 503"})
	st, ok := r.Check(context.Background(), provider.NameOpenAI)
	require.True(t, ok)
	require.True(t, st.Down(), "a failed call marks the provider down without a probe")
	require.Zero(t, ep.probes.Load())
	r.Observe(provider.NameOpenAI, &provider.Error{Code: provider.CodeRefused, Message: "400"})
	st, _ = r.Check(context.Background(), provider.NameOpenAI)
	require.True(t, st.Down(), "a refusal says nothing about reachability")
	r.Observe(provider.NameOpenAI, nil)
	st, _ = r.Check(context.Background(), provider.NameOpenAI)
	require.Equal(t, provider.StateUp, st.State)
	r.Observe(provider.NameSim, nil) // not watched: ignored
	var nilReadiness *provider.Readiness
	nilReadiness.Observe(provider.NameOpenAI, nil)
	_, ok = nilReadiness.Check(context.Background(), provider.NameOpenAI)
	require.False(t, ok)
}
