package api

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/publication"
)

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
	key, revision, err := draftRevisionRequest(c, "draftRevision", false)
	if err != nil {
		return err
	}
	res, err := s.publication.DryRun(c.Request().Context(), p.Tenant, p.Scopes, key, revision)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, dryRunResponse{Key: key, DraftRevision: res.DraftRevision, DryRunResult: res.Result})
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
	key, expected, err := draftRevisionRequest(c, "expectedRevision", true)
	if err != nil {
		return err
	}
	pub, err := s.publication.Publish(c.Request().Context(), publication.Request{
		Tenant: p.Tenant, Scopes: p.Scopes, By: p.Sub, Key: key, ExpectedRevision: expected})
	if err != nil {
		return err
	}
	rev := pub.Revision
	status := http.StatusCreated
	if !pub.Created {
		status = http.StatusOK
	} else {
		c.Response().Header().Set(echo.HeaderLocation, fmt.Sprintf("/v1/workflows/%s/revisions/%d", key, rev.Revision))
	}
	return c.JSON(status, publishResponse{Key: key, Revision: rev.Revision, Checksum: rev.Checksum, DraftRevision: rev.DraftRevision,
		Warnings: pub.Warnings})
}
