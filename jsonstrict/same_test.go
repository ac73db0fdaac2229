package jsonstrict

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type walkInner struct {
	N   int      `json:"n" required:"true"`
	U   uint16   `json:"u"`
	Ptr *float32 `json:"ptr"`
}

type walkBase struct {
	Shared string `json:"shared"`
}

// walkText is a json.Unmarshaler: free-form to the checker.
type walkText struct{ raw []byte }

func (w *walkText) UnmarshalJSON(b []byte) error { w.raw = append(w.raw[:0], b...); return nil }

type walkTarget struct {
	walkBase
	Key     string                 `json:"key" required:"true"`
	Count   int                    `json:"count"`
	Small   int8                   `json:"small"`
	Big     uint64                 `json:"big"`
	Ratio   float64                `json:"ratio"`
	On      bool                   `json:"on"`
	Tags    []string               `json:"tags"`
	Pair    [2]int                 `json:"pair"`
	Labels  map[string]string      `json:"labels"`
	ByID    map[int]string         `json:"byID"`
	Nested  map[string][]walkInner `json:"nested"`
	Inner   *walkInner             `json:"inner"`
	Raw     json.RawMessage        `json:"raw"`
	RawPtr  *json.RawMessage       `json:"rawPtr"`
	Any     any                    `json:"any"`
	Text    walkText               `json:"text"`
	Complex complex128             `json:"complex"`
	Plain   string
}

var walkSeeds = []string{
	`{"key":"k"}`, `{"key":"k","raw":{"a":[1,2]}}`, `{"key":"\ud83d\ude00"}`, `[]`, `{"key":"k","key":"k"}`, `nul`,
	`{"key":"k","shared":"s","count":3,"small":-4,"big":18446744073709551615,"ratio":1.5,"on":true,"tags":["a"],"pair":[1,2],
	 "labels":{"x":"y"},"byID":{"1":"a"},"nested":{"a":[{"n":1,"u":2,"ptr":1.5}]},"inner":{"n":2},"raw":{"free":[1,{"a":null}]},
	 "rawPtr":[1e3],"any":[true,{"b":"c"}],"text":{"t":1},"Plain":"u"}`,
	`{"key":"k","complex":1}`, `{"key":"k","byID":{}}`, `{"key":"k","inner":{"u":-1}}`, `{"key":"k","inner":{"n":1,"n":2}}`,
	`{"key":"k","raw":{"a":1,"a":2}}`, `{"Key":"k"}`, `{"KEY":"k","extra":1}`, `{"key":"k","count":1.0}`, `{"key":"k","ratio":1e999}`,
	`{"key":"k","any":-1e400}`, `{"key":"\ud800"}`, `{"\udc00":1}`, `{"key":"k","labels":{"\ud800x":"y"}}`, `{"key":"k","text":"\udfff"}`,
	`{"key":"k","tags":["a",2]}`, `{"key":"k","tags":null}`, `{"key":null}`, `{"key":"k","inner":null}`, `{"key":"k","rawPtr":null}`,
	`{"key":"k"} x`, `{"key":"k"} {}`, "{\"key\":\"\xff\"}", `{"key":"k","count":"1"}`, `{"count":1,"key":1} [`,
	`{"key":"k","raw":{"\u0061":1,"a":2}}`, `{"\ufffd":1,"\ud800":2}`, `{"key":"k","nested":{"a":[{"u":1}]}}`,
	`{"key":"k","pair":[1,"x"]}`, `{"key":"k","on":"true"}`, `{"key":"k","small":300}`, "\ufeff{}", ` {"key" : "k" } `,
	`{"key":"k","raw":{"a":{"b":{"c":[1,{"d":"\ud83d"}]}}}}`, `{"key":"k","labels":{"x":"y","x":"z"}}`,
}

// FuzzSameAsTokenWalk holds Check to the encoding/json token walk it
// replaced: for any text, type and options, the same verdict, syntax flag,
// path, offset and message.
func FuzzSameAsTokenWalk(f *testing.F) {
	for _, s := range walkSeeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Add([]byte(strings.Repeat("[", 10000)+strings.Repeat("]", 10000)), false)
	f.Add([]byte(strings.Repeat("[", 10001)+strings.Repeat("]", 10001)), false)
	types := []reflect.Type{reflect.TypeFor[walkTarget](), reflect.TypeFor[any](), reflect.TypeFor[[]walkInner](),
		reflect.TypeFor[map[string]*walkTarget](), reflect.TypeFor[json.RawMessage]()}
	f.Fuzz(func(t *testing.T, data []byte, nullIsAbsent bool) {
		for _, typ := range types {
			opt := Options{NullIsAbsent: nullIsAbsent}
			require.Equal(t, tokenWalkCheck(data, typ, opt), Check(data, typ, opt), "%s %s", typ, data)
		}
	})
}
