package api

import (
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
)

// routeTable knows the registered routes, so a request no route answered
// can be told apart: a path no route serves (404 ROUTE_NOT_FOUND) or a
// method the path's routes do not answer (405 METHOD_NOT_ALLOWED with
// Allow). Echo alone answers both 404 (the /v1 group's catch-all, which
// runs authentication first, matches every method).
type routeTable struct {
	routes []routePattern
}

type routePattern struct {
	method   string
	segments []string // ":name" matches one segment
}

// Codes of requests no route answered.
const (
	CodeRouteNotFound    = "ROUTE_NOT_FOUND"
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"
)

var httpMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions}

func newRouteTable(rs []*echo.Route) *routeTable {
	t := &routeTable{}
	for _, r := range rs {
		if !slices.Contains(httpMethods, r.Method) || strings.Contains(r.Path, "*") {
			continue // catch-alls and Echo's internal not-found routes
		}
		t.routes = append(t.routes, routePattern{method: r.Method, segments: strings.Split(strings.Trim(r.Path, "/"), "/")})
	}
	return t
}

// allowed lists, sorted, the methods of the routes matching path.
func (t *routeTable) allowed(path string) []string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var out []string
	for _, r := range t.routes {
		if len(r.segments) != len(segs) || slices.Contains(out, r.method) {
			continue
		}
		match := true
		for i, s := range r.segments {
			if !strings.HasPrefix(s, ":") && s != segs[i] || strings.HasPrefix(s, ":") && segs[i] == "" {
				match = false
				break
			}
		}
		if match {
			out = append(out, r.method)
		}
	}
	slices.Sort(out)
	return out
}
