package auth

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const secret = "0123456789abcdef0123456789abcdef"

func TestMintVerifyRoundTrip(t *testing.T) {
	k, err := NewKeys(secret)
	require.NoError(t, err)
	p := Principal{Tenant: "acme", Sub: "ada", Scopes: []string{ScopeRunsRead}, Name: "Ada", Email: "ada@example.com", TenantName: "Acme"}
	tok, err := k.Mint(p, time.Hour)
	require.NoError(t, err)
	got, err := k.Verify(tok)
	require.NoError(t, err)
	require.Equal(t, p.Tenant, got.Tenant, "round trip changed the principal: %+v", got)
	require.Equal(t, p.Sub, got.Sub, "round trip changed the principal: %+v", got)
	require.Equal(t, p.Name, got.Name, "round trip changed the principal: %+v", got)
	require.Equal(t, p.Email, got.Email, "round trip changed the principal: %+v", got)
	require.Equal(t, p.TenantName, got.TenantName, "round trip changed the principal: %+v", got)
	require.Len(t, got.Scopes, 1, "round trip changed the principal: %+v", got)
	require.True(t, got.Has(ScopeRunsRead), "round trip changed the principal: %+v", got)
	require.False(t, got.Has(ScopeRunsCancel), "round trip changed the principal: %+v", got)
}

func TestVerifyRefuses(t *testing.T) {
	k, _ := NewKeys(secret)
	other, _ := NewKeys(strings.Repeat("x", 32))
	good, _ := k.Mint(Principal{Tenant: "acme", Sub: "ada"}, time.Hour)
	foreign, _ := other.Mint(Principal{Tenant: "acme", Sub: "ada"}, time.Hour)

	past := newKeys([]byte(secret), func() time.Time { return time.Now().Add(-2 * time.Hour) })
	expired, _ := past.Mint(Principal{Tenant: "acme", Sub: "ada"}, time.Hour)

	noExp, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "ada", "tenant": "acme"}).SignedString([]byte(secret))
	noTenant, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "ada", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	hs512, _ := jwt.NewWithClaims(jwt.SigningMethodHS512, jwt.MapClaims{"sub": "ada", "tenant": "acme", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "ada", "tenant": "acme", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(jwt.UnsafeAllowNoneSignatureType)

	_, err := k.Verify(good)
	require.NoError(t, err, "good token refused")
	for name, tok := range map[string]string{
		"other secret":     foreign,
		"expired":          expired,
		"no exp":           noExp,
		"no tenant":        noTenant,
		"other algorithm":  hs512,
		"alg none":         none,
		"garbage":          "not.a.token",
		"tampered payload": tamper(good),
	} {
		_, err := k.Verify(tok)
		assert.ErrorIs(t, err, ErrInvalidToken, "%s: got %v, want ErrInvalidToken", name, err)
	}
}

func TestKeysAndMintRefuseBadArguments(t *testing.T) {
	_, err := NewKeys("short")
	require.Error(t, err, "a short secret was accepted")
	k, _ := NewKeys(secret)
	_, err = k.Mint(Principal{Sub: "ada"}, time.Hour)
	require.Error(t, err, "a token without tenant was minted")
	_, err = k.Mint(Principal{Tenant: "acme", Sub: "ada"}, 0)
	require.Error(t, err, "a token without lifetime was minted")
}

func TestMissing(t *testing.T) {
	got := Missing([]string{"a", "c"}, []string{"d", "b", "a", "b"})
	require.Equal(t, "b,d", strings.Join(got, ","), "Missing = %v, want [b d]", got)
}

// TestWithout: the set difference Missing and authz.Effective share is
// sorted, without duplicates, and never nil (Missing is nil when nothing
// lacks).
func TestWithout(t *testing.T) {
	if got := Without([]string{"d", "b", "a", "b"}, []string{"a", "c"}); strings.Join(got, ",") != "b,d" {
		t.Fatalf("Without = %v, want [b d]", got)
	}
	if got := Without(nil, []string{"a"}); got == nil || len(got) != 0 {
		t.Fatalf("Without(nil) = %#v, want an empty list", got)
	}
	if got := Missing([]string{"a"}, []string{"a"}); got != nil {
		t.Fatalf("Missing with nothing lacking = %#v, want nil", got)
	}
}

// TestAllScopes pins the scope list: the dev token carries all of them,
// `weft token` warns about any other, POST /v1/revocations accepts only
// these, and api/openapi.yaml lists them (components/schemas/Scope).
func TestAllScopes(t *testing.T) {
	want := []string{
		"workflows.read", "workflows.write", "workflows.publish",
		"runs.execute", "runs.read", "runs.cancel", "runs.approve",
		"agents.read", "agents.write", "variables.read", "schedules.manage",
		"revocations.manage", "limits.manage", "notes.write",
	}
	require.Equal(t, strings.Join(want, " "), strings.Join(AllScopes, " "), "AllScopes = %v, want %v", AllScopes, want)
	require.True(t, ScopeRevocationsManage == "revocations.manage", "ScopeRevocationsManage = %q", ScopeRevocationsManage)
}

// clock is a settable clock for a Keys.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// TestVerifyRemembersOnlyWhatAFullCheckWouldSay: a token Verify accepted
// is answered from the cache only while a full check would accept it
// too: from its nbf to (not at) its exp by this Keys' clock, for the same
// bytes, under the same secret, and never with scopes a caller changed.
func TestVerifyRemembersOnlyWhatAFullCheckWouldSay(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	k := newKeys([]byte(secret), c.now)
	tok, err := k.Mint(Principal{Tenant: "acme", Sub: "ada", Scopes: []string{ScopeRunsRead, ScopeRunsExecute}}, time.Hour)
	require.NoError(t, err)

	p, err := k.Verify(tok)
	require.NoError(t, err)
	require.Equal(t, 1, k.verified.Len(), "an accepted token is remembered")
	p.Scopes[0] = ScopeLimitsManage // a caller changing its copy
	again, err := k.Verify(tok)
	require.NoError(t, err)
	require.Equal(t, []string{ScopeRunsRead, ScopeRunsExecute}, again.Scopes, "a caller's change reached the cache")
	require.Equal(t, "ada", again.Sub)

	// The same claims signed with another secret are other bytes: refused,
	// whatever this Keys remembers; and another Keys never answers from it.
	other := newKeys([]byte(strings.Repeat("x", 32)), c.now)
	_, err = other.Verify(tok)
	requireReason(t, err, TokenBadSignature)
	_, err = k.Verify(tamper(tok))
	require.ErrorIs(t, err, ErrInvalidToken, "a token one byte away from a remembered one was accepted")

	c.t = c.t.Add(time.Hour - time.Second)
	_, err = k.Verify(tok)
	require.NoError(t, err, "a second before exp")
	c.t = c.t.Add(time.Second) // exactly exp: a full check refuses it
	_, err = k.Verify(tok)
	requireReason(t, err, TokenExpired)
	require.Equal(t, 0, k.verified.Len(), "an expired token is forgotten")
	_, err = k.Verify(tok)
	requireReason(t, err, TokenExpired)

	// nbf: a clock set back before it refuses the remembered token.
	c.t = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	nbf, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "ada", "tenant": "acme",
		"nbf": c.t.Unix(), "exp": c.t.Add(time.Hour).Unix()}).SignedString([]byte(secret))
	require.NoError(t, err)
	_, err = k.Verify(nbf)
	require.NoError(t, err)
	c.t = c.t.Add(-time.Second)
	_, err = k.Verify(nbf)
	requireReason(t, err, TokenExpired)
}

