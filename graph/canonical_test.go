package graph

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
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

// reflectiveCanonical is Canonical without the typed encoders of
// canonical_types.go.
func reflectiveCanonical(v any) ([]byte, error) {
	var e canonEncoder
	err := e.value(reflect.ValueOf(v))
	return e.buf, err
}

// requireSameCanonical checks the typed encoder (through Canonical) against
// the reflective encoder and the reference definition.
func requireSameCanonical(t testing.TB, v any) {
	t.Helper()
	var e canonEncoder
	typed, err := e.canonicalTyped(v)
	if !typed {
		t.Fatalf("%T has no typed encoder", v)
	}
	refl, reflErr := reflectiveCanonical(v)
	want, wantErr := canonicalSlow(v)
	if (err != nil) != (wantErr != nil) || (reflErr != nil) != (wantErr != nil) {
		t.Fatalf("%T: typed err %v, reflective err %v, reference err %v", v, err, reflErr, wantErr)
	}
	if wantErr != nil {
		return
	}
	if !bytes.Equal(e.buf, want) || !bytes.Equal(refl, want) {
		t.Fatalf("%T mismatch\nreference  %s\ntyped      %s\nreflective %s", v, want, e.buf, refl)
	}
	// hashOf streams the same text into the hash in pieces.
	if h, err := hashOf(v); err != nil || h != SHA256Hex(want) {
		t.Fatalf("%T: hashOf = %s, %v; want %s", v, h, err, SHA256Hex(want))
	}
}

func TestCanonicalTypesMatchReflective(t *testing.T) {
	f64 := func(f float64) *Retry { return &Retry{Backoff: f, MaxAttempts: 2} }
	str := func(s string) *string { return &s }
	docs := []*Document{
		genGraph(66, 3), genGraph(0, 0), exampleDoc(t), {}, {Nodes: []Node{}, Edges: []Edge{}},
		{SchemaVersion: 1 << 60, Schemas: map[string]json.RawMessage{"n": nil, "a": json.RawMessage(` [1.0, {"b":1,"a":"\u00e9"}] `), "é": json.RawMessage(`{}`), "😀": json.RawMessage(`1`), "\ue000": json.RawMessage(`2`)},
			Toolsets: map[string]Toolset{"t": {}, "u": {Tools: []string{"x", "quote\"\x01"}, Skill: "s\n", Summary: "one \"line\" \u2028"}}, Tools: "bad \xff utf8"},
		{Nodes: []Node{
			{ID: "a", Retry: f64(math.Copysign(0, -1))},
			{ID: "b", Retry: f64(1.5), TimeoutMs: -1 << 62, Schema: json.RawMessage(`"Item"`), Agent: &AgentRef{}, Action: &ActionRef{ID: "x", Version: 1 << 55}},
			{ID: "c", Mapping: map[string]Mapping{"": {}, "p": {Pointer: str(""), Template: str("t"), Bindings: map[string]string{}, Literal: json.RawMessage(`null`)}}, Inputs: map[string]string{}, Outputs: map[string]string{"b": "", "a": "x"}},
		}},
		{Schemas: map[string]json.RawMessage{"x": json.RawMessage(`{"a":1,"a":2}`)}},
		{Schemas: map[string]json.RawMessage{"x": json.RawMessage(``)}},
		{Schemas: map[string]json.RawMessage{"x": json.RawMessage(`nope`)}},
		{Nodes: []Node{{Retry: f64(math.NaN())}}},
		{Nodes: []Node{{Retry: f64(math.Inf(-1))}}},
	}
	for seed := range 300 {
		data := make([]byte, 64)
		for i := range data {
			data[i] = byte(seed*31 + i*i*7 + seed*i)
		}
		docs = append(docs, docFromBytes(data))
	}
	for _, d := range docs {
		requireSameCanonical(t, *d)
		requireSameCanonical(t, d)
		if c, issues := Compile(d, testCatalog()); len(issues) == 0 {
			requireSameCanonical(t, checksumContent{c.Document, c.Actions, c.Agents})
		}
	}
	requireSameCanonical(t, (*Document)(nil))
	requireSameCanonical(t, checksumContent{})
	for _, c := range []ActionContract{{}, testCatalog().actions[ActionRef{"workspace.notes.write", 1}],
		{ID: "x", Description: "d", InputSchema: json.RawMessage(`{"b":[],"a":-0}`), RequiredPermissions: []string{}, TimeoutMs: 1 << 54}} {
		requireSameCanonical(t, c)
		requireSameCanonical(t, PinnedAction{ActionContract: c})
		requireSameCanonical(t, PinnedAction{ActionContract: c, Hash: "h"})
	}
	for _, c := range []AgentContract{{}, {Key: "k", Revision: 3, Archived: true, OutputSchema: json.RawMessage(`true`), AllowedTools: []string{"a@1"}, RequiredPermissions: []string{"p"}, Hash: "h"},
		{Key: "s", Revision: 1, Hash: "h", Skills: []PinnedSkill{{Key: "style", Revision: 2, Hash: "abc"}, {Key: "\"q\"", Revision: 1 << 40}}}} {
		requireSameCanonical(t, c)
	}
}

// FuzzCanonicalRaw compares the direct canonicalization of raw JSON text
// with jcs.Transform on arbitrary bytes: the same output, or both fail.
func FuzzCanonicalRaw(f *testing.F) {
	for _, s := range []string{
		` { "z" : [ 1.0 , 2E3, -0, -0.0, 1e21, 123456789012345, 1234567890123456, 0.1e-6 ] , "a" : "\u00e9\ud83d\ude00\/\b" } `,
		`{"b":1,"a":2,"b":3}`, `"\ud800"`, `"\udc00\ud800"`, `[[[[]]]]`, `{"":{"":""}}`, `1 2`, `tru`, `"\u0000\u001f\u007f"`,
		`{"é":1,"\ue000":2,"😀":3}`, "\"\xff\"", `[1,]`, `{"a":1,}`, `-`, `01`, `1.`, `1e`, `1e+`, `9007199254740993`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantErr := jcs.Transform(data)
		var e canonEncoder
		err := e.raw(data)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("raw err %v, reference err %v", err, wantErr)
		}
		if err == nil && !bytes.Equal(e.buf, want) {
			t.Fatalf("mismatch\nreference %s\ndirect    %s", want, e.buf)
		}
		// The direct path must take valid JSON itself (so the fast path is
		// what runs), except where the reference rejects it.
		if json.Valid(data) && wantErr == nil && len(data) < 4096 {
			r := rawCanon{src: data, e: &canonEncoder{}}
			r.ws()
			ok := r.value()
			r.ws()
			if !ok || r.pos != len(data) {
				if bytes.Count(data, []byte("["))+bytes.Count(data, []byte("{")) <= rawMaxDepth {
					t.Fatalf("valid JSON took the reference route: %q", data)
				}
			}
		}
	})
}
