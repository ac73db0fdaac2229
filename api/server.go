// Package api is weft's HTTP adapter: Echo handlers that authenticate,
// check scope and tenant, decode, call the domain, and encode. Errors are
// mapped to HTTP statuses in one place (errors.go).
package api

import (
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.temporal.io/sdk/client"

	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/bridges"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/metrics"
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
	// Resolver loads the dependency snapshot (action contracts, agent
	// revisions) drafts are validated and compiled against. Nil resolves
	// through Store: published and built-in actions, the tenant's agent
	// revisions (the built-in actions only without a Store).
	Resolver *catalog.Resolver
	// Starter is the execution capability the run routes enqueue and
	// cancel through.
	Starter *starter.Starter
	// Variables is the variable registry behind /v1/variables (the same
	// one graph validation and activities use). Nil uses
	// variables.Builtin(Store), whose agent.name reads the tenant's agents
	// (variables.Builtin(variables.NoAgents{}) without a Store).
	Variables *variables.Registry
	// Bridges serves schedules and webhooks. Nil builds one from Store,
	// Starter, Temporal, Config (TaskQueue, WebhookKey) and Keys.
	Bridges *bridges.Service
	// Streams bounds and ends the run event streams
	// (GET /v1/runs/{id}/events/stream). Nil uses NewStreams(nil, 0):
	// streams re-read the store every second instead of being woken.
	Streams *Streams
	// Providers is the model providers' cached readiness probe, reported
	// by /readyz in its own, non-fatal section. Nil reports none.
	Providers *provider.Readiness
}

// Server holds the dependencies handlers use.
type Server struct {
	deps    Deps
	log     *slog.Logger
	streams *Streams
	routes  *routeTable // set once every route is registered
}

// New builds the Echo application with every route.
func New(d Deps) *echo.Echo {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Store != nil {
		// The store is where agents live: it resolves agent revisions and
		// published actions for publication, and agent.name for templates.
		if d.Variables == nil {
			if reg, err := variables.Builtin(d.Store); err == nil {
				d.Variables = reg
			}
		}
		if d.Resolver == nil {
			d.Resolver = catalog.NewResolver(d.Store, d.Variables)
		}
	}
	if d.Streams == nil {
		d.Streams = NewStreams(nil, 0)
	}
	s := &Server{deps: d, log: d.Logger, streams: d.Streams}
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
	s.registerOpenAPIRoute(v1)
	s.routes = newRouteTable(e.Routes())
	return e
}

// list encodes a list response {"<plural>": items, "nextCursor": cursor}.
func list(c echo.Context, plural string, items any, nextCursor string) error {
	body := map[string]any{plural: items, "nextCursor": nil}
	if nextCursor != "" {
		body["nextCursor"] = nextCursor
	}
	return c.JSON(http.StatusOK, body)
}
