package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/failure"
)

// testRequest is a request struct of the shapes routes use: required
// members, optional pointers, a free-form member, a nested object and a map.
type testRequest struct {
	Key      string            `json:"key" required:"true"`
	Revision *int              `json:"revision"`
	Input    json.RawMessage   `json:"input"`
	Budget   *testBudget       `json:"budget"`
	Tags     map[string]string `json:"tags"`
}

type testBudget struct {
	MaxTokens int64 `json:"maxTokens"`
}

// testEnvelope wraps a graph document, as the create and draft bodies do.
type testEnvelope struct {
	Key   string          `json:"key" required:"true"`
	Graph json.RawMessage `json:"graph" required:"true"`
}

// TestDecodeRequest: the one strict decoder refuses every kind of bad
// body with its code and names the member in details.field.
func TestDecodeRequest(t *testing.T) {
	cases := []struct {
		name     string
		body     string
		envelope bool // decode into testEnvelope
		optional bool // a blank body is {}
		code     string
		field    string // details.field
		path     string // details.path (problems inside a graph)
		msg      string // part of the message
	}{
		{name: "valid", body: `{"key":"a","revision":2,"input":{"x":[1,2.5]},"budget":{"maxTokens":10},"tags":{"t":"v"}}`},
		{name: "null optional members are absent", body: `{"key":"a","revision":null,"input":null,"budget":null,"tags":null}`},
		{name: "duplicate key", body: `{"key":"a","key":"b"}`, code: "INVALID_REQUEST", field: "key", msg: `field "key" appears twice`},
		{name: "duplicate key inside a free-form member", body: `{"key":"a","input":{"x":1,"x":2}}`, code: "INVALID_REQUEST", field: "input.x", msg: "appears twice"},
		{name: "unknown field", body: `{"key":"a","tenantId":"evil"}`, code: "INVALID_REQUEST", field: "tenantId", msg: `unknown field "tenantId"`},
		{name: "case-folded field with hint", body: `{"Key":"a"}`, code: "INVALID_REQUEST", field: "Key", msg: `did you mean "key"?`},
		{name: "unknown nested field", body: `{"key":"a","budget":{"maxTokens":1,"extra":1}}`, code: "INVALID_REQUEST", field: "budget.extra", msg: "unknown field"},
		{name: "wrong type: number for string", body: `{"key":7}`, code: "INVALID_REQUEST", field: "key", msg: "must be a string"},
		{name: "wrong type: string for integer", body: `{"key":"a","revision":"1"}`, code: "INVALID_REQUEST", field: "revision", msg: "must be an integer"},
		{name: "wrong type: fraction for integer", body: `{"key":"a","revision":1.5}`, code: "INVALID_REQUEST", field: "revision"},
		{name: "wrong type: exponent for integer", body: `{"key":"a","revision":1e0}`, code: "INVALID_REQUEST", field: "revision"},
		{name: "wrong type: integer overflow", body: `{"key":"a","revision":99999999999999999999999}`, code: "INVALID_REQUEST", field: "revision"},
		{name: "wrong type: map value", body: `{"key":"a","tags":{"t":1}}`, code: "INVALID_REQUEST", field: "tags.t", msg: "must be a string"},
		{name: "missing required", body: `{"revision":1}`, code: "INVALID_REQUEST", field: "key", msg: "key is required"},
		{name: "null required", body: `{"key":null}`, code: "INVALID_REQUEST", field: "key", msg: "key is required"},
		{name: "empty body", body: ``, code: "INVALID_REQUEST", field: "key", msg: "a JSON object body is required"},
		{name: "blank body", body: " \n", code: "INVALID_REQUEST", field: "key"},
		{name: "empty optional body", body: ``, optional: true, code: "INVALID_REQUEST", field: "key", msg: "key is required"},
		{name: "malformed", body: `{"key":`, code: "INVALID_JSON"},
		{name: "trailing data", body: `{"key":"a"} {}`, code: "INVALID_JSON"},
		{name: "not UTF-8", body: "{\"key\":\"\xff\"}", code: "INVALID_JSON"},
		{name: "lone surrogate", body: `{"key":"\udc00"}`, code: "INVALID_JSON"},
		{name: "not an object", body: `[1]`, code: "INVALID_REQUEST", msg: "must be a JSON object"},
		{name: "a string", body: `"x"`, code: "INVALID_REQUEST", msg: "must be a JSON object"},
		{name: "number out of range", body: `{"key":"a","input":1e999}`, code: "INVALID_REQUEST", field: "input", msg: "out of range"},

		{name: "envelope: valid", envelope: true, body: `{"key":"a","graph":{"schemaVersion":1}}`},
		{name: "envelope: bare graph hint", envelope: true, body: `{"schemaVersion":1,"nodes":[],"edges":[]}`,
			code: "INVALID_REQUEST", field: "schemaVersion", msg: "looks like a graph document"},
		{name: "envelope: other unknown field", envelope: true, body: `{"key":"a","graph":{},"force":true}`,
			code: "INVALID_REQUEST", field: "force", msg: `unknown field "force"`},
		{name: "envelope: repeated key inside the graph", envelope: true, body: `{"key":"a","graph":{"nodes":[],"nodes":[]}}`,
			code: "INVALID_DOCUMENT", path: "/graph/nodes"},
		{name: "envelope: lone surrogate inside the graph", envelope: true, body: `{"key":"a","graph":{"a":"\udc00"}}`,
			code: "INVALID_JSON", path: "/graph/a"},
		{name: "envelope: null graph", envelope: true, body: `{"key":"a","graph":null}`,
			code: "INVALID_REQUEST", field: "graph", msg: "graph is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var v any = &testRequest{}
			if tc.envelope {
				v = &testEnvelope{}
			}
			err := decodeRequest([]byte(tc.body), v, tc.optional)
			if tc.code == "" {
				require.NoError(t, err)
				return
			}
			var fe *failure.Error
			require.True(t, errors.As(err, &fe), "%v", err)
			require.Equal(t, tc.code, fe.Code, fe.Message)
			require.Contains(t, fe.Message, tc.msg)
			require.Equal(t, tc.field, detail(fe, "field"), fe.Message)
			require.Equal(t, tc.path, detail(fe, "path"), fe.Message)
		})
	}

	var got testRequest
	require.NoError(t, decodeRequest([]byte(`{"key":"a","revision":null,"budget":{"maxTokens":10}}`), &got, false))
	require.Equal(t, "a", got.Key)
	require.Nil(t, got.Revision, "null is absent")
	require.EqualValues(t, 10, got.Budget.MaxTokens)

	var opt struct {
		Revision *int `json:"revision"`
	}
	require.NoError(t, decodeRequest(nil, &opt, true), "an optional body may be left out")
	require.Nil(t, opt.Revision)
	err := decodeRequest(nil, &opt, false)
	require.Equal(t, "INVALID_REQUEST", failure.CodeOf(err), "a required body is refused even when every member is optional")
}

