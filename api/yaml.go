package api

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/graphyaml"
)

// YAML graph documents (SPEC §9). The create and draft routes take the graph
// itself as the body when it is YAML, with what the JSON envelope would
// carry in the query:
//
//	POST /v1/workflows?key=K                          Content-Type: application/yaml
//	PUT  /v1/workflows/{key}/draft?expectedRevision=N Content-Type: application/yaml
//
// The YAML is converted to the same JSON tree and decoded by the same strict
// decoder (graphyaml.ParseYAML), and the draft is stored as that JSON, so both
// syntaxes accept exactly the same documents. Toolsets must already be in
// the document (the CLI captures folders into its toolsets map); the server
// never reads a path.

// formatYAML is a graph document in YAML.
const formatYAML = "yaml"

// yamlMediaTypes are the Content-Types read as YAML.
var yamlMediaTypes = map[string]bool{"application/yaml": true, "application/x-yaml": true, "text/yaml": true, "text/x-yaml": true}

// authoringBodyFormat is requireJSON for the routes whose body is (or
// wraps) a graph document: YAML is accepted there.
func authoringBodyFormat(c echo.Context) (string, error) {
	ct := c.Request().Header.Get(echo.HeaderContentType)
	if mt, _, err := mime.ParseMediaType(ct); err == nil && (yamlMediaTypes[mt] || strings.HasSuffix(mt, "+yaml")) {
		return formatYAML, nil
	}
	return formatJSON, requireJSON(c)
}

// createRequest reads the key and the graph of a create: from the JSON
// envelope {key, graph}, or from ?key= and a YAML body.
func createRequest(c echo.Context, format string, body []byte) (createWorkflowRequest, error) {
	var req createWorkflowRequest
	query := c.QueryParams()
	if format == formatYAML {
		if err := onlyQuery(query, "key"); err != nil {
			return req, err
		}
		if !query.Has("key") {
			return req, failure.New(failure.CodeInvalidRequest, "a YAML graph names its workflow in the query: POST /v1/workflows?key=K").
				WithDetails(map[string]any{"field": "key"})
		}
		return createWorkflowRequest{Key: query.Get("key"), Graph: body}, nil
	}
	if err := noQuery(query, "key"); err != nil {
		return req, err
	}
	return req, decodeRequest(body, &req, false)
}

// draftRequest reads expectedRevision and the graph of a draft save: from
// the JSON envelope {expectedRevision, graph}, or from ?expectedRevision=
// and a YAML body.
func draftRequest(c echo.Context, format string, body []byte) (int, json.RawMessage, error) {
	query := c.QueryParams()
	if format == formatYAML {
		if err := onlyQuery(query, "expectedRevision"); err != nil {
			return 0, nil, err
		}
		v := query.Get("expectedRevision")
		n, err := strconv.Atoi(v)
		if err != nil || strconv.Itoa(n) != v {
			return 0, nil, failure.New(failure.CodeInvalidRequest,
				"a YAML draft names the draft revision it replaces in the query: PUT /v1/workflows/{key}/draft?expectedRevision=N").
				WithDetails(map[string]any{"field": "expectedRevision"})
		}
		return n, body, nil
	}
	if err := noQuery(query, "expectedRevision"); err != nil {
		return 0, nil, err
	}
	var env struct {
		ExpectedRevision int             `json:"expectedRevision" required:"true"`
		Graph            json.RawMessage `json:"graph" required:"true"`
	}
	if err := decodeRequest(body, &env, false); err != nil {
		return 0, nil, err
	}
	return env.ExpectedRevision, env.Graph, nil
}

// onlyQuery refuses query parameters other than allowed, and any given
// twice: a YAML body's key or revision is never ambiguous.
func onlyQuery(query map[string][]string, allowed ...string) error {
	for name, values := range query {
		if !slices.Contains(allowed, name) {
			return failure.New(failure.CodeInvalidRequest, "unexpected query parameter %q", name).
				WithDetails(map[string]any{"field": name})
		}
		if len(values) > 1 {
			return failure.New(failure.CodeInvalidRequest, "query parameter %q appears twice", name).
				WithDetails(map[string]any{"field": name})
		}
	}
	return nil
}

// noQuery refuses a query parameter that a JSON envelope carries in its
// body, so the two never disagree.
func noQuery(query map[string][]string, name string) error {
	if _, ok := query[name]; ok {
		return failure.New(failure.CodeInvalidRequest, "query parameter %q is for YAML bodies; a JSON body carries %s itself", name, name).
			WithDetails(map[string]any{"field": name})
	}
	return nil
}

