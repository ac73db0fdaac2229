package testinfra

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Response is one HTTP answer.
type Response struct {
	Status int
	Body   []byte
	Header http.Header
}

// JSON decodes the body as a JSON object, failing the test if it is not one.
func (r Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body (%d): %s: %v", r.Status, r.Body, err)
	}
	return m
}

// Code is the error code of an error answer, failing the test on any other
// body.
func (r Response) Code(t testing.TB) string {
	t.Helper()
	e, _ := r.JSON(t)["error"].(map[string]any)
	if e == nil {
		t.Fatalf("not an error body (%d): %s", r.Status, r.Body)
	}
	c, _ := e["code"].(string)
	return c
}

// RequestBody is body as a request body: nil for nil, a string or []byte as
// it is, anything else marshalled as JSON.
func RequestBody(t testing.TB, body any) io.Reader {
	t.Helper()
	switch b := body.(type) {
	case nil:
		return nil
	case string:
		return strings.NewReader(b)
	case []byte:
		return bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("testinfra: marshal request body: %v", err)
		}
		return bytes.NewReader(raw)
	}
}

// setHeaders marks a request with a body as JSON and adds the bearer token
// (none when empty).
func setHeaders(req *http.Request, token string, body any) {
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
}

// NewRequest is an in-process request (httptest.NewRequest) for Serve: body
// as RequestBody makes it, with the JSON content type when there is a body
// and the bearer token when there is one.
func NewRequest(t testing.TB, method, target, token string, body any) *http.Request {
	t.Helper()
	req := httptest.NewRequest(method, target, RequestBody(t, body))
	setHeaders(req, token, body)
	return req
}

// Serve sends req through h in process.
func Serve(h http.Handler, req *http.Request) Response {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return Response{Status: rec.Code, Body: rec.Body.Bytes(), Header: rec.Header()}
}

// Do sends one request over HTTP to baseURL+path, built as NewRequest builds
// it, and reads the whole answer.
func Do(t testing.TB, baseURL, method, path, token string, body any) Response {
	t.Helper()
	req, err := http.NewRequest(method, baseURL+path, RequestBody(t, body))
	if err != nil {
		t.Fatalf("testinfra: request: %v", err)
	}
	setHeaders(req, token, body)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("testinfra: %s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("testinfra: read %s %s: %v", method, path, err)
	}
	return Response{Status: res.StatusCode, Body: data, Header: res.Header}
}
