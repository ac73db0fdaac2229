package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
)

// registerWorkflowRoutes adds the /v1/workflows authoring routes: create,
// list, read, save a draft, dry-run, publish and read a revision.
func (s *Server) registerWorkflowRoutes(g *echo.Group) {
	read := requireScope(auth.ScopeWorkflowsRead)
	write := requireScope(auth.ScopeWorkflowsWrite)
	publish := requireScope(auth.ScopeWorkflowsPublish)
	g.POST("/workflows", s.createWorkflow, write)
	g.GET("/workflows", s.listWorkflows, read)
	g.GET("/workflows/:key", s.getWorkflow, read)
	g.PUT("/workflows/:key/draft", s.saveDraft, write)
	g.GET("/workflows/:key/draft", s.getDraft, read)
	g.POST("/workflows/:key/dry-run", s.dryRunWorkflow, read)
	g.POST("/workflows/:key/publish", s.publishWorkflow, publish)
	g.GET("/workflows/:key/revisions/:n", s.getWorkflowRevision, read)
}

// keyPattern is the syntax of workflow and agent keys: short, lowercase,
// URL- and search-attribute-safe.
var keyPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// checkKey refuses a malformed key of a kind ("workflow", "agent") before
// any lookup.
func checkKey(kind, key string) error {
	if !keyPattern.MatchString(key) {
		return failure.New(failure.CodeInvalidKey,
			"%s key must match %s (lowercase letter first, then lowercase letters, digits or '-', at most 63)",
			kind, keyPattern).WithDetails(map[string]any{"key": key})
	}
	return nil
}

// checkWorkflowKey refuses a malformed workflow key.
func checkWorkflowKey(key string) error { return checkKey("workflow", key) }

// workflowPathKey returns the validated {key} path parameter.
func workflowPathKey(c echo.Context) (string, error) {
	key := c.Param("key")
	return key, checkWorkflowKey(key)
}

// notFoundAs turns a store error into what the client sees: a missing row
// (including another tenant's) is NOT_FOUND naming what was asked for; coded
// errors (ALREADY_EXISTS, REVISION_CONFLICT, INVALID_DOCUMENT) pass through;
// anything else stays an internal error.
func notFoundAs(err error, format string, args ...any) error {
	if errors.Is(err, failure.ErrNotFound) {
		return failure.Wrap(err, failure.CodeNotFound, format, args...)
	}
	return err
}

// createWorkflowRequest is the body of POST /v1/workflows.
type createWorkflowRequest struct {
	Key   string
	Graph json.RawMessage
}

// draftResponse answers a create or a draft save.
type draftResponse struct {
	Key           string `json:"key"`
	DraftRevision int    `json:"draftRevision"`
}

// createWorkflow handles POST /v1/workflows {key, graph}: the workflow and
// its draft revision 1 are created together.
func (s *Server) createWorkflow(c echo.Context) error {
	p := principal(c)
	format, err := authoringBodyFormat(c)
	if err != nil {
		return err
	}
	body, err := readRequestBody(c, maxRequestBytes)
	if err != nil {
		return err
	}
	req, err := createRequest(c, format, body)
	if err != nil {
		return err
	}
	if err := checkWorkflowKey(req.Key); err != nil {
		return err
	}
	doc, stored, err := decodeGraph(format, req.Graph)
	if err != nil {
		return err
	}
	if err := s.refuseUnusableToolsets(c.Request().Context(), p.Tenant, doc, nil, stored); err != nil {
		return err
	}
	w, err := s.deps.Store.CreateWorkflow(c.Request().Context(), p.Tenant, req.Key, stored, p.Sub)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/workflows/"+w.Key)
	return c.JSON(http.StatusCreated, draftResponse{Key: w.Key, DraftRevision: w.LatestDraftRevision})
}

// saveDraft handles PUT /v1/workflows/{key}/draft {expectedRevision, graph}:
// the next draft revision, or 409 REVISION_CONFLICT when expectedRevision
// is not the latest (nothing is overwritten).
func (s *Server) saveDraft(c echo.Context) error {
	p := principal(c)
	key, err := workflowPathKey(c)
	if err != nil {
		return err
	}
	format, err := authoringBodyFormat(c)
	if err != nil {
		return err
	}
	body, err := readRequestBody(c, maxRequestBytes)
	if err != nil {
		return err
	}
	expected, raw, err := draftRequest(c, format, body)
	if err != nil {
		return err
	}
	if err := checkRevisionNumber("expectedRevision", expected); err != nil {
		return err
	}
	doc, stored, err := decodeGraph(format, raw)
	if err != nil {
		return err
	}
	previous, err := s.latestDraftDocument(c, p.Tenant, key)
	if err != nil {
		return err
	}
	if err := s.refuseUnusableToolsets(c.Request().Context(), p.Tenant, doc, previous, stored); err != nil {
		return err
	}
	rev, err := s.deps.Store.SaveDraft(c.Request().Context(), p.Tenant, key, expected, stored, p.Sub)
	if err != nil {
		return notFoundAs(err, "workflow %q not found", key)
	}
	return c.JSON(http.StatusOK, draftResponse{Key: key, DraftRevision: rev})
}

