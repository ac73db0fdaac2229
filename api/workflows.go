package api

import "github.com/labstack/echo/v4"

// registerWorkflowRoutes adds the /v1/workflows routes (owned by the workflows-API task).
func (s *Server) registerWorkflowRoutes(g *echo.Group) {}
