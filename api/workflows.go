package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/catalog"
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

// requestHeadroom is what a request body may add around the graph it wraps
// (`{"key": ..., "expectedRevision": ..., "graph": ...}`), so a graph just
// under the document limit is still accepted while the body stays bounded.
const requestHeadroom = 64 << 10

// maxRequestBytes bounds every authoring request body.
var maxRequestBytes = graph.DefaultLimits.MaxDocumentBytes + requestHeadroom

// formatJSON is the syntax of every request body; graph documents may also
// arrive as YAML (formatYAML, yaml.go: SPEC §9), which only the create and
// draft routes accept (authoringBodyFormat).
const formatJSON = "json"

// graphBodyFormat picks the syntax of a JSON request body from Content-Type.
// No Content-Type means JSON; anything else is 415, so a form-encoded body
// (curl -d without -H), or YAML on a route that takes no graph, is refused
// clearly instead of misread.
func graphBodyFormat(c echo.Context) (string, error) {
	ct := c.Request().Header.Get(echo.HeaderContentType)
	if strings.TrimSpace(ct) == "" {
		return formatJSON, nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	switch {
	case err != nil:
	case mt == echo.MIMEApplicationJSON || strings.HasSuffix(mt, "+json"):
		return formatJSON, nil
	case mt == "application/yaml" || mt == "application/x-yaml" || mt == "text/yaml":
		return "", failure.New(CodeUnsupportedMediaType,
			"this route takes a JSON body; YAML is accepted for graph documents only (POST /v1/workflows?key=K, PUT /v1/workflows/{key}/draft?expectedRevision=N)")
	}
	return "", failure.New(CodeUnsupportedMediaType, "Content-Type %q is not supported; use application/json", ct)
}

// readRequestBody reads the whole request body, at most limit bytes. A
// larger body is 413 DOCUMENT_TOO_LARGE, decided here so no unbounded body is
// ever buffered (and none turns into a 500).
func readRequestBody(c echo.Context, limit int) ([]byte, error) {
	r := c.Request()
	if r.ContentLength > int64(limit) {
		return nil, bodyTooLarge(r.ContentLength, limit)
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	if err != nil {
		return nil, failure.Wrap(err, failure.CodeInvalidRequest, "the request body could not be read")
	}
	if len(data) > limit {
		return nil, bodyTooLarge(-1, limit)
	}
	return data, nil
}

func bodyTooLarge(size int64, limit int) error {
	msg := fmt.Sprintf("the request body is larger than %d bytes", limit)
	if size >= 0 {
		msg = fmt.Sprintf("the request body is %d bytes; the limit is %d", size, limit)
	}
	return failure.New(failure.CodeDocumentTooLarge, "%s (graph documents are limited to %d bytes)",
		msg, graph.DefaultLimits.MaxDocumentBytes).
		WithDetails(map[string]any{"limit": graph.DefaultLimits.MaxDocumentBytes})
}

// envelopeField is one field of a strictly decoded request object. Dst is a
// pointer; a field given as null counts as absent.
type envelopeField struct {
	Name     string
	Dst      any
	Required bool
	// Set reports whether the field was present (not null).
	Set bool
}

// decodeEnvelope decodes a JSON object body into fields: malformed JSON is
// INVALID_JSON; anything else wrong with the envelope (not an object, an
// unknown, case-folded or repeated field name, a wrong type, a missing
// required field) is INVALID_REQUEST with details.field. encoding/json alone
// would match field names case-insensitively and let a repeated key win,
// so the object is walked here. An empty body is an empty object when no
// field is required.
func decodeEnvelope(data []byte, fields ...*envelopeField) error {
	if len(bytes.TrimSpace(data)) == 0 {
		for _, f := range fields {
			if f.Required {
				return failure.New(failure.CodeInvalidRequest, "a JSON object body is required").
					WithDetails(map[string]any{"field": f.Name})
			}
		}
		return nil
	}
	if !json.Valid(data) {
		return failure.New(failure.CodeInvalidJSON, "the request body is not valid JSON: %s", jsonSyntaxProblem(data))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, _ := dec.Token(); tok != json.Delim('{') {
		return failure.New(failure.CodeInvalidRequest, "the request body must be a JSON object")
	}
	byName := make(map[string]*envelopeField, len(fields))
	for _, f := range fields {
		byName[f.Name] = f
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return failure.Wrap(err, failure.CodeInvalidJSON, "the request body is not valid JSON")
		}
		name, _ := tok.(string)
		f, ok := byName[name]
		if !ok {
			if _, wantsGraph := byName["graph"]; wantsGraph && graphField(name) {
				// The graph file itself was posted: say where it goes.
				return failure.New(failure.CodeInvalidRequest,
					"unknown field %q: this looks like a graph document; send it as {\"graph\": <the document>} with the other fields beside it", name).
					WithDetails(map[string]any{"field": name, "hint": "wrap the graph document in {\"graph\": ...}"})
			}
			return failure.New(failure.CodeInvalidRequest, "unknown field %q", name).
				WithDetails(map[string]any{"field": name})
		}
		if seen[name] {
			return failure.New(failure.CodeInvalidRequest, "field %q appears twice", name).
				WithDetails(map[string]any{"field": name})
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return failure.Wrap(err, failure.CodeInvalidJSON, "the request body is not valid JSON")
		}
		if string(raw) == "null" {
			continue
		}
		if err := decodeEnvelopeValue(raw, f.Dst); err != nil {
			return failure.New(failure.CodeInvalidRequest, "field %q %s", name, err.Error()).
				WithDetails(map[string]any{"field": name})
		}
		f.Set = true
	}
	for _, f := range fields {
		if f.Required && !f.Set {
			return failure.New(failure.CodeInvalidRequest, "field %q is required", f.Name).
				WithDetails(map[string]any{"field": f.Name})
		}
	}
	return nil
}

// decodeEnvelopeValue decodes one envelope value with exact types: integers
// must be JSON integers (not 1.0, "1" or 1e0), strings must be strings.
// graphField reports whether name is a top-level field of a graph document.
func graphField(name string) bool {
	switch name {
	case "schemaVersion", "nodes", "edges", "schemas", "toolsets", "tools":
		return true
	}
	return false
}

func decodeEnvelopeValue(raw json.RawMessage, dst any) error {
	switch d := dst.(type) {
	case *json.RawMessage:
		*d = raw
		return nil
	case *int:
		n, err := strconv.Atoi(string(raw))
		if err != nil {
			return errors.New("must be an integer")
		}
		*d = n
		return nil
	case *string:
		if raw[0] != '"' {
			return errors.New("must be a string")
		}
		return json.Unmarshal(raw, d)
	}
	return fmt.Errorf("has an unsupported type %T", dst)
}

// jsonSyntaxProblem describes where data stops being JSON.
func jsonSyntaxProblem(data []byte) string {
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	}
	if err != nil {
		return err.Error()
	}
	return "invalid JSON"
}

// decodeGraph turns a graph as it arrived into a well-formed document and the
// JSON stored as the draft. It is the one place a syntax is chosen: the
// YAML front end (SPEC §9) adds a case that converts YAML to the same JSON
// tree and then takes the JSON path, so both syntaxes accept exactly the
// same documents and drafts are always stored as JSON.
func decodeGraph(format string, raw []byte) (*graph.Document, json.RawMessage, error) {
	switch format {
	case formatJSON:
		doc, err := graph.Decode(raw)
		if err != nil {
			return nil, nil, decodeGraphFailure(err)
		}
		return doc, json.RawMessage(raw), nil
	case formatYAML:
		return decodeYAMLGraph(raw)
	}
	return nil, nil, failure.New(CodeUnsupportedMediaType, "graphs in %s are not accepted yet", format)
}

// decodeGraphFailure maps graph.DecodeError to its coded error: INVALID_JSON and
// INVALID_DOCUMENT (400), DOCUMENT_TOO_LARGE (413); the codes are the same
// strings in both packages.
func decodeGraphFailure(err error) error {
	var de *graph.DecodeError
	if !errors.As(err, &de) {
		return err
	}
	fe := failure.New(de.Code, "graph: %s", de.Message)
	details := map[string]any{}
	if de.Path != "" {
		details["path"] = "/graph" + de.Path
	}
	if de.Line > 0 { // YAML: where in the text
		fe.Message = fmt.Sprintf("graph (line %d, column %d): %s", de.Line, de.Column, de.Message)
		details["line"], details["column"] = de.Line, de.Column
	}
	if len(details) > 0 {
		fe = fe.WithDetails(details)
	}
	return fe
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

func (s *Server) resolver() *catalog.Resolver {
	if s.deps.Resolver == nil {
		return &catalog.Resolver{}
	}
	return s.deps.Resolver
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

// draftRevisionRequest reads what dry-run and publish share: the workflow
// key of the path and a JSON body {field: n} naming a draft revision. An
// absent optional field is 0 (the latest draft).
func draftRevisionRequest(c echo.Context, field string, required bool) (key string, revision int, err error) {
	if key, err = workflowPathKey(c); err != nil {
		return "", 0, err
	}
	if _, err := graphBodyFormat(c); err != nil {
		return "", 0, err
	}
	body, err := readRequestBody(c, requestHeadroom)
	if err != nil {
		return "", 0, err
	}
	f := &envelopeField{Name: field, Dst: &revision, Required: required}
	if err := decodeEnvelope(body, f); err != nil {
		return "", 0, err
	}
	if f.Set || required {
		if err := checkRevisionNumber(field, revision); err != nil {
			return "", 0, err
		}
	}
	return key, revision, nil
}

func checkRevisionNumber(name string, n int) error {
	if n < 1 {
		return failure.New(failure.CodeInvalidRequest, "field %q must be a positive integer", name).
			WithDetails(map[string]any{"field": name})
	}
	return nil
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

type revisionSummary struct {
	Revision      int       `json:"revision"`
	Checksum      string    `json:"checksum"`
	DraftRevision int       `json:"draftRevision"`
	PublishedBy   string    `json:"publishedBy"`
	PublishedAt   time.Time `json:"publishedAt"`
}

func summarizeRevision(r store.Revision) *revisionSummary {
	return &revisionSummary{Revision: r.Revision, Checksum: r.Checksum, DraftRevision: r.DraftRevision,
		PublishedBy: r.PublishedBy, PublishedAt: r.PublishedAt}
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

// dryRunResponse answers POST /v1/workflows/{key}/dry-run: the graph
// package's verdict on the draft, plus which draft it judged.
type dryRunResponse struct {
	Key           string `json:"key"`
	DraftRevision int    `json:"draftRevision"`
	graph.DryRunResult
}

// loadDraft returns the requested draft revision (0 = the latest) of key.
func (s *Server) loadDraft(c echo.Context, tenant, key string, revision int) (store.Draft, error) {
	ctx := c.Request().Context()
	if revision == 0 {
		w, err := s.deps.Store.GetWorkflow(ctx, tenant, key)
		if err != nil {
			return store.Draft{}, notFoundAs(err, "workflow %q not found", key)
		}
		revision = w.LatestDraftRevision
	}
	d, err := s.deps.Store.GetDraft(ctx, tenant, key, revision)
	if err != nil {
		return store.Draft{}, notFoundAs(err, "draft revision %d of workflow %q not found", revision, key)
	}
	return d, nil
}

// dryRunWorkflow handles POST /v1/workflows/{key}/dry-run {draftRevision?}:
// it validates a draft (the latest by default) against the tenant's
// dependency snapshot and reports everything publication would decide. It
// stores nothing and calls nothing.
func (s *Server) dryRunWorkflow(c echo.Context) error {
	p := principal(c)
	ctx := c.Request().Context()
	key, revision, err := draftRevisionRequest(c, "draftRevision", false)
	if err != nil {
		return err
	}
	d, err := s.loadDraft(c, p.Tenant, key, revision)
	if err != nil {
		return err
	}
	out := dryRunResponse{Key: key, DraftRevision: d.Revision}
	doc, issues := graph.DecodeStored(d.Document)
	if issues != nil {
		out.DryRunResult = graph.DryRunResult{Issues: issues, Warnings: []graph.Issue{}, Order: []string{}, Permissions: []string{},
			References: graph.ReferenceSet{Actions: []graph.ActionRef{}, Agents: []graph.AgentRef{}},
			Limits:     graph.DefaultLimits}
		return c.JSON(http.StatusOK, out)
	}
	if out.DryRunResult, err = s.resolver().ForScopes(p.Scopes).DryRun(ctx, p.Tenant, doc); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// publishResponse answers a publication.
type publishResponse struct {
	Key           string `json:"key"`
	Revision      int    `json:"revision"`
	Checksum      string `json:"checksum"`
	DraftRevision int    `json:"draftRevision"`
	// Warnings ask for what a published revision may still lack (a toolset
	// summary: MISSING_TOOLSET_SUMMARY); they never refuse publication.
	Warnings []graph.Issue `json:"warnings"`
}

// publishWorkflow handles POST /v1/workflows/{key}/publish
// {expectedRevision}: expectedRevision names the draft being published and
// must still be the latest (else 409 REVISION_CONFLICT). The draft is
// validated and compiled against the tenant's dependency snapshot; any
// issue refuses it with 422 INVALID_GRAPH listing every issue. Success is
// 201 {revision, checksum}. Publishing content identical to the latest
// published revision (same checksum) creates nothing and answers 200 with
// that revision, so a retried publish is harmless.
func (s *Server) publishWorkflow(c echo.Context) error {
	p := principal(c)
	ctx := c.Request().Context()
	key, expected, err := draftRevisionRequest(c, "expectedRevision", true)
	if err != nil {
		return err
	}
	// Checked here to answer a stale request before compiling; Publish
	// checks again under the row lock, which is what makes it safe.
	w, err := s.deps.Store.GetWorkflow(ctx, p.Tenant, key)
	if err != nil {
		return notFoundAs(err, "workflow %q not found", key)
	}
	if w.LatestDraftRevision != expected {
		return store.RevisionConflict(expected, w.LatestDraftRevision)
	}
	d, err := s.loadDraft(c, p.Tenant, key, expected)
	if err != nil {
		return err
	}
	doc, issues := graph.DecodeStored(d.Document)
	var compiled *graph.Compiled
	if issues == nil {
		if compiled, issues, err = s.resolver().ForScopes(p.Scopes).Compile(ctx, p.Tenant, doc); err != nil {
			return err
		}
	}
	if len(issues) > 0 || compiled == nil {
		return failure.New(failure.CodeInvalidGraph, "draft revision %d has %d issue(s); see details.issues", expected, len(issues)).
			WithDetails(map[string]any{"issues": issues, "draftRevision": expected})
	}
	plan := compiled.Plan()
	rev, created, err := s.deps.Store.Publish(ctx, p.Tenant, key, expected, compiled, &plan, p.Sub)
	if err != nil {
		return notFoundAs(err, "workflow %q not found", key)
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	} else {
		c.Response().Header().Set(echo.HeaderLocation, fmt.Sprintf("/v1/workflows/%s/revisions/%d", key, rev.Revision))
	}
	return c.JSON(status, publishResponse{Key: key, Revision: rev.Revision, Checksum: rev.Checksum, DraftRevision: rev.DraftRevision,
		Warnings: graph.ToolsetWarnings(doc)})
}

// revisionDetail answers GET /v1/workflows/{key}/revisions/{n}: the immutable
// revision with everything it pinned.
type revisionDetail struct {
	Key string `json:"key"`
	revisionSummary
	// Graph is the compiled document: nodes in compiled order, edges sorted.
	Graph                  graph.Document      `json:"graph"`
	Order                  []string            `json:"order"`
	Dependencies           pinnedDependencies  `json:"dependencies"`
	Permissions            []string            `json:"permissions"`
	NodePermissions        map[string][]string `json:"nodePermissions"`
	EstimatedHistoryEvents int                 `json:"estimatedHistoryEvents"`
	// Warnings: what the revision lacks but runs without (a toolset
	// summary, MISSING_TOOLSET_SUMMARY).
	Warnings []graph.Issue `json:"warnings"`
}

type pinnedDependencies struct {
	Actions []graph.PinnedAction  `json:"actions"`
	Agents  []graph.AgentContract `json:"agents"`
}

// getWorkflowRevision handles GET /v1/workflows/{key}/revisions/{n}: the
// revision in JSON, or its graph document alone in YAML (wantsYAML).
func (s *Server) getWorkflowRevision(c echo.Context) error {
	p := principal(c)
	ctx := c.Request().Context()
	key, err := workflowPathKey(c)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(c.Param("n"))
	if err != nil || n < 1 {
		return failure.New(failure.CodeInvalidRequest, "revision must be a positive integer").
			WithDetails(map[string]any{"field": "n"})
	}
	asYAML, err := wantsYAML(c)
	if err != nil {
		return err
	}
	rev, err := s.deps.Store.GetRevision(ctx, p.Tenant, key, n)
	if err != nil {
		return notFoundAs(err, "revision %d of workflow %q not found", n, key)
	}
	cr, err := s.deps.Store.GetCompiled(ctx, p.Tenant, rev.Checksum)
	if err != nil {
		return err // the revision row pins it by foreign key; missing is a fault
	}
	if asYAML {
		raw, err := json.Marshal(cr.Document)
		if err != nil {
			return err
		}
		return yamlGraph(c, raw, map[string]string{headerRevision: strconv.Itoa(rev.Revision),
			headerChecksum: rev.Checksum, headerDraftRevision: strconv.Itoa(rev.DraftRevision)})
	}
	return c.JSON(http.StatusOK, revisionDetail{
		Key:                    key,
		revisionSummary:        *summarizeRevision(rev),
		Graph:                  cr.Document,
		Order:                  emptyIfNil(cr.Order),
		Dependencies:           pinnedDependencies{Actions: emptyIfNil(cr.Actions), Agents: emptyIfNil(cr.Agents)},
		Permissions:            emptyIfNil(cr.Permissions),
		NodePermissions:        cr.NodePermissions,
		EstimatedHistoryEvents: cr.EstimatedHistoryEvents,
		Warnings:               graph.ToolsetWarnings(&cr.Document),
	})
}

// emptyIfNil makes an absent list encode as [] rather than null.
func emptyIfNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
