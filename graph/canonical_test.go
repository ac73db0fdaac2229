package graph

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type canonSample struct {
	A     string            `json:"a"`
	B     int               `json:"b,omitempty"`
	C     *float64          `json:"c"`
	D     []byte            `json:"d"`
	E     map[int]string    `json:"e"`
	F     float32           `json:"f"`
	G     any               `json:"g"`
	H     [2]uint8          `json:"h"`
	I     json.Number       `json:"i"`
	Skip  string            `json:"-"`
	NoTag bool              // encoding/json uses the field name
	M     map[string]string `json:"m,omitempty"`
	T     time.Time         `json:"t"`
	P     *time.Time        `json:"p"`
}

type canonStringOpt struct {
	N int `json:"n,string"`
}

type canonEmbedded struct {
	canonStringOpt
	X int `json:"x"`
}

// TestCanonicalMatchesReference checks the direct encoder against
// jcs.Transform(json.Marshal(v)), the definition of Canonical.
func TestCanonicalMatchesReference(t *testing.T) {
	f := 1e21
	now := time.Date(2026, 11, 30, 9, 0, 0, 123, time.UTC)
	c, issues := Compile(genGraph(4, 2), testCatalog())
	require.Empty(t, issues)
	values := []any{
		nil, true, 0, math.Copysign(0, -1), 1.5, 1e-7, 1e21, 123456789012345678, uint64(math.MaxUint64), float32(0.1), 9007199254740993,
		"", "plain", "quote\" back\\ \b\f\n\r\t \x01 \x1f \x7f <>& \u2028 é 😀", "bad utf8 \xff\xfe",
		[]any{}, []any{1, "a", nil}, map[string]any{}, []byte("bytes"), []byte(nil), map[string]any(nil),
		map[string]any{"b": 1, "a": 2, "é": 3, "\ue000": 4, "😀": 5, "A": 6, "": 7},
		json.RawMessage(` { "z" : [ 1.0 , 2E3 ] , "a" : "\u00e9" } `), json.Number("1.50"), json.Number(""),
		canonSample{A: "x", C: &f, D: []byte{0, 1}, E: map[int]string{10: "a", 2: "b", -1: "c"}, F: 3.3,
			G: map[string]any{"k": []any{json.Number("2.0")}}, H: [2]uint8{1, 2}, I: "12e2", T: now, P: &now},
		&canonSample{}, canonStringOpt{N: 5}, canonEmbedded{canonStringOpt{7}, 8},
		map[string]canonStringOpt{"x": {1}},
		exampleDocOnce(t), genGraph(3, 1), c, c.Plan(), DryRun(genGraph(2, 0), testCatalog()),
		PinnedAction{ActionContract: ActionContract{ID: "a", Version: 1}, Hash: "h"},
	}
	for i, v := range values {
		want, wantErr := canonicalSlow(v)
		got, err := Canonical(v)
		if wantErr != nil {
			require.Error(t, err, "value %d: %#v", i, v)
			continue
		}
		require.NoError(t, err, "value %d", i)
		require.Equal(t, string(want), string(got), "value %d: %#v", i, v)
	}
	for _, bad := range []any{math.NaN(), math.Inf(1), make(chan int), json.RawMessage(`{"a":1,"a":2}`), json.Number("x")} {
		_, err := Canonical(bad)
		require.Error(t, err, "%#v", bad)
	}
}

func exampleDocOnce(t *testing.T) *Document { return exampleDoc(t) }

func TestCanonical(t *testing.T) {
	a, err := Canonical(map[string]any{"b": 2.0, "a": json.RawMessage(`{"y": 1.0, "x": "\u00e9<"}`)})
	require.NoError(t, err)
	require.Equal(t, `{"a":{"x":"é<","y":1},"b":2}`, string(a))
	require.Equal(t, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", SHA256Hex(nil))
}

// FuzzCanonical compares the direct encoder with the reference on arbitrary
// JSON, decoded generically and (when it decodes) as a Document.
func FuzzCanonical(f *testing.F) {
	f.Add([]byte(`{"b":[1,2.50,"x"],"a":{"\u00e9":null,"😀":true,"\ue000":1e21}}`))
	f.Add([]byte(`"\u0001\"\\"`))
	f.Add([]byte(`-0.0`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var generic any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if dec.Decode(&generic) == nil {
			compareCanonical(t, generic)
		}
		var plain any
		if json.Unmarshal(data, &plain) == nil {
			compareCanonical(t, plain)
		}
		var doc Document
		if json.Unmarshal(data, &doc) == nil {
			compareCanonical(t, doc)
		}
	})
}

func compareCanonical(t *testing.T, v any) {
	t.Helper()
	want, wantErr := canonicalSlow(v)
	got, err := Canonical(v)
	if wantErr != nil {
		if err == nil {
			t.Fatalf("reference failed (%v) but Canonical gave %s", wantErr, got)
		}
		return
	}
	if err != nil {
		t.Fatalf("Canonical failed (%v), reference gave %s", err, want)
	}
	if !bytes.Equal(want, got) {
		t.Fatalf("mismatch\nreference %s\ndirect    %s", want, got)
	}
}
