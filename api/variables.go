package api

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/variables"
)

// Limits of POST /v1/variables/resolve.
const (
	// maxResolveBodyBytes bounds the request body (413 DOCUMENT_TOO_LARGE).
	maxResolveBodyBytes = 256 << 10
	// maxResolvedBytes bounds the rendered text (422 LIMIT_EXCEEDED), so a
	// short template repeating a long value cannot amplify into a huge reply.
	maxResolvedBytes = 1 << 20
	// resolveTimeout bounds the sources' work; when it ends resolution is
	// refused with CANCELLED (503).
	resolveTimeout = 10 * time.Second
)

// registerVariableRoutes adds the variable routes (SPEC §6, §10): the
// definitions a caller may use and server-side resolution of a template.
func (s *Server) registerVariableRoutes(g *echo.Group) {
	read := requireScope(auth.ScopeVariablesRead)
	g.GET("/variables", s.listVariables, read)
	g.POST("/variables/resolve", s.resolveVariables, read)
}

func (s *Server) variables() *variables.Registry { return s.deps.Variables }

// listVariables handles GET /v1/variables: the definitions the caller's
// scopes allow (scope-less ones and those whose scope the token carries),
// sorted by key, in one page. The list is never paged, so any cursor is
// invalid.
func (s *Server) listVariables(c echo.Context) error {
	if c.QueryParam("cursor") != "" {
		return failure.New(failure.CodeCursorInvalid, "the variables list has a single page; cursor is not valid here")
	}
	return list(c, "variables", s.variables().List(principal(c).Scopes), "")
}

// resolveBody is the body of POST /v1/variables/resolve. Bindings are
// record bindings (strings); values are any JSON. Their names are checked
// by variableMap.
type resolveBody struct {
	Template string                     `json:"template" required:"true"`
	Bindings map[string]string          `json:"bindings"`
	Values   map[string]json.RawMessage `json:"values"`
}

// resolveResponse answers a resolution.
type resolveResponse struct {
	Text string `json:"text"`
}

// resolveVariables handles POST /v1/variables/resolve {template, bindings,
// values}. The body is decoded strictly: unknown, repeated or case-folded
// fields, wrong types, a bindings or values name that is not a variable key,
// or a non-string binding are 400 INVALID_REQUEST (malformed JSON 400
// INVALID_JSON, a body over 256 KiB 413 DOCUMENT_TOO_LARGE). A template over
// 8,000 characters, or a rendering over 1 MiB, is 422 LIMIT_EXCEEDED, like
// graph validation reports an over-long template. Bindings are record
// bindings (e.g. "agentId": "support-bot"); values supply keys directly and
// win over the registry, strings as they are and anything else as canonical
// JSON (as graph template bindings render). Tenant, actor, permissions and
// today (the current UTC date) come from the verified token, never from the
// body; there is no run, so run.id and workflow.key are RECORD_NOT_FOUND.
// Success is 200 {text}; a refusal keeps its code (see statusByCode).
func (s *Server) resolveVariables(c echo.Context) error {
	p := principal(c)
	var body resolveBody
	if err := decodeBody(c, maxResolveBodyBytes, &body); err != nil {
		return err
	}
	template := body.Template
	if n, limit := utf8.RuneCountInString(template), graph.DefaultLimits.MaxTemplateChars; n > limit {
		return failure.New(graph.CodeLimitExceeded, "template has %d characters; the limit is %d", n, limit).
			WithDetails(map[string]any{"field": "template", "limit": limit})
	}
	bindings, err := variableMap("bindings", body.Bindings, func(s string) (string, error) { return s, nil })
	if err != nil {
		return err
	}
	values, err := variableMap("values", body.Values, valueString)
	if err != nil {
		return err
	}
	if err := checkRenderedSize(template, values); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(c.Request().Context(), resolveTimeout)
	defer cancel()
	text, err := s.variables().Resolve(ctx, template, variables.Request{
		TenantID:    p.Tenant,
		TenantName:  p.TenantName,
		Actor:       variables.Actor{Sub: p.Sub, Name: p.Name, Email: p.Email},
		Permissions: p.Scopes,
		Today:       time.Now().UTC(),
		Bindings:    bindings,
		Values:      values,
	})
	if err != nil {
		var ref *variables.Refusal
		if errors.As(err, &ref) {
			// As a *failure.Error the refusal keeps its code and client-safe
			// message, and the source's error (Err) reaches the log only.
			return ref.AsFailure()
		}
		return err
	}
	if len(text) > maxResolvedBytes {
		return renderedTooLarge()
	}
	return c.JSON(http.StatusOK, resolveResponse{Text: text})
}

// valueString renders a value as a template renders a bound value: a string
// as it is, anything else as canonical JSON.
func valueString(raw json.RawMessage) (string, error) {
	v, err := graph.DecodeValue(raw)
	if err != nil {
		return "", errors.New("is not valid JSON")
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	out, err := graph.Canonical(v)
	if err != nil {
		return "", errors.New("cannot be rendered as canonical JSON")
	}
	return string(out), nil
}

// variableMap checks that every name of m (bindings or values, as decoded
// by the request layer) is a variable key or binding name (they share the
// syntax), in name order, and returns m's values rendered by conv; a bad
// name or value is INVALID_REQUEST with details.field naming the member.
func variableMap[V any](field string, m map[string]V, conv func(V) (string, error)) (map[string]string, error) {
	out := make(map[string]string, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		f := field + "." + name
		if !variables.IsKey(name) {
			return nil, failure.New(failure.CodeInvalidRequest, "%s is not a variable key (%s)", f, variables.KeyPattern).
				WithDetails(map[string]any{"field": f})
		}
		s, err := conv(m[name])
		if err != nil {
			return nil, failure.New(failure.CodeInvalidRequest, "%s %s", f, err.Error()).
				WithDetails(map[string]any{"field": f})
		}
		out[name] = s
	}
	return out, nil
}

// checkRenderedSize refuses, before any source runs, a template whose
// rendering with values would exceed maxResolvedBytes. Registry tokens are
// counted at their source length; the rendered text is checked again after.
func checkRenderedSize(template string, values map[string]string) error {
	n := 0
	for _, seg := range variables.Tokenize(template) {
		v, ok := values[seg.Key]
		if seg.Kind == variables.SegmentToken && ok {
			n += len(v)
		} else {
			n += len(seg.Text)
		}
		if n > maxResolvedBytes {
			return renderedTooLarge()
		}
	}
	return nil
}

func renderedTooLarge() error {
	return failure.New(graph.CodeLimitExceeded, "the resolved text would be larger than %d bytes", maxResolvedBytes).
		WithDetails(map[string]any{"field": "text", "limit": maxResolvedBytes})
}
