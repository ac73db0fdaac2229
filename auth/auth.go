// Package auth mints and verifies weft's API tokens (HS256 JWTs) and names
// the scopes routes require.
package auth

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Scopes a token can carry.
const (
	ScopeWorkflowsRead    = "workflows.read"
	ScopeWorkflowsWrite   = "workflows.write"
	ScopeWorkflowsPublish = "workflows.publish"
	ScopeRunsExecute      = "runs.execute"
	ScopeRunsRead         = "runs.read"
	ScopeRunsCancel       = "runs.cancel"
	// ScopeRunsApprove decides what a run waits for: approval nodes and
	// tool calls that need approval (POST /v1/runs/{id}/approvals/{nodeId}).
	ScopeRunsApprove     = "runs.approve"
	ScopeAgentsRead      = "agents.read"
	ScopeAgentsWrite     = "agents.write"
	ScopeVariablesRead   = "variables.read"
	ScopeSchedulesManage = "schedules.manage"
	// ScopeRevocationsManage lists, adds and removes revocations: scopes
	// withdrawn from the service actors (schedules, webhooks) a sub
	// configured.
	ScopeRevocationsManage = "revocations.manage"
	// ScopeLimitsManage sets the tenant's and its workflows' limits:
	// concurrency and start-rate caps, and workflows' default budgets.
	ScopeLimitsManage = "limits.manage"
	// ScopeNotesWrite is a business permission required by workspace.notes.write@1.
	ScopeNotesWrite = "notes.write"
)

// AllScopes lists every scope, used for the dev token.
var AllScopes = []string{
	ScopeWorkflowsRead, ScopeWorkflowsWrite, ScopeWorkflowsPublish,
	ScopeRunsExecute, ScopeRunsRead, ScopeRunsCancel, ScopeRunsApprove,
	ScopeAgentsRead, ScopeAgentsWrite, ScopeVariablesRead, ScopeSchedulesManage,
	ScopeRevocationsManage, ScopeLimitsManage, ScopeNotesWrite,
}

// Principal is the authenticated caller.
type Principal struct {
	Tenant     string   `json:"tenant"`
	Sub        string   `json:"sub"`
	Scopes     []string `json:"scopes"`
	Name       string   `json:"name,omitempty"`
	Email      string   `json:"email,omitempty"`
	TenantName string   `json:"tenantName,omitempty"`
}

// Has reports whether the principal holds scope.
func (p Principal) Has(scope string) bool { return slices.Contains(p.Scopes, scope) }

// Missing returns the scopes of need the principal lacks, sorted (nil when
// it lacks none).
func Missing(have, need []string) []string {
	if out := Without(need, have); len(out) > 0 {
		return out
	}
	return nil
}

// Without returns the scopes of s that are not in remove, sorted and
// without duplicates (never nil).
func Without(s, remove []string) []string {
	out := make([]string, 0, len(s))
	for _, v := range s {
		if !slices.Contains(remove, v) && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

type claims struct {
	Tenant     string   `json:"tenant"`
	Scopes     []string `json:"scopes"`
	Name       string   `json:"name,omitempty"`
	Email      string   `json:"email,omitempty"`
	TenantName string   `json:"tenantName,omitempty"`
	jwt.RegisteredClaims
}

// ErrInvalidToken is returned for any token that does not verify.
var ErrInvalidToken = errors.New("invalid token")

// Keys signs and verifies tokens with one shared secret.
type Keys struct {
	secret []byte
	now    func() time.Time
}

// NewKeys returns Keys for secret.
func NewKeys(secret string) (*Keys, error) {
	if len(secret) < 16 {
		return nil, errors.New("auth: jwt secret must be at least 16 characters")
	}
	return &Keys{secret: []byte(secret), now: time.Now}, nil
}

// Mint signs a token for p valid for ttl.
func (k *Keys) Mint(p Principal, ttl time.Duration) (string, error) {
	if p.Tenant == "" || p.Sub == "" {
		return "", errors.New("auth: tenant and sub are required")
	}
	if ttl <= 0 {
		return "", errors.New("auth: ttl must be positive")
	}
	now := k.now()
	c := claims{
		Tenant: p.Tenant, Scopes: p.Scopes, Name: p.Name, Email: p.Email, TenantName: p.TenantName,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   p.Sub,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(k.secret)
}

// Why a token was refused (TokenError.Reason): the client can tell a
// token to fix from one to renew, and nothing about the key is revealed.
const (
	// TokenMalformed: not a JWT, not HS256, or claims missing or of the wrong type.
	TokenMalformed = "TOKEN_MALFORMED"
	// TokenBadSignature: well formed, but not signed with this deployment's key.
	TokenBadSignature = "TOKEN_BAD_SIGNATURE"
	// TokenExpired: signed correctly, past its exp (or before its nbf).
	TokenExpired = "TOKEN_EXPIRED"
)

// TokenError is a refused token with its reason; errors.Is(err,
// ErrInvalidToken) holds for every one.
type TokenError struct {
	Reason string
	err    error
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("%v: %s: %v", ErrInvalidToken, e.Reason, e.err)
}

// Is makes every TokenError an ErrInvalidToken.
func (e *TokenError) Is(target error) bool { return target == ErrInvalidToken }

// Unwrap returns the parser's error.
func (e *TokenError) Unwrap() error { return e.err }

// Verify checks a token's signature, algorithm and expiry and returns its
// principal; a refusal is a *TokenError saying why.
func (k *Keys) Verify(token string) (Principal, error) {
	var c claims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return k.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(k.now),
	)
	switch {
	case err == nil:
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return Principal{}, &TokenError{Reason: TokenBadSignature, err: err}
	case errors.Is(err, jwt.ErrTokenExpired), errors.Is(err, jwt.ErrTokenNotValidYet):
		return Principal{}, &TokenError{Reason: TokenExpired, err: err}
	default:
		return Principal{}, &TokenError{Reason: TokenMalformed, err: err}
	}
	if c.Tenant == "" || c.Subject == "" {
		return Principal{}, &TokenError{Reason: TokenMalformed, err: errors.New("tenant and sub claims are required")}
	}
	return Principal{Tenant: c.Tenant, Sub: c.Subject, Scopes: c.Scopes, Name: c.Name, Email: c.Email, TenantName: c.TenantName}, nil
}

// Secret returns the raw key, for deriving other keys (cursor HMACs).
func (k *Keys) Secret() []byte { return k.secret }