// latestDraftDocument returns the decoded latest draft of key (nil when it
// no longer decodes, which only toolset summary checks consult); a missing
// workflow is NOT_FOUND before anything else is checked.
func (s *Server) latestDraftDocument(c echo.Context, tenant, key string) (*graph.Document, error) {
	d, err := s.loadDraft(c, tenant, key, 0)
	if err != nil {
		return nil, err
	}
	doc, issues := graph.DecodeStored(d.Document)
	if issues != nil {
		return nil, nil
	}
	return doc, nil
}

// workflowSummary is one workflow in a list and the head of GET /v1/workflows/{key}.
type workflowSummary struct {
	Key           string    `json:"key"`
	CreatedBy     string    `json:"createdBy"`
	CreatedAt     time.Time `json:"createdAt"`
	UpdatedAt     time.Time `json:"updatedAt"`
	DraftRevision int       `json:"draftRevision"`
	// PublishedRevision and Checksum are null until the first publication.
	PublishedRevision *int    `json:"publishedRevision"`
	Checksum          *string `json:"checksum"`
}

func summarizeWorkflow(w store.Workflow) workflowSummary {
	out := workflowSummary{Key: w.Key, CreatedBy: w.CreatedBy, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt,
		DraftRevision: w.LatestDraftRevision}
	if w.LatestPublishedRevision > 0 {
		out.PublishedRevision = &w.LatestPublishedRevision
		out.Checksum = &w.LatestChecksum
	}
	return out
}

// Workflow list paging.
const (
	defaultWorkflowPage = 50
	maxWorkflowPage     = 200
)

// listWorkflows handles GET /v1/workflows?cursor=&limit=: the tenant's
// workflows in key order.
func (s *Server) listWorkflows(c echo.Context) error {
	p := principal(c)
	limit := defaultWorkflowPage
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxWorkflowPage {
			return failure.New(failure.CodeInvalidRequest, "limit must be an integer from 1 to %d", maxWorkflowPage).
				WithDetails(map[string]any{"field": "limit"})
		}
		limit = n
	}
	after := ""
	if v := c.QueryParam("cursor"); v != "" {
		k, err := s.openCursor(workflowCursorScope(p.Tenant), v)
		if err != nil {
			return err
		}
		after = string(k)
	}
	items, next, err := s.deps.Store.ListWorkflows(c.Request().Context(), p.Tenant, after, limit)
	if err != nil {
		return err
	}
	out := make([]workflowSummary, 0, len(items))
	for _, w := range items {
		out = append(out, summarizeWorkflow(w))
	}
	cursor := ""
	if next != "" {
		cursor = s.sealCursor(workflowCursorScope(p.Tenant), []byte(next))
	}
	return list(c, "workflows", out, cursor)
}

// workflowCursorScope binds a workflow list cursor to the tenant (SPEC §5:
// a foreign cursor is refused, 400 CURSOR_INVALID), so a cursor never lets
// one tenant page through another's keys.
func workflowCursorScope(tenant string) string { return cursorScope("workflows", tenant) }

// workflowDetail answers GET /v1/workflows/{key}.
type workflowDetail struct {
	workflowSummary
	Draft     draftDetail      `json:"draft"`
	Published *revisionSummary `json:"published"`
	// Limits are the workflow's caps and default budget, and what its runs
	// hold of them (GET /v1/workflows/{key}/limits).
	Limits workflowLimitsBody `json:"limits"`
}

type draftDetail struct {
	Revision int             `json:"revision"`
	SavedBy  string          `json:"savedBy"`
	SavedAt  time.Time       `json:"savedAt"`
	Graph    json.RawMessage `json:"graph"`
}

// getWorkflow handles GET /v1/workflows/{key}: the latest draft with its
// graph and the latest published revision.
func (s *Server) getWorkflow(c echo.Context) error {
	p := principal(c)
	ctx := c.Request().Context()
	key, err := workflowPathKey(c)
	if err != nil {
		return err
	}
	w, err := s.deps.Store.GetWorkflow(ctx, p.Tenant, key)
	if err != nil {
		return notFoundAs(err, "workflow %q not found", key)
	}
	d, err := s.deps.Store.GetDraft(ctx, p.Tenant, key, w.LatestDraftRevision)
	if err != nil {
		return err // the row was just read; a missing draft is a fault
	}
	out := workflowDetail{workflowSummary: summarizeWorkflow(w),
		Draft: draftDetail{Revision: d.Revision, SavedBy: d.SavedBy, SavedAt: d.SavedAt, Graph: d.Document}}
	if w.LatestPublishedRevision > 0 {
		r, err := s.deps.Store.GetRevision(ctx, p.Tenant, key, w.LatestPublishedRevision)
		if err != nil {
			return err
		}
		out.Published = summarizeRevision(r)
	}
	if out.Limits, err = s.workflowLimits(c, p.Tenant, key); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// loadDraft returns the requested draft revision (0 = the latest) of key.
func (s *Server) loadDraft(c echo.Context, tenant, key string, revision int) (store.Draft, error) {
	return s.publication.Draft(c.Request().Context(), tenant, key, revision)
}
