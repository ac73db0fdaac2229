package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"

	"github.com/weftworks/weft/failure"
)

// cursorKeyLabel derives the cursor MAC key from the JWT secret, so a
// cursor can never double as a token signature and rotating the secret
// invalidates old cursors along with old tokens.
const cursorKeyLabel = "weft-cursor-v1"

// cursorMACLen is the MAC length kept in a cursor: 128 bits is plenty
// against forgery and keeps cursors short.
const cursorMACLen = 16

// cursorKey returns HMAC-SHA256(jwt secret, "weft-cursor-v1").
func (s *Server) cursorKey() []byte {
	m := hmac.New(sha256.New, s.deps.Keys.Secret())
	m.Write([]byte(cursorKeyLabel))
	return m.Sum(nil)
}

// sealCursor returns an opaque cursor carrying payload, bound to scope.
// The scope (see cursorScope) is not in the cursor; it is
// recomputed from the request, so a cursor presented for another run or
// tenant fails the MAC and is refused.
func (s *Server) sealCursor(scope string, payload []byte) string {
	mac := cursorMAC(s.cursorKey(), scope, payload)
	buf := make([]byte, 0, len(payload)+cursorMACLen)
	buf = append(buf, payload...)
	buf = append(buf, mac...)
	return base64.RawURLEncoding.EncodeToString(buf)
}

// openCursor verifies cursor against scope and returns its payload. Any
// malformed, tampered or foreign cursor is CURSOR_INVALID.
func (s *Server) openCursor(scope, cursor string) ([]byte, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err == nil && len(raw) <= cursorMACLen {
		err = errors.New("short cursor")
	}
	if err == nil {
		payload, mac := raw[:len(raw)-cursorMACLen], raw[len(raw)-cursorMACLen:]
		if hmac.Equal(mac, cursorMAC(s.cursorKey(), scope, payload)) {
			return payload, nil
		}
	}
	return nil, failure.New(failure.CodeCursorInvalid, "the cursor is invalid, tampered with, or belongs to another listing")
}

// cursorScope joins the parts a cursor is bound to, each length-prefixed so
// no choice of tenant, run or filter values can collide with another.
func cursorScope(parts ...string) string {
	var b []byte
	for _, p := range parts {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return string(b)
}

func cursorMAC(key []byte, scope string, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(scope))
	m.Write([]byte{0})
	m.Write(payload)
	return m.Sum(nil)[:cursorMACLen]
}

// openJSONCursor opens a cursor whose payload is a JSON-encoded C, as
// trimPage seals them. No cursor is nil; one whose payload does not decode,
// or that valid refuses, is CURSOR_INVALID.
func openJSONCursor[C any](s *Server, scope, cursor string, valid func(C) bool) (*C, error) {
	if cursor == "" {
		return nil, nil
	}
	payload, err := s.openCursor(scope, cursor)
	if err != nil {
		return nil, err
	}
	var c C
	if err := json.Unmarshal(payload, &c); err != nil || !valid(c) {
		return nil, failure.New(failure.CodeCursorInvalid, "the cursor is invalid")
	}
	return &c, nil
}

// trimPage takes the rows of a keyset query asked for limit+1 rows: it
// keeps the first limit and, when there was one more, seals the cursor
// after the last kept row (cursorOf's value as JSON); else the cursor is "".
func trimPage[T, C any](s *Server, scope string, rows []T, limit int, cursorOf func(T) C) ([]T, string) {
	if len(rows) <= limit {
		return rows, ""
	}
	rows = rows[:limit]
	payload, _ := json.Marshal(cursorOf(rows[limit-1]))
	return rows, s.sealCursor(scope, payload)
}
