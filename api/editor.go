package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/jsonstrict"
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
	if err := decodeStrictBody(c, maxLayoutBody, &body); err != nil {
		return err
	}
	p := principal(c)
	l, err := s.deps.Store.SetLayout(c.Request().Context(), p.Tenant, store.Layout{Key: key, Positions: body.Positions, UpdatedBy: p.Sub})
	if err != nil {
		return notFoundAs(err, "workflow %q not found", key)
	}
	return c.JSON(http.StatusOK, toLayoutBody(l))
}

// decodeStrictBody reads a JSON body of at most limit bytes into v with
// jsonstrict: malformed JSON is INVALID_JSON; an unknown, repeated or
// case-folded member, a wrong type or a missing required member is
// INVALID_REQUEST with details.field naming the outermost member.
func decodeStrictBody(c echo.Context, limit int, v any) error {
	if err := requireJSONContentType(c); err != nil {
		return err
	}
	data, err := readRequestBody(c, limit)
	if err != nil {
		return err
	}
	if err := jsonstrict.Decode(data, v, jsonstrict.Options{}); err != nil {
		var se *jsonstrict.Error
		if !errors.As(err, &se) {
			return err
		}
		if se.Syntax {
			return failure.New(failure.CodeInvalidJSON, "the request body is not valid JSON: %s", se.Message)
		}
		fe := failure.New(failure.CodeInvalidRequest, "the request body does not match the expected shape: %s", se.Error())
		if f := se.Field(); f != "" {
			fe = fe.WithDetails(map[string]any{"field": f})
		}
		return fe
	}
	return nil
}

// checkGraph handles POST /v1/graphs/check {graph}: the dry-run of an
// unsaved graph, with the caller's scopes (a variable the caller may not
// read is UNKNOWN_VARIABLE, as at publication). It stores nothing. The
// editor asks it whether an edge it is about to draw fits, and which
// template variables are unknown or forbidden, before anything is saved.
func (s *Server) checkGraph(c echo.Context) error {
	p := principal(c)
	if _, err := graphBodyFormat(c); err != nil {
		return err
	}
	body, err := readRequestBody(c, maxRequestBytes)
	if err != nil {
		return err
	}
	var raw json.RawMessage
	f := &envelopeField{Name: "graph", Dst: &raw, Required: true}
	if err := decodeEnvelope(body, f); err != nil {
		return err
	}
	doc, _, err := decodeGraph(formatJSON, raw)
	if err != nil {
		return err
	}
	out, err := s.publication.Check(c.Request().Context(), p.Tenant, p.Scopes, doc)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
