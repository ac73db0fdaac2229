package graph

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCanonical(t *testing.T) {
	a, err := Canonical(map[string]any{"b": 2.0, "a": json.RawMessage(`{"y": 1.0, "x": "\u00e9<"}`)})
	require.NoError(t, err)
	require.Equal(t, `{"a":{"x":"é<","y":1},"b":2}`, string(a))
	require.Equal(t, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", SHA256Hex(nil))
}

// TestCanonicalForms pins RFC 8785's rules on the values weft hashes:
// numbers in ECMAScript form, keys in UTF-16 order, minimal escapes, and
// what encoding/json makes of Go values first.
func TestCanonicalForms(t *testing.T) {
	when := time.Date(2026, 11, 30, 9, 0, 0, 123, time.UTC)
	for _, tc := range []struct {
		v    any
		want string
	}{
		{nil, `null`},
		{[]any{0, math.Copysign(0, -1), 1.5, 1e-7, 1e21, 123456789012345678, 9007199254740993, float32(0.1), json.Number("1.50"), json.Number("12e2")},
			`[0,0,1.5,1e-7,1e+21,123456789012345680,9007199254740992,0.1,1.5,1200]`},
		{"quote\" back\\ \b\f\n\r\t \x01 \x1f \x7f <>& \u2028 é 😀", `"quote\" back\\ \b\f\n\r\t \u0001 \u001f ` + "\x7f" + ` <>& ` + "\u2028" + ` é 😀"`},
		{"bad utf8 \xff", `"bad utf8 ` + "\uFFFD" + `"`},
		{map[string]any{"b": 1, "a": 2, "é": 3, "\ue000": 4, "😀": 5, "A": 6, "": 7}, `{"":7,"A":6,"a":2,"b":1,"é":3,"😀":5,"` + "\ue000" + `":4}`},
		{json.RawMessage(` { "z" : [ 1.0 , 2E3 ] , "a" : "\u00e9\/" } `), `{"a":"é/","z":[1,2000]}`},
		{[]byte("bytes"), `"Ynl0ZXM="`},
		{map[int]string{10: "a", 2: "b", -1: "c"}, `{"-1":"c","10":"a","2":"b"}`},
		{struct {
			B    int        `json:"b,omitempty"`
			A    string     `json:"a"`
			Skip string     `json:"-"`
			T    time.Time  `json:"t"`
			P    *time.Time `json:"p"`
		}{A: "x", Skip: "y", T: when}, `{"a":"x","p":null,"t":"2026-11-30T09:00:00.000000123Z"}`},
		{PinnedAction{ActionContract: ActionContract{ID: "a", Version: 1}, Hash: "h"},
			`{"hash":"h","id":"a","idempotency":"","inputSchema":null,"outputSchema":null,"requiredPermissions":null,"risk":"","timeoutMs":0,"version":1}`},
	} {
		got, err := Canonical(tc.v)
		require.NoError(t, err, "%#v", tc.v)
		require.Equal(t, tc.want, string(got), "%#v", tc.v)
	}
	for _, bad := range []any{math.NaN(), math.Inf(1), make(chan int), json.RawMessage(`{"a":1,"a":2}`), json.RawMessage(`"\ud800"`), json.Number("x")} {
		_, err := Canonical(bad)
		require.Error(t, err, "%#v", bad)
	}
}

// FuzzCanonical checks that the canonical form of arbitrary JSON depends on
// its content only: the same value with its object members in another
// order, its strings escaped otherwise and other whitespace canonicalizes to
// the same bytes, and the canonical form is its own canonical form.
func FuzzCanonical(f *testing.F) {
	f.Add([]byte(`{"b":[1,2.50,"x"],"a":{"\u00e9":null,"😀":true,"\ue000":1e21}}`))
	f.Add([]byte(`"\u0001\"\\<>"`))
	f.Add([]byte(`[-0.0, 1E400, 9007199254740993, {"":{"":""}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		want, err := Canonical(json.RawMessage(data))
		if err != nil {
			return
		}
		v, err := DecodeValue(want)
		require.NoError(t, err, "canonical form %s does not decode", want)
		again, err := Canonical(json.RawMessage(want))
		require.NoError(t, err, "canonical form is not canonical: %s -> %s (%v)", want, again, err)
		require.Equal(t, want, again, "canonical form is not canonical: %s -> %s (%v)", want, again, err)
		var reordered bytes.Buffer
		writeShuffled(&reordered, fuzzRand(data), v)
		got, err := Canonical(json.RawMessage(reordered.Bytes()))
		require.NoError(t, err, "reordered %s canonicalizes to %s (%v), not %s", reordered.Bytes(), got, err, want)
		require.Equal(t, want, got, "reordered %s canonicalizes to %s (%v), not %s", reordered.Bytes(), got, err, want)
	})
}

// TestCanonicalNumbersKeepTheirValue checks numbers of every magnitude
// survive canonicalization as the same float64.
func TestCanonicalNumbersKeepTheirValue(t *testing.T) {
	for _, f := range []float64{0, 1, -1, 0.1, 1e-7, 1e21, 1e308, 5e-324, 123456.789, math.MaxInt64, 1 << 53} {
		b, err := Canonical(f)
		require.NoError(t, err)
		back, err := strconv.ParseFloat(string(b), 64)
		require.NoError(t, err)
		require.Equal(t, f, back, string(b))
	}
}
