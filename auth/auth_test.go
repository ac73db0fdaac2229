package auth

import (
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

	past := &Keys{secret: []byte(secret), now: func() time.Time { return time.Now().Add(-2 * time.Hour) }}
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
		"tampered payload": good[:len(good)-2] + "xx",
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