// TestVerifyForgetsBeyondItsBound: the cache never holds more than
// MaxVerifiedTokens tokens, and a forgotten one is checked in full again.
func TestVerifyForgetsBeyondItsBound(t *testing.T) {
	k := newKeys([]byte(secret), time.Now)
	first, err := k.Mint(Principal{Tenant: "acme", Sub: "user-first"}, time.Hour)
	require.NoError(t, err)
	_, err = k.Verify(first)
	require.NoError(t, err)
	for i := range MaxVerifiedTokens + 10 {
		tok, err := k.Mint(Principal{Tenant: "acme", Sub: fmt.Sprint("user-", i)}, time.Hour)
		require.NoError(t, err)
		_, err = k.Verify(tok)
		require.NoError(t, err)
	}
	require.Equal(t, MaxVerifiedTokens, k.verified.Len())
	require.False(t, k.verified.Contains(sha256.Sum256([]byte(first))), "the least recently used token is forgotten")
	p, err := k.Verify(first)
	require.NoError(t, err, "a forgotten token is verified again")
	require.Equal(t, "user-first", p.Sub)
}

// tamper changes one character of tok's signature, clear of the last
// one, whose low bits base64 ignores (changing only those could leave the
// signature's bytes as they were).
func tamper(tok string) string {
	i := len(tok) - 10
	flip := byte('A')
	if tok[i] == flip {
		flip = 'B'
	}
	return tok[:i] + string(flip) + tok[i+1:]
}

func requireReason(t *testing.T, err error, reason string) {
	t.Helper()
	var te *TokenError
	require.ErrorAs(t, err, &te)
	require.Equal(t, reason, te.Reason, "refused as %v", err)
}

// BenchmarkVerify is the token check of every API request: a token seen
// before ("remembered": the cache's answer) and one never seen
// ("first": the full check, as every request made before session 10).
//
//	go test ./auth -run '^$' -bench Verify -benchmem
func BenchmarkVerify(b *testing.B) {
	k := newKeys([]byte(secret), time.Now)
	mint := func(sub string) string {
		tok, err := k.Mint(Principal{Tenant: "t-0123456789abcdef0123456789abcdef", Sub: sub, Scopes: AllScopes}, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		return tok
	}
	b.Run("remembered", func(b *testing.B) {
		tok := mint("bench")
		b.ReportAllocs()
		for b.Loop() {
			if _, err := k.Verify(tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("first", func(b *testing.B) {
		toks := make([]string, 2*MaxVerifiedTokens) // cycling through more than the cache holds: every check misses
		for i := range toks {
			toks[i] = mint(fmt.Sprint("bench-", i))
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := k.Verify(toks[i%len(toks)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
