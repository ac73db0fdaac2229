package bridges

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/starter"
)

func code(err error) string {
	var fe *failure.Error
	if errors.As(err, &fe) {
		return fe.Code
	}
	return ""
}

func TestEffectiveSubtractsRevocations(t *testing.T) {
	t.Parallel()
	got := Effective([]string{"runs.execute", "notes.write", "a", "notes.write"}, []string{"notes.write", "zzz"})
	require.Equal(t, []string{"a", "runs.execute"}, got)
	require.Equal(t, []string{}, Effective(nil, nil))
}

func TestVerifySignature(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	body := []byte(`{"id":"a"}`)
	now := time.Unix(1_800_000_000, 0)
	good := SignatureHeaderValue(secret, now, body)

	// The v1 value is hex HMAC-SHA256(secret, "<t>.<body>"), as SPEC §8 says.
	require.Equal(t, "t=1800000000,v1="+Signature(secret, 1_800_000_000, body), good)
	require.NoError(t, VerifySignature(secret, good, body, now))
	require.NoError(t, VerifySignature(secret, good, body, now.Add(SignatureTolerance)), "the window is inclusive")
	require.NoError(t, VerifySignature(secret, " "+good+" ", body, now))

	other := SignatureHeaderValue("other", now, body)
	rotated := other + ",v1=" + Signature(secret, now.Unix(), body) // any v1 may match
	require.NoError(t, VerifySignature(secret, rotated, body, now))
	require.NoError(t, VerifySignature(secret, good+",v0=ignored", body, now), "unknown keys are ignored")

	cases := []struct {
		name, header string
		body         []byte
		now          time.Time
		code         string
	}{
		{"missing", "", body, now, CodeSignatureMissing},
		{"blank", "   ", body, now, CodeSignatureMissing},
		{"wrong secret", other, body, now, CodeSignatureInvalid},
		{"other body", good, []byte(`{"id":"b"}`), now, CodeSignatureInvalid},
		{"stale", good, body, now.Add(SignatureTolerance + time.Second), CodeSignatureStale},
		{"future", good, body, now.Add(-SignatureTolerance - time.Second), CodeSignatureStale},
		{"no t", "v1=" + Signature(secret, now.Unix(), body), body, now, CodeSignatureInvalid},
		{"no v1", "t=1800000000", body, now, CodeSignatureInvalid},
		{"two t", "t=1,t=2,v1=" + Signature(secret, 1, body), body, now, CodeSignatureInvalid},
		{"bad t", "t=abc,v1=" + Signature(secret, 1, body), body, now, CodeSignatureInvalid},
		{"short v1", "t=1800000000,v1=abcd", body, now, CodeSignatureInvalid},
		{"not hex", "t=1800000000,v1=" + strings.Repeat("z", 64), body, now, CodeSignatureInvalid},
		{"no equals", "garbage", body, now, CodeSignatureInvalid},
		{"huge", "t=1," + strings.Repeat("x=y,", 400), body, now, CodeSignatureInvalid},
	}
	for _, c := range cases {
		require.Equal(t, c.code, code(VerifySignature(secret, c.header, c.body, c.now)), c.name)
	}
	// A stale request with a wrong signature is refused as invalid: only an
	// authentic signature learns that it is stale.
	require.Equal(t, CodeSignatureInvalid, code(VerifySignature(secret, other, body, now.Add(time.Hour))))
}

func TestWebhookKey(t *testing.T) {
	t.Parallel()
	k, err := WebhookKey(strings.Repeat("ab", 32), "ignored")
	require.NoError(t, err)
	require.Equal(t, bytes.Repeat([]byte{0xab}, 32), k)

	_, err = WebhookKey("abcd", "x")
	require.Error(t, err)
	_, err = WebhookKey(strings.Repeat("zz", 32), "x")
	require.Error(t, err)
	_, err = WebhookKey("", "")
	require.Error(t, err)

	// Derived: HKDF-SHA256(JWT secret, no salt, fixed label), documented.
	d1, err := WebhookKey("", "jwt-secret-0123456789")
	require.NoError(t, err)
	want, err := hkdf.Key(sha256.New, []byte("jwt-secret-0123456789"), nil, "weft-webhook-secret-key-v1", 32)
	require.NoError(t, err)
	require.Equal(t, want, d1)
	d2, _ := WebhookKey("", "another-jwt-secret-0123")
	require.NotEqual(t, d1, d2)
}

