package api

import "github.com/labstack/echo/v4"

// registerRunRoutes adds the /v1/runs and /v1/notes routes (owned by the runs task).
func (s *Server) registerRunRoutes(g *echo.Group) {}
