package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/bridges"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/graphyaml"
	"github.com/weftworks/weft/replay"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/variables"
)

// CodeUnsupportedMediaType refuses a request body in a syntax the route does
// not read (415), e.g. a form-encoded body, or YAML before the YAML front end.
const CodeUnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE"

// statusByCode is the one table mapping error codes to HTTP statuses.
var statusByCode = map[string]int{
	failure.CodeUnauthenticated:     http.StatusUnauthorized,
	auth.TokenMalformed:             http.StatusUnauthorized,
	auth.TokenBadSignature:          http.StatusUnauthorized,
	auth.TokenExpired:               http.StatusUnauthorized,
	failure.CodeMissingScope:        http.StatusForbidden,
	failure.CodePermissionDenied:    http.StatusForbidden,
	failure.CodeNotFound:            http.StatusNotFound,
	failure.CodeInvalidJSON:         http.StatusBadRequest,
	failure.CodeInvalidDocument:     http.StatusBadRequest,
	failure.CodeInvalidRequest:      http.StatusBadRequest,
	failure.CodeInvalidKey:          http.StatusBadRequest,
	failure.CodeCursorInvalid:       http.StatusBadRequest,
	failure.CodeDocumentTooLarge:    http.StatusRequestEntityTooLarge,
	failure.CodeAlreadyExists:       http.StatusConflict,
	failure.CodeRevisionConflict:    http.StatusConflict,
	failure.CodeIdempotencyConflict: http.StatusConflict,
	failure.CodeRunNotActive:        http.StatusConflict,
	failure.CodeInvalidGraph:        http.StatusUnprocessableEntity,
	failure.CodeInvalidInput:        http.StatusUnprocessableEntity,
	failure.CodeNotPublished:        http.StatusUnprocessableEntity,
	failure.CodeUnavailable:         http.StatusServiceUnavailable,
	failure.CodeStoreUnavailable:    http.StatusServiceUnavailable,
	failure.CodeInternal:            http.StatusInternalServerError,
	CodeUnsupportedMediaType:        http.StatusUnsupportedMediaType,
	CodeRouteNotFound:               http.StatusNotFound,
	CodeMethodNotAllowed:            http.StatusMethodNotAllowed,
	CodeTooManyStreams:              http.StatusTooManyRequests,
	starter.CodeInvalidFixtures:     http.StatusUnprocessableEntity,
	// YAML graph documents and toolsets (api/yaml.go).
	graphyaml.CodeInvalidYAML:  http.StatusBadRequest,
	graph.CodeInvalidToolsPath: http.StatusUnprocessableEntity,
	// Template limits and variable resolution refusals (variables.Registry).
	graph.CodeLimitExceeded:       http.StatusUnprocessableEntity,
	variables.CodeUnknownVariable: http.StatusUnprocessableEntity,
	variables.CodeMissingBinding:  http.StatusUnprocessableEntity,
	variables.CodeRecordNotFound:  http.StatusUnprocessableEntity,
	variables.CodeCancelled:       http.StatusServiceUnavailable, // ended before the sources answered; retry
	variables.CodeSourceFailed:    http.StatusBadGateway,         // a source failed; its error is logged only
	// Agents (api/agents.go).
	agents.CodeInvalidAgent: http.StatusUnprocessableEntity,
	store.CodeAgentArchived: http.StatusConflict,
	// Tenant skills (api/skills.go), toolset summaries, retention and
	// chain verification (issue 20).
	agents.CodeInvalidSkill:         http.StatusUnprocessableEntity,
	store.CodeSkillArchived:         http.StatusConflict,
	graph.CodeInvalidToolsetSummary: http.StatusUnprocessableEntity,
	graph.CodeMissingToolsetSummary: http.StatusUnprocessableEntity,
	store.CodeRunDeleted:            http.StatusGone,
	store.CodeEventsDeleted:         http.StatusGone,
	store.CodeContractChanged:       http.StatusConflict,
	// Webhook deliveries (POST /hooks/{id}) authenticated by their signature.
	bridges.CodeSignatureMissing:  http.StatusUnauthorized,
	bridges.CodeSignatureInvalid:  http.StatusUnauthorized,
	bridges.CodeSignatureStale:    http.StatusUnauthorized,
	bridges.CodeInvalidToolPolicy: http.StatusUnprocessableEntity,
	// Human approval (api/approvals.go, issue 18).
	starter.CodeApprovalNotWaiting:     http.StatusConflict,
	starter.CodeApprovalAlreadyDecided: http.StatusConflict,
	starter.CodeApprovalNotDelivered:   http.StatusServiceUnavailable,
	graph.CodeInvalidApprovalPolicy:    http.StatusUnprocessableEntity,
	// Replays of recorded runs through a draft (api/replays.go, issue 21).
	replay.CodeTooManyRuns: http.StatusUnprocessableEntity,
	replay.CodeRunInvalid:  http.StatusUnprocessableEntity,
}

