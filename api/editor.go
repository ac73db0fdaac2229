package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/store"
)

// maxLayoutBody bounds a PUT of a layout: a position per node of the
// largest graph, with room to spare.
const maxLayoutBody = 64 << 10

// registerEditorRoutes adds what the canvas editor needs beside the
// authoring routes (issue 16): a workflow's layout, kept beside its drafts,
// and a check of an unsaved graph with the dry-run's own code, so the
// editor re-implements no graph rule.
func (s *Server) registerEditorRoutes(g *echo.Group) {
	read := requireScope(auth.ScopeWorkflowsRead)
	write := requireScope(auth.ScopeWorkflowsWrite)
	g.GET("/workflows/:key/layout", s.getLayout, read)
	g.PUT("/workflows/:key/layout", s.putLayout, write)
	g.POST("/graphs/check", s.checkGraph, read)
}

// layoutBody answers GET and PUT /v1/workflows/{key}/layout.
type layoutBody struct {
	Key       string                    `json:"key"`
	Positions map[string]store.Position `json:"positions"`
	// UpdatedBy and UpdatedAt are null for a workflow never laid out.
	UpdatedBy *string    `json:"updatedBy"`
	UpdatedAt *time.Time `json:"updatedAt"`
}

func toLayoutBody(l store.Layout) layoutBody {
	out := layoutBody{Key: l.Key, Positions: l.Positions}
	if out.Positions == nil {
		out.Positions = map[string]store.Position{}
	}
	if !l.UpdatedAt.IsZero() {
		out.UpdatedBy, out.UpdatedAt = &l.UpdatedBy, &l.UpdatedAt
	}
	return out
}

// getLayout handles GET /v1/workflows/{key}/layout.
func (s *Server) getLayout(c echo.Context) error {
	key, err := workflowPathKey(c)
	if err != nil {
		return err
	}
	l, err := s.deps.Store.GetLayout(c.Request().Context(), principal(c).Tenant, key)
	if err != nil {
		return notFoundAs(err, "workflow %q not found", key)
	}
	return c.JSON(http.StatusOK, toLayoutBody(l))
}

// putLayoutRequest is the body of PUT /v1/workflows/{key}/layout.
type putLayoutRequest struct {
	Positions map[string]store.Position `json:"positions" required:"true"`
}

// putLayout handles PUT /v1/workflows/{key}/layout {positions}: the
// layout is replaced whole. No draft revision is created and no
// expectedRevision is asked for: positions are not part of the graph.
func (s *Server) putLayout(c echo.Context) error {
	key, err := workflowPathKey(c)
	if err != nil {
		return err
	}
	var body putLayoutRequest
	if err := decodeBody(c, maxLayoutBody, &body); err != nil {
		return err
	}
	p := principal(c)
	l, err := s.deps.Store.SetLayout(c.Request().Context(), p.Tenant, store.Layout{Key: key, Positions: body.Positions, UpdatedBy: p.Sub})
	if err != nil {
		return notFoundAs(err, "workflow %q not found", key)
	}
	return c.JSON(http.StatusOK, toLayoutBody(l))
}

// checkGraphRequest is the body of POST /v1/graphs/check.
type checkGraphRequest struct {
	Graph json.RawMessage `json:"graph" required:"true"`
}

// checkGraph handles POST /v1/graphs/check {graph}: the dry-run of an
// unsaved graph, with the caller's scopes (a variable the caller may not
// read is UNKNOWN_VARIABLE, as at publication). It stores nothing. The
// editor asks it whether an edge it is about to draw fits, and which
// template variables are unknown or forbidden, before anything is saved.
func (s *Server) checkGraph(c echo.Context) error {
	p := principal(c)
	var body checkGraphRequest
	if err := decodeBody(c, maxRequestBytes, &body); err != nil {
		return err
	}
	doc, _, err := decodeGraph(formatJSON, body.Graph)
	if err != nil {
		return err
	}
	out, err := s.publication.Check(c.Request().Context(), p.Tenant, p.Scopes, doc)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
