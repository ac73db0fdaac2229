package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.temporal.io/sdk/client"

	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/temporalclient"
)

// readyCheckTimeout bounds each dependency check of /readyz, so a hung
// dependency answers 503 quickly instead of holding the probe.
const readyCheckTimeout = 2 * time.Second

// Check results shown by /readyz. Failure details are logged, never shown:
// the route is unauthenticated.
const (
	checkOK          = "ok"
	checkUnreachable = "unreachable"
	checkSkipped     = "skipped: temporal unreachable"
)

// registerHealthRoutes adds /healthz, /readyz and /metrics (owned by the platform task).
func (s *Server) registerHealthRoutes(e *echo.Echo) {
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	if s.deps.Metrics != nil {
		e.GET("/metrics", echo.WrapHandler(s.deps.Metrics.Handler()))
	}
}

// healthz answers while the process serves HTTP.
func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz checks PostgreSQL, Temporal, and weft's search attributes on the
// namespace. 200 {"status":"ready","checks":{...},"providers":{...}} when
// all checks pass; otherwise 503 UNAVAILABLE naming each failed check in
// details.checks (and the providers in details.providers). Providers are a
// separate, non-fatal section: a model provider that is down does not make
// the process unready (agent nodes wait for it; every other node runs).
func (s *Server) readyz(c echo.Context) error {
	ctx := c.Request().Context()
	providers := map[string]string{}
	done := make(chan struct{})
	go func() { // probes run next to the other checks; each is bounded
		defer close(done)
		providers = s.checkProviders(ctx)
	}()
	checks := map[string]string{
		"postgres":         s.checkPostgres(ctx),
		"temporal":         s.checkTemporal(ctx),
		"searchAttributes": checkSkipped,
	}
	if checks["temporal"] == checkOK {
		checks["searchAttributes"] = s.checkSearchAttributes(ctx)
	}
	<-done
	var failed []string
	for _, name := range []string{"postgres", "temporal", "searchAttributes"} {
		if checks[name] != checkOK {
			failed = append(failed, name)
		}
	}
	if len(failed) > 0 {
		return failure.New(failure.CodeUnavailable, "not ready: %s", strings.Join(failed, ", ")).
			WithDetails(map[string]any{"checks": checks, "providers": providers})
	}
	return c.JSON(http.StatusOK, map[string]any{"status": "ready", "checks": checks, "providers": providers})
}

// Provider readiness shown by /readyz (the probe's detail is logged by the
// probe, never shown: the route is unauthenticated).
const (
	providerOK          = "ok"
	providerUnreachable = "unreachable"
	providerRefused     = "refused"
	providerUnknown     = "unknown"
)

// checkProviders reports each watched model provider: ok, unreachable
// (down: agent nodes using it stop at once with PROVIDER_UNAVAILABLE and go
// out again), refused (the endpoint refuses the key), or unknown (no
// verdict before the request ended). Verdicts are cached for
// WEFT_PROVIDER_PROBE_TTL, so /readyz never costs more than one probe per
// provider per TTL.
func (s *Server) checkProviders(ctx context.Context) map[string]string {
	out := map[string]string{}
	if s.deps.Providers == nil {
		return out
	}
	report := s.deps.Providers.Report(ctx)
	for _, name := range s.deps.Providers.Names() {
		st, ok := report[name]
		switch {
		case !ok:
			out[name] = providerUnknown
		case st.State == provider.StateUp:
			out[name] = providerOK
		case st.State == provider.StateRefused:
			out[name] = providerRefused
		default:
			out[name] = providerUnreachable
		}
	}
	return out
}

func (s *Server) checkPostgres(ctx context.Context) string {
	if s.deps.Store == nil {
		return "not configured"
	}
	ctx, cancel := context.WithTimeout(ctx, readyCheckTimeout)
	defer cancel()
	if err := s.deps.Store.Ping(ctx); err != nil {
		s.log.Warn("readyz: postgres", "err", err)
		return checkUnreachable
	}
	return checkOK
}

func (s *Server) checkTemporal(ctx context.Context) string {
	if s.deps.Temporal == nil {
		return "not configured"
	}
	ctx, cancel := context.WithTimeout(ctx, readyCheckTimeout)
	defer cancel()
	if _, err := s.deps.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		s.log.Warn("readyz: temporal", "err", err)
		return checkUnreachable
	}
	return checkOK
}

func (s *Server) checkSearchAttributes(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, readyCheckTimeout)
	defer cancel()
	missing, err := temporalclient.MissingSearchAttributes(ctx, s.deps.Temporal, s.deps.Config.TemporalNamespace)
	if err != nil {
		s.log.Warn("readyz: search attributes", "err", err)
		return checkUnreachable
	}
	if len(missing) > 0 {
		return "missing: " + strings.Join(missing, ", ")
	}
	return checkOK
}

// observeLatency records every request in the API latency histogram, by
// route template (never the raw path, which would explode cardinality),
// method and final status. Errors are rendered here (c.Error) so the status
// is the one the client receives.
func (s *Server) observeLatency(next echo.HandlerFunc) echo.HandlerFunc {
	if s.deps.Metrics == nil {
		return next
	}
	hist := s.deps.Metrics.HTTPRequestDuration
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			c.Error(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		hist.WithLabelValues(route, c.Request().Method, strconv.Itoa(c.Response().Status)).
			Observe(time.Since(start).Seconds())
		return nil
	}
}