func detail(fe *failure.Error, name string) string {
	s, _ := fe.Details[name].(string)
	return s
}

// TestDecodeBody: the Content-Type and size policy around the decoder.
func TestDecodeBody(t *testing.T) {
	const limit = 64
	serve := func(contentType string, body io.Reader, contentLength int64) error {
		req := httptest.NewRequest(http.MethodPost, "/", body)
		req.ContentLength = contentLength
		if contentType != "" {
			req.Header.Set(echo.HeaderContentType, contentType)
		}
		c := echo.New().NewContext(req, httptest.NewRecorder())
		var v testRequest
		return decodeBody(c, limit, &v)
	}
	small := `{"key":"a"}`
	big := `{"key":"` + strings.Repeat("x", limit) + `"}`
	cases := []struct {
		name, contentType, body string
		contentLength           int64 // -1: unknown (chunked)
		code                    string
	}{
		{"no Content-Type is JSON", "", small, int64(len(small)), ""},
		{"application/json", "application/json; charset=utf-8", small, int64(len(small)), ""},
		{"+json", "application/merge-patch+json", small, int64(len(small)), ""},
		{"YAML", "application/yaml", small, int64(len(small)), CodeUnsupportedMediaType},
		{"form", "application/x-www-form-urlencoded", small, int64(len(small)), CodeUnsupportedMediaType},
		{"unparsable Content-Type", "json;;", small, int64(len(small)), CodeUnsupportedMediaType},
		{"too large by Content-Length", "", big, int64(len(big)), "DOCUMENT_TOO_LARGE"},
		{"too large, length unknown", "", big, -1, "DOCUMENT_TOO_LARGE"},
		{"too large, Content-Length lied", "", big, limit - 1, "DOCUMENT_TOO_LARGE"},
		{"at the limit", "", `{"key":"` + strings.Repeat("x", limit-10) + `"}`, -1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := serve(tc.contentType, strings.NewReader(tc.body), tc.contentLength)
			if tc.code == "" {
				require.NoError(t, err)
				return
			}
			require.Equal(t, tc.code, failure.CodeOf(err), "%v", err)
			if tc.code == "DOCUMENT_TOO_LARGE" {
				var fe *failure.Error
				require.True(t, errors.As(err, &fe))
				require.Equal(t, limit, fe.Details["limit"])
				require.Equal(t, http.StatusRequestEntityTooLarge, statusByCode[fe.Code])
			}
		})
	}
}
