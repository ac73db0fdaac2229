package api

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/failure"
)

func cursorServer(t *testing.T, secret string) *Server {
	t.Helper()
	keys, err := auth.NewKeys(secret)
	require.NoError(t, err)
	return &Server{deps: Deps{Keys: keys}}
}

func TestCursorIsBoundToItsScopeAndSecret(t *testing.T) {
	t.Parallel()
	s := cursorServer(t, "cursor-test-secret-0123456789")
	scope := cursorScope("events", "t1", "run-a")
	cur := s.sealCursor(scope, []byte{0, 0, 0, 0, 0, 0, 0, 7})

	payload, err := s.openCursor(scope, cur)
	require.NoError(t, err, "round trip: %v", payload)
	require.Len(t, payload, 8, "round trip: %v %v", payload, err)
	require.Equal(t, byte(7), payload[7], "round trip: %v %v", payload, err)
	refused := map[string]struct {
		scope, cursor string
		srv           *Server
	}{
		"another run":    {cursorScope("events", "t1", "run-b"), cur, s},
		"another tenant": {cursorScope("events", "t2", "run-a"), cur, s},
		"another list":   {cursorScope("runs", "t1", "run-a"), cur, s},
		// Length prefixes keep ("t1", "run-a") apart from ("t1r", "un-a").
		"shifted parts":  {cursorScope("events", "t1r", "un-a"), cur, s},
		"tampered":       {scope, tamper(cur), s},
		"garbage":        {scope, "not a cursor!", s},
		"empty payload":  {scope, base64.RawURLEncoding.EncodeToString(make([]byte, cursorMACLen)), s},
		"rotated secret": {scope, cur, cursorServer(t, "another-secret-0123456789abc")},
	}
	for name, c := range refused {
		_, err = c.srv.openCursor(c.scope, c.cursor)
		assert.Equal(t, failure.CodeCursorInvalid, failure.CodeOf(err), "%s: want CURSOR_INVALID, got %v", name, err)
	}
}

// tamper flips one bit of the cursor's payload.
func tamper(cur string) string {
	raw, _ := base64.RawURLEncoding.DecodeString(cur)
	raw[len(raw)-cursorMACLen-1] ^= 1
	return base64.RawURLEncoding.EncodeToString(raw)
}