func TestSecretBoxBindsTenantAndID(t *testing.T) {
	t.Parallel()
	key, _ := hex.DecodeString(strings.Repeat("01", 32))
	box, err := newSecretBox(key)
	require.NoError(t, err)
	secret := newSecret()
	require.Len(t, secret, 64)
	ct, nonce := box.seal("t1", "whk_a", secret)
	require.NotContains(t, string(ct), secret)

	got, err := box.open("t1", "whk_a", ct, nonce)
	require.NoError(t, err)
	require.Equal(t, secret, got)
	_, err = box.open("t2", "whk_a", ct, nonce)
	require.Error(t, err, "another tenant's row")
	_, err = box.open("t1", "whk_b", ct, nonce)
	require.Error(t, err, "another webhook's row")
	other, _ := newSecretBox(bytes.Repeat([]byte{2}, 32))
	_, err = other.open("t1", "whk_a", ct, nonce)
	require.Error(t, err, "another key")
	_, err = newSecretBox([]byte("short"))
	require.Error(t, err)
}

func TestCheckSpec(t *testing.T) {
	t.Parallel()
	spec, tspec, err := checkSpec(ScheduleRequest{Every: " 90s "})
	require.NoError(t, err)
	require.Equal(t, "1m30s", spec.Every)
	require.Equal(t, 90*time.Second, tspec.Intervals[0].Every)

	spec, tspec, err = checkSpec(ScheduleRequest{Cron: "0 12 * * MON"})
	require.NoError(t, err)
	require.Equal(t, "0 12 * * MON", spec.Cron)
	require.Equal(t, []string{"0 12 * * MON"}, tspec.CronExpressions)

	for _, r := range []ScheduleRequest{
		{}, {Cron: "* * * * *", Every: "5s"}, {Every: "500ms"}, {Every: "1500ms"}, {Every: "soon"},
		{Every: "-5s"}, {Cron: strings.Repeat("*", 300)}, {Cron: "* * *\n* *"},
	} {
		_, _, err := checkSpec(r)
		require.Equal(t, failure.CodeInvalidRequest, code(err), "%+v", r)
	}
}

func TestFiringAndDeliveryKeys(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 10, 0, 4, 0, time.FixedZone("x", 3600))
	require.Equal(t, "sch_x@2026-12-01T09:00:04Z", FiringKey("sch_x", at))

	id := newID(webhookPrefix)
	require.Regexp(t, webhookIDPattern, id)
	require.Regexp(t, scheduleIDPattern, newID(schedulePrefix))
	require.Equal(t, id+":evt-1", DeliveryKey(id, "evt-1"))
	long := strings.Repeat("e", MaxEventIDLen)
	k := DeliveryKey(id, long)
	require.LessOrEqual(t, len(k), starter.MaxIdempotencyKeyLen)
	require.True(t, strings.HasPrefix(k, id+":sha256="))
	require.NotEqual(t, k, DeliveryKey(id, long[:MaxEventIDLen-1]+"f"))

	require.NoError(t, checkEventID("evt_1:2"))
	require.NoError(t, checkEventID(long))
	for _, bad := range []string{"", long + "e", "has space", "tab\t", "é"} {
		require.Equal(t, failure.CodeInvalidRequest, code(checkEventID(bad)), "%q", bad)
	}
}

func TestTemporalScheduleIDKeepsTenantsApart(t *testing.T) {
	t.Parallel()
	a := TemporalScheduleID("acme", "sch_1")
	require.Regexp(t, `^weft-sched-[0-9a-f]{16}-sch_1$`, a)
	require.NotEqual(t, a, TemporalScheduleID("globex", "sch_1"))
	require.NotContains(t, a, "acme")
}