// StatusOf returns the HTTP status for a code; unknown codes are 422 when
// they are domain refusals registered with RegisterStatus, else 500.
func StatusOf(code string) int {
	if s, ok := statusByCode[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

type errorBody struct {
	Error errorPayload `json:"error"`
}

type errorPayload struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// storeRetryAfter is the Retry-After (seconds) of a STORE_UNAVAILABLE answer.
const storeRetryAfter = "2"

// handleError is Echo's HTTPErrorHandler: coded errors keep their code and
// message, Echo's own errors (404 route, 405, body too large) get codes, and
// anything else is logged and answered as a generic 500.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var fe *failure.Error
	var he *echo.HTTPError
	payload := errorPayload{Code: failure.CodeInternal, Message: "internal error"}
	status := http.StatusInternalServerError
	if failure.CodeOf(err) == failure.CodeInternal && store.Unavailable(err) {
		// PostgreSQL is down or unreachable: the request did nothing and
		// can be repeated once it is back. Never a 500, never a hang
		// (store.DefaultConnectTimeout bounds the connect).
		s.log.Warn("request refused: PostgreSQL unavailable", "err", err, "path", c.Path())
		c.Response().Header().Set("Retry-After", storeRetryAfter)
		err = failure.New(failure.CodeStoreUnavailable, "the database is unavailable; retry shortly")
	}
	switch {
	case errors.As(err, &fe):
		payload = errorPayload{Code: fe.Code, Message: fe.Message, Details: fe.Details}
		status = StatusOf(fe.Code)
		if status >= 500 && fe.Code != failure.CodeStoreUnavailable { // an outage is logged once, above
			s.log.Error("request failed", "code", fe.Code, "err", err, "path", c.Path())
		}
	case errors.As(err, &he) && (he.Code == http.StatusNotFound || he.Code == http.StatusMethodNotAllowed) && s.routes != nil:
		// No route answered: a path none serves, or a method its routes
		// do not answer (handlers' own 404s are coded NOT_FOUND).
		method, path := c.Request().Method, c.Request().URL.Path
		if allow := s.routes.allowed(path); len(allow) > 0 {
			status = http.StatusMethodNotAllowed
			c.Response().Header().Set("Allow", strings.Join(allow, ", "))
			payload = errorPayload{Code: CodeMethodNotAllowed, Message: fmt.Sprintf("%s is not allowed on %s; it answers %s", method, path, strings.Join(allow, ", ")),
				Details: map[string]any{"allow": allow}}
		} else {
			status = http.StatusNotFound
			payload = errorPayload{Code: CodeRouteNotFound, Message: fmt.Sprintf("no route %s %s: GET /v1/openapi.json lists every route", method, path),
				Details: map[string]any{"method": method, "path": path}}
		}
	case errors.As(err, &he):
		status = he.Code
		payload.Message = fmt.Sprint(he.Message)
		switch he.Code {
		case http.StatusNotFound:
			payload.Code = failure.CodeNotFound
		case http.StatusMethodNotAllowed:
			payload.Code = CodeMethodNotAllowed
		case http.StatusRequestEntityTooLarge:
			payload.Code = failure.CodeDocumentTooLarge
		case http.StatusUnauthorized:
			payload.Code = failure.CodeUnauthenticated
		case http.StatusUnsupportedMediaType:
			payload.Code = CodeUnsupportedMediaType
		default:
			if he.Code < 500 {
				payload.Code = failure.CodeInvalidRequest
			} else {
				s.log.Error("request failed", "err", err, "path", c.Path())
			}
		}
	default:
		s.log.Error("request failed", "err", err, "path", c.Path())
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	_ = c.JSON(status, errorBody{Error: payload})
}

// recoverPanics turns a handler panic into a logged 500 instead of a dropped connection.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return next(c)
	}
}
