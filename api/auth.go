package api

import (
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/failure"
)

const principalKey = "weft.principal"

// authenticate requires a valid bearer token on every /v1 route.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header.Get("Authorization")
		token, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || strings.TrimSpace(token) == "" {
			return failure.New(failure.CodeUnauthenticated, "a bearer token is required")
		}
		p, err := s.deps.Keys.Verify(strings.TrimSpace(token))
		if err != nil {
			return failure.New(failure.CodeUnauthenticated, "the bearer token is invalid or expired")
		}
		c.Set(principalKey, p)
		return next(c)
	}
}

// requireScope refuses callers without scope with 403 MISSING_SCOPE.
func requireScope(scope string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !principal(c).Has(scope) {
				return failure.New(failure.CodeMissingScope, "this route needs scope %s", scope).
					WithDetails(map[string]any{"missing": []string{scope}})
			}
			return next(c)
		}
	}
}

// principal returns the authenticated caller; authenticate guarantees one on /v1.
func principal(c echo.Context) auth.Principal {
	p, _ := c.Get(principalKey).(auth.Principal)
	return p
}
