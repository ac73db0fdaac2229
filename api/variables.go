package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
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
	body, err := readResolveBody(c)
	if err != nil {
		return err
	}
	var template string
	var rawBindings, rawValues json.RawMessage
	if err := decodeEnvelope(body,
		&envelopeField{Name: "template", Dst: &template, Required: true},
		&envelopeField{Name: "bindings", Dst: &rawBindings},
		&envelopeField{Name: "values", Dst: &rawValues},
	); err != nil {
		return err
	}
	if n, limit := utf8.RuneCountInString(template), graph.DefaultLimits.MaxTemplateChars; n > limit {
		return failure.New(graph.CodeLimitExceeded, "template has %d characters; the limit is %d", n, limit).
			WithDetails(map[string]any{"field": "template", "limit": limit})
	}
	bindings, err := decodeVariableMap("bindings", rawBindings, bindingString)
	if err != nil {
		return err
	}
	values, err := decodeVariableMap("values", rawValues, valueString)
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

// readResolveBody checks the Content-Type (JSON, or none) and reads the body,
// at most maxResolveBodyBytes.
func readResolveBody(c echo.Context) ([]byte, error) {
	r := c.Request()
	if err := requireJSONContentType(c); err != nil {
		return nil, err
	}
	tooLarge := failure.New(failure.CodeDocumentTooLarge, "the request body is larger than %d bytes", maxResolveBodyBytes).
		WithDetails(map[string]any{"limit": maxResolveBodyBytes})
	if r.ContentLength > maxResolveBodyBytes {
		return nil, tooLarge
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxResolveBodyBytes+1))
	if err != nil {
		return nil, failure.Wrap(err, failure.CodeInvalidRequest, "the request body could not be read")
	}
	if len(data) > maxResolveBodyBytes {
		return nil, tooLarge
	}
	return data, nil
}

// bindingString returns a binding's value: record bindings are strings.
func bindingString(raw json.RawMessage) (string, error) {
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", errors.New("must be a string")
	}
	return s, nil
}

// valueString renders a value as a template renders a bound value: a string
// as it is, anything else as canonical JSON.
func valueString(raw json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
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

// decodeVariableMap decodes an optional JSON object whose names are variable
// keys (or binding names, which share the syntax) into strings using conv.
// Anything else, including a repeated name (encoding/json would let the last
// one win), is INVALID_REQUEST with details.field naming the member.
func decodeVariableMap(field string, raw json.RawMessage, conv func(json.RawMessage) (string, error)) (map[string]string, error) {
	out := map[string]string{}
	if len(raw) == 0 {
		return out, nil
	}
	bad := func(f, format string, args ...any) error {
		return failure.New(failure.CodeInvalidRequest, "%s "+format, append([]any{f}, args...)...).
			WithDetails(map[string]any{"field": f})
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, bad(field, "must be a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad(field, "is not valid JSON")
		}
		name, _ := tok.(string)
		bad := func(format string, args ...any) error { return bad(field+"."+name, format, args...) }
		var member json.RawMessage
		if err := dec.Decode(&member); err != nil {
			return nil, bad("is not valid JSON")
		}
		if !variables.IsKey(name) {
			return nil, bad("is not a variable key (%s)", variables.KeyPattern)
		}
		if _, dup := out[name]; dup {
			return nil, bad("appears twice")
		}
		s, err := conv(member)
		if err != nil {
			return nil, bad("%s", err.Error())
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
