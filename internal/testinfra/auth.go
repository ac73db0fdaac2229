package testinfra

import (
	"testing"
	"time"

	"github.com/weftworks/weft/auth"
)

// Keys is auth.NewKeys(secret), failing the test on error.
func Keys(t testing.TB, secret string) *auth.Keys {
	t.Helper()
	keys, err := auth.NewKeys(secret)
	if err != nil {
		t.Fatalf("testinfra: keys: %v", err)
	}
	return keys
}

// Token mints an hour-long token for sub in tenant holding scopes.
func Token(t testing.TB, keys *auth.Keys, tenant, sub string, scopes ...string) string {
	t.Helper()
	return TokenFor(t, keys, auth.Principal{Tenant: tenant, Sub: sub, Scopes: scopes})
}

// TokenFor mints an hour-long token for p.
func TokenFor(t testing.TB, keys *auth.Keys, p auth.Principal) string {
	t.Helper()
	tok, err := keys.Mint(p, time.Hour)
	if err != nil {
		t.Fatalf("testinfra: mint: %v", err)
	}
	return tok
}
