package api

// The request layer: every JSON request body goes through requireJSON (the
// Content-Type), readBody (the one size policy) and decodeRequest (the one
// strict decoder, package jsonstrict); decodeBody does all three.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/jsonstrict"
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

// requireJSON refuses a body whose Content-Type is not JSON with 415. No
// Content-Type means JSON; anything else is refused, so a form-encoded body
// (curl -d without -H), or YAML on a route that takes no graph, is refused
// clearly instead of misread.
func requireJSON(c echo.Context) error {
	ct := c.Request().Header.Get(echo.HeaderContentType)
	if strings.TrimSpace(ct) == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	switch {
	case err != nil:
	case mt == echo.MIMEApplicationJSON || strings.HasSuffix(mt, "+json"):
		return nil
	case yamlMediaTypes[mt] || strings.HasSuffix(mt, "+yaml"):
		return failure.New(CodeUnsupportedMediaType,
			"this route takes a JSON body; YAML is accepted for graph documents only (POST /v1/workflows?key=K, PUT /v1/workflows/{key}/draft?expectedRevision=N)")
	}
	return failure.New(CodeUnsupportedMediaType, "Content-Type %q is not supported; use application/json", ct)
}

// readBody reads the whole request body, at most limit bytes: the one size
// policy. A body that says it is larger is refused before a byte is read,
// and one that turns out larger (chunked, or a Content-Length that lied)
// as soon as it passes the limit, so no unbounded body is ever buffered.
// Both are 413 DOCUMENT_TOO_LARGE with details.limit.
func readBody(c echo.Context, limit int) ([]byte, error) {
	r := c.Request()
	if r.ContentLength > int64(limit) {
		return nil, bodyTooLarge(r.ContentLength, limit)
	}
	data, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, int64(limit)))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, bodyTooLarge(-1, limit)
	}
	if err != nil {
		return nil, failure.Wrap(err, failure.CodeInvalidRequest, "the request body could not be read")
	}
	return data, nil
}

func bodyTooLarge(size int64, limit int) error {
	msg := fmt.Sprintf("the request body is larger than %d bytes", limit)
	if size >= 0 {
		msg = fmt.Sprintf("the request body is %d bytes; the limit is %d", size, limit)
	}
	return failure.New(failure.CodeDocumentTooLarge, "%s", msg).WithDetails(map[string]any{"limit": limit})
}

// decodeBody reads a JSON request body of at most limit bytes (see
// requireJSON and readBody) and decodes it strictly into v, a pointer to
// the route's request struct (see decodeRequest). An empty body is refused.
func decodeBody(c echo.Context, limit int, v any) error {
	return decodeBodyAs(c, limit, v, false)
}

// decodeOptionalBody is decodeBody for a route whose body may be left out:
// an empty body reads as {}.
func decodeOptionalBody(c echo.Context, limit int, v any) error {
	return decodeBodyAs(c, limit, v, true)
}

func decodeBodyAs(c echo.Context, limit int, v any, emptyIsObject bool) error {
	if err := requireJSON(c); err != nil {
		return err
	}
	data, err := readBody(c, limit)
	if err != nil {
		return err
	}
	return decodeRequest(data, v, emptyIsObject)
}

// requestOptions is how every request body is read: a null member is an
// absent one (so a nullable field is a pointer or a slice, nil when absent).
func requestOptions() jsonstrict.Options { return jsonstrict.Options{NullIsAbsent: true} }

// decodeRequest decodes a JSON request body into v (a pointer to a struct)
// with the one strict decoder, package jsonstrict: malformed JSON is
// INVALID_JSON; anything else wrong (not an object, a repeated member, an
// unknown or case-folded member name, a wrong type, a missing required
// member: tag `required:"true"`) is INVALID_REQUEST with details.field
// naming the member (dot-separated when it is nested). A problem inside a
// "graph" member is the graph document's: INVALID_DOCUMENT or INVALID_JSON
// with details.path, as graph.Decode reports it. A blank body is {} when
// emptyIsObject, else INVALID_REQUEST.
func decodeRequest(data []byte, v any, emptyIsObject bool) error {
	if len(bytes.TrimSpace(data)) == 0 {
		if !emptyIsObject {
			return emptyBody(v)
		}
		data = []byte("{}")
	}
	if err := jsonstrict.Decode(data, v, requestOptions()); err != nil {
		return requestError(err, v)
	}
	return nil
}

// emptyBody refuses a missing body, naming the first required member when
// v has one.
func emptyBody(v any) error {
	fe := failure.New(failure.CodeInvalidRequest, "a JSON object body is required")
	var se *jsonstrict.Error
	if err := jsonstrict.Check([]byte("{}"), reflect.TypeOf(v).Elem(), requestOptions()); errors.As(err, &se) && se.Field() != "" {
		fe = fe.WithDetails(map[string]any{"field": se.Field()})
	}
	return fe
}

// requestError maps a jsonstrict error about a request body to its coded error.
func requestError(err error, v any) error {
	var se *jsonstrict.Error
	if !errors.As(err, &se) {
		return err // v is not a pointer: a bug of the route, a 500
	}
	wrapsGraph := hasGraphMember(v)
	if wrapsGraph && len(se.Path) > 1 && se.Path[0] == "graph" {
		de := &graph.DecodeError{Code: graph.CodeInvalidDocument, Path: graph.Pointer(se.Path[1:]...), Message: se.Message}
		if se.Syntax {
			de.Code = graph.CodeInvalidJSON
		}
		return decodeGraphFailure(de)
	}
	if se.Syntax {
		return failure.New(failure.CodeInvalidJSON, "the request body is not valid JSON: %s", se.Error())
	}
	if len(se.Path) == 0 {
		if strings.HasPrefix(se.Message, "must be an object") {
			return failure.New(failure.CodeInvalidRequest, "the request body must be a JSON object")
		}
		return failure.New(failure.CodeInvalidRequest, "the request body %s", se.Message)
	}
	field := strings.Join(se.Path, ".")
	if wrapsGraph && len(se.Path) == 1 && graphField(field) && strings.HasPrefix(se.Message, "unknown field") {
		// The graph file itself was posted: say where it goes.
		return failure.New(failure.CodeInvalidRequest,
			"unknown field %q: this looks like a graph document; send it as {\"graph\": <the document>} with the other fields beside it", field).
			WithDetails(map[string]any{"field": field, "hint": "wrap the graph document in {\"graph\": ...}"})
	}
	msg := fmt.Sprintf("field %q: %s", field, se.Message)
	if strings.HasPrefix(se.Message, "duplicate key") {
		msg = fmt.Sprintf("field %q appears twice", field)
	}
	return failure.New(failure.CodeInvalidRequest, "%s", msg).WithDetails(map[string]any{"field": field})
}

// hasGraphMember reports whether v's struct has a "graph" member: the
// request wraps a graph document.
func hasGraphMember(v any) bool {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return false
	}
	for _, f := range reflect.VisibleFields(t) {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == "graph" {
			return true
		}
	}
	return false
}

// graphField reports whether name is a top-level field of a graph document.
func graphField(name string) bool {
	switch name {
	case "schemaVersion", "nodes", "edges", "schemas", "toolsets", "tools":
		return true
	}
	return false
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
