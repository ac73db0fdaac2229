package jsonstrict_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/jsonstrict"
)

type inner struct {
	N int `json:"n"`
}

type base struct {
	Shared string `json:"shared"`
}

type target struct {
	base
	Key      string            `json:"key" required:"true"`
	Count    int               `json:"count"`
	Small    int8              `json:"small"`
	Ratio    float64           `json:"ratio"`
	On       bool              `json:"on"`
	Tags     []string          `json:"tags"`
	Labels   map[string]string `json:"labels"`
	Inner    *inner            `json:"inner"`
	Raw      json.RawMessage   `json:"raw"`
	Anything any               `json:"anything"`
	Untagged string
}

func TestDecodeAcceptsWhatFits(t *testing.T) {
	t.Parallel()
	var got target
	err := jsonstrict.Decode([]byte(`{"key":"k","shared":"s","count":3,"small":-4,"ratio":1.5,"on":true,"tags":["a"],
		"labels":{"x":"y"},"inner":{"n":2},"raw":{"free":[1,{"a":null}]},"anything":[true],"Untagged":"u"}`), &got, jsonstrict.Options{})
	require.NoError(t, err)
	require.Equal(t, target{base: base{Shared: "s"}, Key: "k", Count: 3, Small: -4, Ratio: 1.5, On: true, Tags: []string{"a"},
		Labels: map[string]string{"x": "y"}, Inner: &inner{N: 2}, Raw: json.RawMessage(`{"free":[1,{"a":null}]}`),
		Anything: []any{true}, Untagged: "u"}, got)
}

func TestDecodeRefusesWhatEncodingJSONLetsThrough(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body string
		syntax     bool
		path       []string
		message    string
	}{
		{"not JSON", `{"key":`, true, nil, "unexpected end of JSON input (at byte 7)"},
		{"trailing garbage", `{"key":"k"} x`, true, nil, "invalid character 'x' after top-level value (at byte 13)"},
		{"not UTF-8", "{\"key\":\"\xff\"}", true, nil, "not valid UTF-8"},
		{"not an object", `[1]`, false, nil, "must be an object"},
		{"duplicate key", `{"key":"k","key":"k"}`, false, []string{"key"}, `duplicate key "key"`},
		{"duplicate key in free form", `{"key":"k","raw":{"a":1,"a":2}}`, false, []string{"raw", "a"}, `duplicate key "a"`},
		{"unknown field", `{"key":"k","extra":1}`, false, []string{"extra"}, `unknown field "extra"`},
		{"case-folded name", `{"Key":"k"}`, false, []string{"Key"}, `unknown field "Key" (field names are case-sensitive: did you mean "key"?)`},
		{"wrong type", `{"key":1}`, false, []string{"key"}, "must be a string"},
		{"float for an integer", `{"key":"k","count":1.0}`, false, []string{"count"}, "must be an integer, got 1.0"},
		{"exponent for an integer", `{"key":"k","count":1e0}`, false, []string{"count"}, "must be an integer, got 1e0"},
		{"string for an integer", `{"key":"k","count":"1"}`, false, []string{"count"}, "must be an integer"},
		{"integer out of range", `{"key":"k","small":300}`, false, []string{"small"}, "must be an integer, got 300"},
		{"number out of range", `{"key":"k","ratio":1e999}`, false, []string{"ratio"}, "number 1e999 is out of range"},
		{"null", `{"key":"k","count":null}`, false, []string{"count"}, "must not be null"},
		{"nested", `{"key":"k","inner":{"n":"x"}}`, false, []string{"inner", "n"}, "must be an integer"},
		{"element", `{"key":"k","tags":["a",2]}`, false, []string{"tags", "1"}, "must be a string"},
		{"missing required", `{"count":1}`, false, []string{"key"}, "key is required"},
		{"unpaired surrogate", `{"key":"\ud800"}`, true, []string{"key"}, "string holds an unpaired UTF-16 surrogate escape"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got target
			err := jsonstrict.Decode([]byte(tc.body), &got, jsonstrict.Options{})
			var se *jsonstrict.Error
			require.True(t, errors.As(err, &se), "%v", err)
			require.Equal(t, tc.syntax, se.Syntax)
			require.Equal(t, tc.path, se.Path)
			require.Equal(t, tc.message, se.Message)
		})
	}
}

func TestNullIsAbsent(t *testing.T) {
	t.Parallel()
	var got target
	require.NoError(t, jsonstrict.Decode([]byte(`{"key":"k","count":null,"inner":null,"tags":null}`), &got,
		jsonstrict.Options{NullIsAbsent: true}))
	require.Equal(t, target{Key: "k"}, got)

	// A required member given as null is absent, so it is missing.
	err := jsonstrict.Decode([]byte(`{"key":null}`), &got, jsonstrict.Options{NullIsAbsent: true})
	var se *jsonstrict.Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, "key", se.Field())
	require.Equal(t, "key is required", se.Message)
}

func TestDecodeNeedsAPointer(t *testing.T) {
	t.Parallel()
	var got target
	require.Error(t, jsonstrict.Decode([]byte(`{}`), got, jsonstrict.Options{}))
	require.Error(t, jsonstrict.Decode([]byte(`{}`), (*target)(nil), jsonstrict.Options{}))
}

// Whatever the bytes, Decode returns (never panics), and what it accepts
// encoding/json reads the same way: strictness only ever refuses.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"key":"k"}`, `{"key":"k","raw":{"a":[1,2]}}`, `{"key":"\ud83d\ude00"}`, `[]`, `{"key":"k","key":"k"}`, `nul`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var strict target
		if err := jsonstrict.Decode(data, &strict, jsonstrict.Options{}); err != nil {
			var se *jsonstrict.Error
			require.ErrorAs(t, err, &se, "not a *jsonstrict.Error: %v", err)
			return
		}
		var loose target
		require.NoError(t, json.Unmarshal(data, &loose), "strictly accepted, loosely refused")
		a, _ := json.Marshal(strict)
		b, _ := json.Marshal(loose)
		require.JSONEq(t, string(b), string(a))
	})
}
