package api

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/store"
)

// Revocation route limits.
const (
	// maxRevocationBody bounds POST /v1/revocations ({sub, scope}).
	maxRevocationBody = 4 << 10
	// maxRevocationChars bounds a sub or a scope, in characters.
	maxRevocationChars      = 200
	defaultRevocationsLimit = 50
	maxRevocationsLimit     = store.MaxBridgePageSize
)

// registerRevocationRoutes adds /v1/revocations (SPEC §8; issue 12): a
// revocation withdraws one scope from a sub in the caller's tenant — from
// the runs the sub started, those under way included (at their next action
// attempt or tool call), and from every schedule and webhook service actor
// the sub configured. Every route needs revocations.manage; the tenant is
// always the token's.
func (s *Server) registerRevocationRoutes(g *echo.Group) {
	manage := requireScope(auth.ScopeRevocationsManage)
	g.GET("/revocations", s.listRevocations, manage)
	g.POST("/revocations", s.createRevocation, manage)
	g.DELETE("/revocations/:sub/:scope", s.deleteRevocation, manage)
}

// revocationBody is a revocation as the API shows it.
type revocationBody struct {
	Sub       string    `json:"sub"`
	Scope     string    `json:"scope"`
	CreatedAt time.Time `json:"createdAt"`
}

func toRevocationBody(r store.Revocation) revocationBody {
	return revocationBody{Sub: r.Sub, Scope: r.Scope, CreatedAt: r.CreatedAt}
}

// revocationCursor is the position a revocations page ends at.
type revocationCursor struct {
	Sub   string `json:"u"`
	Scope string `json:"s"`
}

var errNoRevocationStore = failure.New(failure.CodeUnavailable, "revocations are not available on this server")

func (s *Server) revocationStore() (*store.Store, error) {
	if s.deps.Store == nil {
		return nil, errNoRevocationStore
	}
	return s.deps.Store, nil
}

// checkRevocationText refuses a sub or scope that is blank, longer than
// maxRevocationChars or holds control characters: 400 INVALID_REQUEST
// with details.field.
func checkRevocationText(field, v string) error {
	bad := func(format string, args ...any) error {
		return failure.New(failure.CodeInvalidRequest, "%s "+format, append([]any{field}, args...)...).
			WithDetails(map[string]any{"field": field})
	}
	switch {
	case strings.TrimSpace(v) == "":
		return bad("is required and must not be blank")
	case !utf8.ValidString(v):
		return bad("must be valid UTF-8")
	case utf8.RuneCountInString(v) > maxRevocationChars:
		return bad("has more than %d characters", maxRevocationChars)
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return bad("must not contain control characters")
	}
	return nil
}

// listRevocations handles GET /v1/revocations?sub=&cursor=&limit=: the
// tenant's revocations (of one sub when sub is given), ordered by sub then
// scope.
func (s *Server) listRevocations(c echo.Context) error {
	st, err := s.revocationStore()
	if err != nil {
		return err
	}
	p := principal(c)
	sub := c.QueryParam("sub")
	if sub != "" {
		if err := checkRevocationText("sub", sub); err != nil {
			return err
		}
	}
	limit, err := pageLimit(c, defaultRevocationsLimit, maxRevocationsLimit)
	if err != nil {
		return err
	}
	scope := cursorScope("revocations", p.Tenant, sub)
	rc, err := openJSONCursor(s, scope, c.QueryParam("cursor"), func(rc revocationCursor) bool { return rc.Sub != "" && rc.Scope != "" })
	if err != nil {
		return err
	}
	var after *store.RevocationCursor
	if rc != nil {
		after = &store.RevocationCursor{Sub: rc.Sub, Scope: rc.Scope}
	}
	rows, err := st.ListRevocations(c.Request().Context(), p.Tenant, sub, after, limit+1)
	if err != nil {
		return err
	}
	rows, next := trimPage(s, scope, rows, limit, func(r store.Revocation) revocationCursor {
		return revocationCursor{Sub: r.Sub, Scope: r.Scope}
	})
	out := make([]revocationBody, 0, len(rows))
	for _, r := range rows {
		out = append(out, toRevocationBody(r))
	}
	return list(c, "revocations", out, next)
}

// createRevocationBody is the body of POST /v1/revocations.
type createRevocationBody struct {
	Sub   string `json:"sub" required:"true"`
	Scope string `json:"scope" required:"true"`
}

// createRevocation handles POST /v1/revocations {sub, scope}: 201 with the
// revocation, 200 with the existing one when it was already revoked.
func (s *Server) createRevocation(c echo.Context) error {
	st, err := s.revocationStore()
	if err != nil {
		return err
	}
	var body createRevocationBody
	if err := decodeBody(c, maxRevocationBody, &body); err != nil {
		return err
	}
	sub, scope := body.Sub, body.Scope
	if err := checkRevocationText("sub", sub); err != nil {
		return err
	}
	if err := checkRevocationText("scope", scope); err != nil {
		return err
	}
	// A scope is one of weft's (auth.AllScopes) or a permission an action
	// requires (crm.write): revoking anything else would withdraw nothing,
	// and is most likely a typo.
	known, err := s.knownPermissions(c.Request().Context(), st)
	if err != nil {
		return err
	}
	if !slices.Contains(known, scope) {
		return failure.New(failure.CodeInvalidRequest,
			"scope %q is neither one of weft's scopes nor a permission a published action requires", scope).
			WithDetails(map[string]any{"field": "scope", "known": known})
	}
	r, created, err := st.AddRevocation(c.Request().Context(), principal(c).Tenant, sub, scope)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, toRevocationBody(r))
}

// knownPermissions is what a revocation may name, sorted: weft's scopes and
// the permissions the built-in and published actions require (agents
// require the scopes of their instructions' variables, which are weft's).
func (s *Server) knownPermissions(ctx context.Context, st *store.Store) ([]string, error) {
	published, err := st.PublishedContracts(ctx)
	if err != nil {
		return nil, err
	}
	known := slices.Clone(auth.AllScopes)
	for _, c := range append(catalog.BuiltinContracts(), published...) {
		known = append(known, c.RequiredPermissions...)
	}
	slices.Sort(known)
	return slices.Compact(known), nil
}

// deleteRevocation handles DELETE /v1/revocations/{sub}/{scope} (each
// path-escaped): 204, or 404 when the tenant has no such revocation. Any
// scope may be named, so rows inserted by SQL can be removed too.
func (s *Server) deleteRevocation(c echo.Context) error {
	st, err := s.revocationStore()
	if err != nil {
		return err
	}
	sub, err := pathSegment(c, "sub")
	if err != nil {
		return err
	}
	scope, err := pathSegment(c, "scope")
	if err != nil {
		return err
	}
	if err := st.DeleteRevocation(c.Request().Context(), principal(c).Tenant, sub, scope); err != nil {
		return notFoundAs(err, "no revocation of %q from %q", scope, sub)
	}
	return c.NoContent(http.StatusNoContent)
}

// pathSegment returns path parameter name, unescaped and checked like a
// body field. Echo matches the escaped path (URL.RawPath) when the request
// has one, so a parameter holding an escaped '/' (%2F) is unescaped here;
// otherwise the parameter comes from the already unescaped URL.Path.
func pathSegment(c echo.Context, name string) (string, error) {
	v := c.Param(name)
	if c.Request().URL.RawPath != "" {
		u, err := url.PathUnescape(v)
		if err != nil {
			return "", failure.New(failure.CodeInvalidRequest, "%s is not a valid escaped path segment", name).
				WithDetails(map[string]any{"field": name})
		}
		v = u
	}
	return v, checkRevocationText(name, v)
}
