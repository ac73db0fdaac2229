package api

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
)

func (s *Server) resolver() *catalog.Resolver {
	if s.deps.Resolver == nil {
		return &catalog.Resolver{}
	}
	return s.deps.Resolver
}

// dryRunBody is the optional body of POST /v1/workflows/{key}/dry-run: the
// draft revision to judge (absent: the latest).
type dryRunBody struct {
	DraftRevision *int `json:"draftRevision"`
}

// publishBody is the body of POST /v1/workflows/{key}/publish: the draft
// revision being published.
type publishBody struct {
	ExpectedRevision *int `json:"expectedRevision" required:"true"`
}

// draftRevisionRequest reads what dry-run and publish share: the workflow
// key of the path and a JSON body (dryRunBody or publishBody) naming a draft
// revision. An absent optional revision is 0 (the latest draft).
func draftRevisionRequest(c echo.Context, publish bool) (key string, revision int, err error) {
	if key, err = workflowPathKey(c); err != nil {
		return "", 0, err
	}
	field, n := "draftRevision", (*int)(nil)
	if publish {
		var body publishBody
		err = decodeBody(c, requestHeadroom, &body)
		field, n = "expectedRevision", body.ExpectedRevision
	} else {
		var body dryRunBody
		err = decodeOptionalBody(c, requestHeadroom, &body)
		n = body.DraftRevision
	}
	if err != nil {
		return "", 0, err
	}
	if n == nil {
		return key, 0, nil
	}
	if err := checkRevisionNumber(field, *n); err != nil {
		return "", 0, err
	}
	return key, *n, nil
}

func checkRevisionNumber(name string, n int) error {
	if n < 1 {
		return failure.New(failure.CodeInvalidRequest, "field %q must be a positive integer", name).
			WithDetails(map[string]any{"field": name})
	}
	return nil
}

// dryRunResponse answers POST /v1/workflows/{key}/dry-run: the graph
// package's verdict on the draft, plus which draft it judged.
type dryRunResponse struct {
	Key           string `json:"key"`
	DraftRevision int    `json:"draftRevision"`
	graph.DryRunResult
}

// dryRunWorkflow handles POST /v1/workflows/{key}/dry-run {draftRevision?}:
// it validates a draft (the latest by default) against the tenant's
// dependency snapshot and reports everything publication would decide. It
// stores nothing and calls nothing.
func (s *Server) dryRunWorkflow(c echo.Context) error {
	p := principal(c)
	ctx := c.Request().Context()
	key, revision, err := draftRevisionRequest(c, false)
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
	key, expected, err := draftRevisionRequest(c, true)
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
