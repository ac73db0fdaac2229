package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
)

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
