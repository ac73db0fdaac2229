package api

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
)

// YAML graph documents (SPEC §9). The create and draft routes take the graph
// itself as the body when it is YAML, with what the JSON envelope would
// carry in the query:
//
//	POST /v1/workflows?key=K                          Content-Type: application/yaml
//	PUT  /v1/workflows/{key}/draft?expectedRevision=N Content-Type: application/yaml
//
// The YAML is converted to the same JSON tree and decoded by the same strict
// decoder (graph.ParseYAML), and the draft is stored as that JSON, so both
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
	y, err := graph.ParseYAML(raw)
	if err != nil {
		return nil, nil, decodeGraphFailure(err)
	}
	return y.Document, y.JSON, nil
}

// refuseUnusableToolsets refuses, when a draft is saved, a document whose
// toolsets cannot be offered (SPEC §9): a tools value that is empty or
// names no toolset in the document (an uncaptured client path: the server
// never reads one), a blank skill, a malformed entry, or an action the
// tenant's catalog does not hold or publication would refuse; a summary
// that is not one line of at most 600 characters (INVALID_TOOLSET_SUMMARY);
// and a new toolset without a summary (MISSING_TOOLSET_SUMMARY): previous
// is the draft being replaced (nil on creation), whose toolsets without a
// summary may stay as they are. Other graph issues may stay in a draft;
// toolsets are captured folder content and a bad one fails the push rather
// than being silently dropped. 422 with every issue in details.issues; the
// code is INVALID_TOOLSET_SUMMARY or MISSING_TOOLSET_SUMMARY when that is
// every issue's code, else INVALID_TOOLS_PATH.
func (s *Server) refuseUnusableToolsets(ctx context.Context, tenant string, doc, previous *graph.Document, stored json.RawMessage) error {
	issues := graph.EmptyToolsIssues(stored)
	if doc != nil {
		r := s.resolver()
		cat, err := r.Catalog(ctx, tenant, doc)
		if err != nil {
			return err
		}
		issues = append(issues, graph.ToolsetIssues(doc, cat)...)
		issues = append(issues, graph.RequireToolsetSummaries(doc, previous)...)
	}
	if len(issues) == 0 {
		return nil
	}
	code := graph.CodeInvalidToolsPath
	if c := issues[0].Code; c == graph.CodeInvalidToolsetSummary || c == graph.CodeMissingToolsetSummary {
		code = c
		for _, is := range issues {
			if is.Code != c {
				code = graph.CodeInvalidToolsPath
			}
		}
	}
	msg := fmt.Sprintf("the document's toolsets cannot be used (%d issue(s); see details.issues): a tools value must name a toolset in the document, whose tools are actions in the catalog", len(issues))
	switch code {
	case graph.CodeInvalidToolsetSummary:
		msg = fmt.Sprintf("%d toolset summary(ies) are not one line of at most %d characters; see details.issues", len(issues), graph.DefaultLimits.MaxToolsetSummaryChars)
	case graph.CodeMissingToolsetSummary:
		msg = fmt.Sprintf("%d new toolset(s) have no summary: give each a one-line summary (at most %d characters); see details.issues", len(issues), graph.DefaultLimits.MaxToolsetSummaryChars)
	}
	return failure.New(code, "%s", msg).WithDetails(map[string]any{"issues": issues})
}
