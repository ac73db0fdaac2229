package api

import (
	"errors"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/starter"
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
			return tokenRefusal(err)
		}
		c.Set(principalKey, p)
		return next(c)
	}
}

// tokenRefusal says why a token was refused, with a code per reason (all
// 401): one to fix, one from another deployment, one to renew.
func tokenRefusal(err error) error {
	var te *auth.TokenError
	if !errors.As(err, &te) {
		return failure.New(failure.CodeUnauthenticated, "the bearer token is invalid")
	}
	switch te.Reason {
	case auth.TokenExpired:
		return failure.New(auth.TokenExpired, "the bearer token has expired: mint a new one (weft token)")
	case auth.TokenBadSignature:
		return failure.New(auth.TokenBadSignature, "the bearer token was not signed with this deployment's key (WEFT_JWT_SECRET)")
	default:
		return failure.New(auth.TokenMalformed, "the bearer token is not a weft token: an HS256 JWT with sub, tenant, scopes and exp")
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

// requireScopes is requireScope for a route that needs several scopes: a
// caller lacking any is 403 MISSING_SCOPE with details.missing listing
// every one it lacks (in the order given), so one answer says all.
func requireScopes(scopes ...string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p := principal(c)
			var missing []string
			for _, s := range scopes {
				if !p.Has(s) {
					missing = append(missing, s)
				}
			}
			if len(missing) > 0 {
				return failure.New(failure.CodeMissingScope, "this route needs scopes %s", strings.Join(scopes, ", ")).
					WithDetails(map[string]any{"missing": missing})
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

// apiTrusted is the trusted context of a run the API starts for the
// caller: tenant, actor and permission snapshot come from the token,
// never from the body.
func apiTrusted(p auth.Principal) starter.Trusted {
	return starter.Trusted{
		TenantID:    p.Tenant,
		TenantName:  p.TenantName,
		Actor:       execution.Actor{Kind: "user", Sub: p.Sub, Name: p.Name, Email: p.Email},
		Origin:      execution.Origin{Kind: "api"},
		Permissions: p.Scopes,
	}
}
