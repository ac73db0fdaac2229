// Package api is weft's HTTP adapter: Echo handlers that authenticate,
// check scope and tenant, decode, call the domain, and encode. Errors are
// mapped to HTTP statuses in one place (errors.go).
package api

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.temporal.io/sdk/client"

	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/bridges"
	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/metrics"
	"github.com/weftworks/weft/publication"
	"github.com/weftworks/weft/replay"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/variables"
)

// Deps are the API's collaborators, passed explicitly.
type Deps struct {
	Config   config.Config
	Store    *store.Store
	Keys     *auth.Keys
	Temporal client.Client
	Logger   *slog.Logger
	// Metrics is the Prometheus registry served at /metrics and the API
	// latency histogram; nil disables both.
	Metrics *metrics.Metrics
	// Publication dry-runs and publishes drafts, and checks agents' tools
	// and drafts' toolsets against the tenant's dependency snapshot.
	// Required.
	Publication *publication.Service
	// Starter is the execution capability the run, limits and approval
	// routes enqueue, cancel and decide through. Nil is a server without
	// runs: those routes answer 503 UNAVAILABLE.
	Starter *starter.Starter
	// Variables is the variable registry behind /v1/variables (the same
	// one graph validation and activities use). Required.
	Variables *variables.Registry
	// Bridges serves schedules and webhooks. Nil is a server without
	// them: every bridge route answers 503 UNAVAILABLE.
	Bridges *bridges.Service
	// Streams bounds and ends the run event streams
	// (GET /v1/runs/{id}/events/stream). Required; NewStreams(nil, 0)
	// re-reads the store every second instead of being woken.
	Streams *Streams
	// Replays starts replays of recorded runs through drafts (issue 21).
	// Nil is a server without them: POST /v1/workflows/{key}/replays
	// answers 503 UNAVAILABLE (reading stored replays still works).
	Replays *replay.Engine
	// Providers is the model providers' cached readiness probe, reported
	// by /readyz in its own, non-fatal section. Nil reports none.
	Providers *provider.Readiness
}

// Server holds the dependencies handlers use.
type Server struct {
	deps    Deps
	log     *slog.Logger
	streams *Streams
	// publication dry-runs and publishes drafts, and checks agents' tools
	// and drafts' toolsets against the tenant's snapshot.
	publication *publication.Service
	routes      *routeTable // set once every route is registered
}

// New builds the Echo application with every route. Store, Keys,
// Publication, Variables and Streams are required: a missing one is an
// error naming it (nothing is defaulted here; the app wires them once).
func New(d Deps) (*echo.Echo, error) {
	switch {
	case d.Store == nil:
		return nil, errors.New("api: Deps.Store is required")
	case d.Keys == nil:
		return nil, errors.New("api: Deps.Keys is required")
	case d.Publication == nil:
		return nil, errors.New("api: Deps.Publication (the publication service) is required")
	case d.Variables == nil:
		return nil, errors.New("api: Deps.Variables (the variable registry) is required")
	case d.Streams == nil:
		return nil, errors.New("api: Deps.Streams is required")
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	s := &Server{deps: d, log: d.Logger, streams: d.Streams, publication: d.Publication}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.Use(s.observeLatency) // outermost, so it sees the final status of every request
	e.Use(s.recoverPanics)

	s.registerHealthRoutes(e)
	v1 := e.Group("/v1", s.authenticate)
	s.registerWorkflowRoutes(v1)
	s.registerRunRoutes(v1)
	s.registerVariableRoutes(v1)
	s.registerAgentRoutes(v1)
	s.registerSkillRoutes(v1)
	s.registerScheduleRoutes(v1)
	s.registerWebhookRoutes(e, v1)
	s.registerRevocationRoutes(v1)
	s.registerLimitsRoutes(v1)
	s.registerApprovalRoutes(v1)
	s.registerEditorRoutes(v1)
	s.registerReplayRoutes(v1)
	s.registerOpenAPIRoute(v1)
	s.routes = newRouteTable(e.Routes())
	return e, nil
}

// list encodes a list response {"<plural>": items, "nextCursor": cursor}.
func list(c echo.Context, plural string, items any, nextCursor string) error {
	body := map[string]any{plural: items, "nextCursor": nil}
	if nextCursor != "" {
		body["nextCursor"] = nextCursor
	}
	return c.JSON(http.StatusOK, body)
}
