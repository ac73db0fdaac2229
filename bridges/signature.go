package bridges

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/weftworks/weft/failure"
)

// Webhook signature codes, answered 401 by the API.
const (
	// CodeSignatureMissing: no Weft-Signature header.
	CodeSignatureMissing = "SIGNATURE_MISSING"
	// CodeSignatureInvalid: a malformed header or no v1 that matches.
	CodeSignatureInvalid = "SIGNATURE_INVALID"
	// CodeSignatureStale: an authentic signature whose t is more than
	// SignatureTolerance away from now (a replayed or delayed request).
	CodeSignatureStale = "SIGNATURE_STALE"
)

// Webhook request headers.
const (
	SignatureHeader = "Weft-Signature"
	EventIDHeader   = "Weft-Event-Id"
)

// SignatureTolerance is how far the signed timestamp may be from now.
const SignatureTolerance = 5 * time.Minute

// webhookKeyLabel is the HKDF info deriving the webhook key from the JWT
// secret when WEFT_WEBHOOK_KEY is unset.
const webhookKeyLabel = "weft-webhook-secret-key-v1"

// WebhookKey returns the 32-byte AES-256-GCM key webhook secrets are
// encrypted under: WEFT_WEBHOOK_KEY (64 hex characters) when set, else
// HKDF-SHA256(JWT secret, no salt, info "weft-webhook-secret-key-v1").
// Deriving it keeps `weft dev` zero-configuration, but then rotating the JWT
// secret makes every stored webhook secret unreadable: production sets
// WEFT_WEBHOOK_KEY.
func WebhookKey(hexKey, jwtSecret string) ([]byte, error) {
	if hexKey = strings.TrimSpace(hexKey); hexKey != "" {
		k, err := hex.DecodeString(hexKey)
		if err != nil || len(k) != 32 {
			return nil, errors.New("bridges: WEFT_WEBHOOK_KEY must be 64 hex characters (32 bytes)")
		}
		return k, nil
	}
	if jwtSecret == "" {
		return nil, errors.New("bridges: a webhook key needs WEFT_WEBHOOK_KEY or the JWT secret")
	}
	return hkdf.Key(sha256.New, []byte(jwtSecret), nil, webhookKeyLabel, 32)
}

// secretBox encrypts webhook secrets with AES-256-GCM. The additional data
// binds a ciphertext to its (tenant, webhook id), so a row's ciphertext
// copied onto another row does not decrypt.
type secretBox struct {
	aead cipher.AEAD
}

func newSecretBox(key []byte) (*secretBox, error) {
	if len(key) != 32 {
		return nil, errors.New("bridges: the webhook key must be 32 bytes")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &secretBox{aead: aead}, nil
}

func secretAAD(tenantID, webhookID string) []byte {
	return []byte("weft-webhook-v1\x00" + tenantID + "\x00" + webhookID)
}

func (b *secretBox) seal(tenantID, webhookID, secret string) (ciphertext, nonce []byte) {
	nonce = make([]byte, b.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return b.aead.Seal(nil, nonce, []byte(secret), secretAAD(tenantID, webhookID)), nonce
}

func (b *secretBox) open(tenantID, webhookID string, ciphertext, nonce []byte) (string, error) {
	if len(nonce) != b.aead.NonceSize() {
		return "", errors.New("bridges: webhook secret nonce has the wrong size")
	}
	pt, err := b.aead.Open(nil, nonce, ciphertext, secretAAD(tenantID, webhookID))
	if err != nil {
		return "", fmt.Errorf("bridges: webhook secret does not decrypt (was the webhook key changed?): %w", err)
	}
	return string(pt), nil
}

// newSecret is a webhook signing secret: 32 random bytes, hex.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Signature is the v1 signature of body at t under secret: hex
// HMAC-SHA256(secret, "<unix t>.<body>"). The HMAC key is the secret
// string exactly as the create response showed it.
func Signature(secret string, t int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(t, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// SignatureHeaderValue is a complete Weft-Signature header for body at t:
// "t=<unix>,v1=<hex>".
func SignatureHeaderValue(secret string, t time.Time, body []byte) string {
	ts := t.Unix()
	return "t=" + strconv.FormatInt(ts, 10) + ",v1=" + Signature(secret, ts, body)
}

// maxSignatureHeader bounds the header parsed (a few v1 values for rotation).
const maxSignatureHeader = 1024

// VerifySignature checks a Weft-Signature header against body: the header
// is "t=<unix>,v1=<hex>" (more v1 entries are allowed, any may match;
// unknown keys are ignored), each v1 is compared in constant time, and an
// authentic signature must be within SignatureTolerance of now.
func VerifySignature(secret, header string, body []byte, now time.Time) error {
	header = strings.TrimSpace(header)
	if header == "" {
		return failure.New(CodeSignatureMissing, "the %s header is required", SignatureHeader)
	}
	malformed := failure.New(CodeSignatureInvalid, "the %s header must be t=<unix seconds>,v1=<hex hmac-sha256>", SignatureHeader)
	if len(header) > maxSignatureHeader {
		return malformed
	}
	var ts int64
	var haveT bool
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return malformed
		}
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || haveT || n <= 0 {
				return malformed
			}
			ts, haveT = n, true
		case "v1":
			b, err := hex.DecodeString(v)
			if err != nil || len(b) != sha256.Size {
				return malformed
			}
			sigs = append(sigs, b)
		}
	}
	if !haveT || len(sigs) == 0 {
		return malformed
	}
	want, _ := hex.DecodeString(Signature(secret, ts, body))
	match := false
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			match = true
		}
	}
	if !match {
		return failure.New(CodeSignatureInvalid, "the %s header does not match the request body", SignatureHeader)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > SignatureTolerance || d < -SignatureTolerance {
		return failure.New(CodeSignatureStale, "the signed timestamp is more than %s from the server's clock", SignatureTolerance).
			WithDetails(map[string]any{"toleranceSeconds": int(SignatureTolerance.Seconds())})
	}
	return nil
}
