package graph

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Canonical returns the RFC 8785 (JCS) canonical JSON of v:
// jcs.Transform(json.Marshal(v)) — object keys sorted by UTF-16 code
// units, no whitespace, minimal string escapes, numbers in their ECMAScript
// form (2.0 and 2 are the same). What encoding/json writes for v is what is
// canonicalized, so every field it encodes is covered: a field added to a
// type is part of every hash of that type without being listed anywhere.
// Content hashes in weft (revision checksums, contract hashes, idempotency
// input hashes, event hashes) are SHA256Hex of this. Numbers beyond float64
// precision (|n| > 2^53) lose precision, as RFC 8785 prescribes (I-JSON).
func Canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return out, nil
}

// SHA256Hex returns the lowercase hex sha256 of b.
func SHA256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// hashOf is SHA256Hex(Canonical(v)).
func hashOf(v any) (string, error) {
	b, err := Canonical(v)
	if err != nil {
		return "", err
	}
	return SHA256Hex(b), nil
}
