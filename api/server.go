// Package api is weft's HTTP adapter: Echo handlers that authenticate,
// check scope and tenant, decode, call the domain, and encode. Errors are
// mapped to HTTP statuses in one place (errors.go).
package api

import (
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.temporal.io/sdk/client"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/store"
)

// Deps are the API's collaborators, passed explicitly.
type Deps struct {
	Config   config.Config
	Store    *store.Store
	Keys     *auth.Keys
	Temporal client.Client
	Logger   *slog.Logger
}

// Server holds the dependencies handlers use.
type Server struct {
	deps Deps
	log  *slog.Logger
}

// New builds the Echo application with every route.
func New(d Deps) *echo.Echo {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	s := &Server{deps: d, log: d.Logger}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.Use(s.recoverPanics)

	s.registerHealthRoutes(e)
	v1 := e.Group("/v1", s.authenticate)
	s.registerWorkflowRoutes(v1)
	s.registerRunRoutes(v1)
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
