// Package auth mints and verifies weft's API tokens (HS256 JWTs) and names
// the scopes routes require.
package auth

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"
	lru "github.com/hashicorp/golang-lru/v2"
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
	// verified remembers the tokens Verify accepted (see Verify).
	verified *lru.Cache[[sha256.Size]byte, verifiedToken]
}

// MaxVerifiedTokens bounds the tokens Verify remembers: the distinct
// tokens in use at once by the API's callers, with room to spare; beyond
// it the least recently used is forgotten and verified again when it
// comes back.
const MaxVerifiedTokens = 4096

// verifiedToken is what Verify found a token to say, and the interval
// [notBefore, expires) in which the signature check's answer holds.
type verifiedToken struct {
	principal Principal
	notBefore time.Time // zero when the token has no nbf
	expires   time.Time
}

// NewKeys returns Keys for secret.
func NewKeys(secret string) (*Keys, error) {
	if len(secret) < 16 {
		return nil, errors.New("auth: jwt secret must be at least 16 characters")
	}
	return newKeys([]byte(secret), time.Now), nil
}

func newKeys(secret []byte, now func() time.Time) *Keys {
	verified, err := lru.New[[sha256.Size]byte, verifiedToken](MaxVerifiedTokens)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &Keys{secret: secret, now: now, verified: verified}
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
//
// A token it accepted is remembered, and while remembered it is answered
// without parsing or checking the signature again (the check is most of
// an enqueue's JSON work in this process; docs/benchmarks.md "Session 10:
// enqueue"). That answer is exactly the one a full check would give, at
// every instant:
//
//   - It is keyed by the SHA-256 of the exact token string, so only the
//     same bytes find it (another token would need a SHA-256 second
//     preimage), and the cache never holds a token itself: nothing in it
//     is a credential.
//   - A full check of the same bytes can only change its answer with the
//     key, the clock or revocation of the token. The key: a Keys has one
//     secret for its life (WEFT_JWT_SECRET, read at start; rotating it is
//     a restart, which starts with an empty cache) and the cache belongs
//     to the Keys, so no other secret's check is ever answered from it.
//     The clock: the answer is used only inside [nbf, exp) as read by
//     this Keys' clock, the interval the full check accepts (no leeway);
//     outside it the token is checked in full again, which refuses it
//     (TOKEN_EXPIRED). Revocation: weft has none for tokens, a token is
//     good until its exp; what revocations withdraw (scopes of a sub,
//     service actors' snapshots) is read from the database by whoever
//     uses the scopes (the starter's enqueue statement, every recheck),
//     never from this cache.
//   - Only acceptances are remembered: every refusal is checked in full
//     each time, so its reason is unchanged, and only a token signed with
//     the key can take a place in the cache (a flood of forged tokens
//     cannot evict the callers' tokens).
//   - It is bounded (MaxVerifiedTokens, least recently used forgotten),
//     and each answer hands out its own copy of the scopes, so no caller
//     can change what the next one is told.
func (k *Keys) Verify(token string) (Principal, error) {
	key := sha256.Sum256([]byte(token))
	if v, ok := k.verified.Get(key); ok {
		if now := k.now(); !now.Before(v.notBefore) && now.Before(v.expires) {
			p := v.principal
			p.Scopes = slices.Clone(p.Scopes)
			return p, nil
		}
		k.verified.Remove(key)
	}
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
	p := Principal{Tenant: c.Tenant, Sub: c.Subject, Scopes: c.Scopes, Name: c.Name, Email: c.Email, TenantName: c.TenantName}
	v := verifiedToken{principal: p, expires: c.ExpiresAt.Time} // WithExpirationRequired: never nil here
	v.principal.Scopes = slices.Clone(c.Scopes)
	if c.NotBefore != nil {
		v.notBefore = c.NotBefore.Time
	}
	k.verified.Add(key, v)
	return p, nil
}

// Secret returns the raw key, for deriving other keys (cursor HMACs).
func (k *Keys) Secret() []byte { return k.secret }