// decodeYAMLGraph decodes a YAML graph; decode errors carry the line and
// column (decodeGraphFailure puts them in details).
func decodeYAMLGraph(raw []byte) (*graph.Document, json.RawMessage, error) {
	y, err := graphyaml.ParseYAML(raw)
	if err != nil {
		return nil, nil, decodeGraphFailure(err)
	}
	return y.Document, y.JSON, nil
}

// refuseUnusableToolsets refuses, when a draft is saved, a document whose
// toolsets cannot be offered (publication.Service.CheckToolsets: 422 with
// every issue in details.issues); previous is the draft being replaced (nil
// on creation).
func (s *Server) refuseUnusableToolsets(ctx context.Context, tenant string, doc, previous *graph.Document, stored json.RawMessage) error {
	return s.publication.CheckToolsets(ctx, tenant, doc, previous, stored)
}

// YAML export (SPEC §9). The routes that serve a graph document answer it
// as YAML when asked, by ?format=yaml or by an Accept header that prefers a
// YAML media type:
//
//	GET /v1/workflows/{key}/draft[?revision=N]  the latest draft, or draft N
//	GET /v1/workflows/{key}/revisions/{n}       a published revision's graph
//
// The body is the graph document alone (graphyaml.EncodeYAML), which reads back
// to the same document and so to the same checksum; what the JSON answer
// carries around the graph is in headers: Weft-Draft-Revision for a draft;
// Weft-Revision, Weft-Checksum and Weft-Draft-Revision (the draft it was
// published from) for a revision.

// Headers of a YAML graph document.
const (
	headerDraftRevision = "Weft-Draft-Revision"
	headerRevision      = "Weft-Revision"
	headerChecksum      = "Weft-Checksum"
)

// contentYAML is the Content-Type of a YAML graph document.
const contentYAML = "application/yaml; charset=utf-8"

// wantsYAML reports whether the client asked for YAML: ?format=yaml (or
// json), else the Accept header, whose YAML type must be preferred (higher
// q, or listed first at the same q) to application/json and */*.
func wantsYAML(c echo.Context) (bool, error) {
	if values, ok := c.QueryParams()["format"]; ok {
		switch {
		case len(values) == 1 && values[0] == formatYAML:
			return true, nil
		case len(values) == 1 && values[0] == formatJSON:
			return false, nil
		}
		return false, failure.New(failure.CodeInvalidRequest, "format must be yaml or json").
			WithDetails(map[string]any{"field": "format"})
	}
	best, bestQ := "", 0.0
	for _, part := range strings.Split(c.Request().Header.Get(echo.HeaderAccept), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if q, err = strconv.ParseFloat(v, 64); err != nil {
				continue
			}
		}
		if q > bestQ {
			best, bestQ = mt, q
		}
	}
	return yamlMediaTypes[best] || strings.HasSuffix(best, "+yaml"), nil
}

// yamlGraph answers a graph document as YAML with its headers.
func yamlGraph(c echo.Context, raw json.RawMessage, headers map[string]string) error {
	out, err := graphyaml.EncodeYAML(raw)
	if err != nil {
		return fmt.Errorf("yaml export: %w", err) // stored documents always encode: a fault
	}
	for k, v := range headers {
		c.Response().Header().Set(k, v)
	}
	return c.Blob(http.StatusOK, contentYAML, out)
}

// draftGraph answers GET /v1/workflows/{key}/draft.
type draftGraph struct {
	Key string `json:"key"`
	draftDetail
}

// getDraft handles GET /v1/workflows/{key}/draft[?revision=N]: the latest
// draft (or draft N) with its graph as stored, in JSON or YAML.
func (s *Server) getDraft(c echo.Context) error {
	p := principal(c)
	key, err := workflowPathKey(c)
	if err != nil {
		return err
	}
	if err := onlyQuery(c.QueryParams(), "revision", "format"); err != nil {
		return err
	}
	revision := 0
	if v := c.QueryParam("revision"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || strconv.Itoa(n) != v {
			return failure.New(failure.CodeInvalidRequest, "revision must be a positive integer").
				WithDetails(map[string]any{"field": "revision"})
		}
		revision = n
	}
	asYAML, err := wantsYAML(c)
	if err != nil {
		return err
	}
	d, err := s.loadDraft(c, p.Tenant, key, revision)
	if err != nil {
		return err
	}
	if asYAML {
		return yamlGraph(c, d.Document, map[string]string{headerDraftRevision: strconv.Itoa(d.Revision)})
	}
	return c.JSON(http.StatusOK, draftGraph{Key: key,
		draftDetail: draftDetail{Revision: d.Revision, SavedBy: d.SavedBy, SavedAt: d.SavedAt, Graph: d.Document}})
}
