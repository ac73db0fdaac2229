package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/goccy/go-yaml"
	"github.com/labstack/echo/v4"
)

// openAPIYAML is the hand-maintained OpenAPI 3.1 document of every route
// (openapi_test.go checks it against the routes Echo registers).
//
//go:embed openapi.yaml
var openAPIYAML []byte

// OpenAPI returns the API's OpenAPI 3.1 document as compact JSON.
var OpenAPI = sync.OnceValues(func() ([]byte, error) {
	raw, err := yaml.YAMLToJSON(openAPIYAML)
	if err != nil {
		return nil, fmt.Errorf("api: openapi.yaml: %w", err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("api: openapi.yaml as JSON: %w", err)
	}
	return buf.Bytes(), nil
})

// registerOpenAPIRoute adds GET /v1/openapi.json. It is under /v1, so it
// takes a valid bearer token like every /v1 route, but no particular scope.
func (s *Server) registerOpenAPIRoute(g *echo.Group) {
	g.GET("/openapi.json", s.openAPI)
}

func (s *Server) openAPI(c echo.Context) error {
	doc, err := OpenAPI()
	if err != nil {
		return err // a broken embedded document is a build fault; tests catch it
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, doc)
}
