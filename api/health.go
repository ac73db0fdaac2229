package api

import "github.com/labstack/echo/v4"

// registerHealthRoutes adds /healthz, /readyz and /metrics (owned by the platform task).
func (s *Server) registerHealthRoutes(e *echo.Echo) {}
