package graph

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDecodeExample(t *testing.T) {
	doc := exampleDoc(t)
	require.Equal(t, 1, doc.SchemaVersion)
	require.Len(t, doc.Nodes, 4)
	require.Equal(t, 2.0, doc.Nodes[2].Retry.Backoff)
	require.Equal(t, "/in/id", doc.Nodes[2].Mapping["title"].Bindings["item.id"])
}

func TestDecodeErrors(t *testing.T) {
	const head = `{"schemaVersion":1,"nodes":[`
	cases := []struct {
		name, doc, code, path string
	}{
		{"empty", ``, CodeInvalidJSON, ""},
		{"malformed", `{"schemaVersion":1,`, CodeInvalidJSON, ""},
		{"syntax", `{"schemaVersion":1 "nodes":[]}`, CodeInvalidJSON, ""},
		{"trailing data", `{"schemaVersion":1} {}`, CodeInvalidJSON, ""},
		{"trailing garbage", `{"schemaVersion":1}x`, CodeInvalidJSON, ""},
		{"invalid utf8", "{\"schemaVersion\":1,\"tools\":\"\xff\"}", CodeInvalidJSON, ""},
		{"not an object", `[]`, CodeInvalidDocument, ""},
		{"unknown top field", `{"schemaVersion":1,"extra":true}`, CodeInvalidDocument, "/extra"},
		{"case-folded field", `{"SchemaVersion":1}`, CodeInvalidDocument, "/SchemaVersion"},
		{"duplicate key", `{"schemaVersion":1,"schemaVersion":1}`, CodeInvalidDocument, "/schemaVersion"},
		{"duplicate escaped key", `{"schemaVersion":1,"toolsets":{"a\"b":{"tools":[],"skill":"s"},"a\u0022b":{"tools":[],"skill":"s"}}}`, CodeInvalidDocument, "/toolsets/a\"b"},
		{"duplicate key in literal", head + `{"id":"a","kind":"action","mapping":{"x":{"literal":{"k":1,"k":2}}}}]}`, CodeInvalidDocument, "/nodes/0/mapping/x/literal/k"},
		{"missing schemaVersion", `{"nodes":[]}`, CodeInvalidDocument, "/schemaVersion"},
		{"schemaVersion 2", `{"schemaVersion":2}`, CodeInvalidDocument, "/schemaVersion"},
		{"schemaVersion string", `{"schemaVersion":"1"}`, CodeInvalidDocument, "/schemaVersion"},
		{"schemaVersion float", `{"schemaVersion":1.5}`, CodeInvalidDocument, "/schemaVersion"},
		{"nodes not array", `{"schemaVersion":1,"nodes":{}}`, CodeInvalidDocument, "/nodes"},
		{"nodes null", `{"schemaVersion":1,"nodes":null}`, CodeInvalidDocument, "/nodes"},
		{"unknown node field", head + `{"id":"a","kind":"input","color":"red"}]}`, CodeInvalidDocument, "/nodes/0/color"},
		{"id not string", head + `{"id":1,"kind":"input"}]}`, CodeInvalidDocument, "/nodes/0/id"},
		{"port schema not string", head + `{"id":"a","kind":"input","outputs":{"out":1}}]}`, CodeInvalidDocument, "/nodes/0/outputs/out"},
		{"timeout fraction", head + `{"id":"a","kind":"action","timeoutMs":1.5}]}`, CodeInvalidDocument, "/nodes/0/timeoutMs"},
		{"retry null", head + `{"id":"a","kind":"action","retry":null}]}`, CodeInvalidDocument, "/nodes/0/retry"},
		{"backoff string", head + `{"id":"a","kind":"action","retry":{"backoff":"2"}}]}`, CodeInvalidDocument, "/nodes/0/retry/backoff"},
		{"backoff overflow", head + `{"id":"a","kind":"action","retry":{"backoff":1e999}}]}`, CodeInvalidDocument, "/nodes/0/retry/backoff"},
		{"pointer escaped key", head + `{"id":"a","kind":"action","mapping":{"a/b":{"pointer":5}}}]}`, CodeInvalidDocument, "/nodes/0/mapping/a~1b/pointer"},
		{"edge field", `{"schemaVersion":1,"edges":[{"from":"a.b","to":"c.d","label":"x"}]}`, CodeInvalidDocument, "/edges/0/label"},
		{"toolset tools", `{"schemaVersion":1,"toolsets":{"t":{"tools":"core.echo@1","skill":"s"}}}`, CodeInvalidDocument, "/toolsets/t/tools"},
		{"lone surrogate", head + `{"id":"a","kind":"action","mapping":{"x":{"literal":"\ud800"}}}]}`, CodeInvalidJSON, "/nodes/0/mapping/x/literal"},
		{"lone low surrogate key", `{"schemaVersion":1,"schemas":{"\udc00":{}}}`, CodeInvalidJSON, "/schemas"},
		{"number out of range in literal", head + `{"id":"a","kind":"action","mapping":{"x":{"literal":[1e999]}}}]}`, CodeInvalidDocument, "/nodes/0/mapping/x/literal/0"},
		{"too large", `{"schemaVersion":1,"tools":"` + strings.Repeat("a", 1<<20) + `"}`, CodeDocumentTooLarge, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := Decode([]byte(tc.doc))
			require.Nil(t, doc)
			var de *DecodeError
			require.True(t, errors.As(err, &de), "error %v", err)
			require.Equal(t, tc.code, de.Code, de.Error())
			require.Equal(t, tc.path, de.Path, de.Error())
			require.NotEmpty(t, de.Message)
		})
	}
}

func TestDecodeAcceptsSurrogatePairs(t *testing.T) {
	doc, err := Decode([]byte(`{"schemaVersion":1,"tools":"\ud83d\ude00 \u00e9 \n"}`))
	require.NoError(t, err)
	require.Equal(t, "😀 é \n", doc.Tools)
}

func TestDecodeAcceptsDraftWithIssues(t *testing.T) {
	// Well-formed but invalid as a graph: a draft may hold it.
	doc, err := Decode([]byte(`{"schemaVersion":1,"nodes":[{"id":"x","kind":"loop"}],"edges":[{"from":"x","to":"y"}]}`))
	require.NoError(t, err)
	require.NotEmpty(t, Validate(doc, nil))
}

func TestDecodeSizeBoundary(t *testing.T) {
	pad := DefaultLimits.MaxDocumentBytes - len(`{"schemaVersion":1,"tools":""}`)
	doc := `{"schemaVersion":1,"tools":"` + strings.Repeat("a", pad) + `"}`
	require.Len(t, doc, DefaultLimits.MaxDocumentBytes)
	_, err := Decode([]byte(doc))
	require.NoError(t, err)
}

// mutatedDocumentJSON builds a document from fuzz bytes (see docFromBytes),
// marshals it, and damages the text at a few places chosen by the same
// bytes: near-valid input, which exercises every way Decode refuses.
func mutatedDocumentJSON(data []byte) []byte {
	out, err := json.Marshal(docFromBytes(data))
	if err != nil || len(data) == 0 {
		return out
	}
	snippets := []string{`"`, `\`, `\u00`, `\ud800`, `{`, `}`, `[`, `]`, `,`, `:`, `null`, `1e999`, `-0`, ` `, `"x":1,`, `"id":"a",`, `"schemaVersion":1,`, `1.5`}
	r := &byteReader{data: data, pos: len(data) / 2}
	for range 1 + r.next()%3 {
		pos := (r.next()<<8 | r.next()) % (len(out) + 1)
		switch r.next() % 3 {
		case 0: // delete a few bytes
			end := min(len(out), pos+1+r.next()%4)
			out = append(out[:pos:pos], out[end:]...)
		case 1: // insert a snippet
			out = slices.Insert(out, pos, []byte(pick(r, snippets))...)
		case 2: // duplicate a slice of the text
			end := min(len(out), pos+r.next()%32)
			out = slices.Insert(out, pos, slices.Clone(out[pos:end])...)
		}
	}
	return out
}

// TestDecodeEdgeCases pins what Decode makes of the corners of JSON and of
// the Document type: escaped and duplicate names, nulls, integer and float
// ranges, surrogates, whitespace and nesting. An empty code means accepted.
func TestDecodeEdgeCases(t *testing.T) {
	const head = `{"schemaVersion":1,"nodes":[`
	for _, tc := range []struct{ doc, code, path string }{
		{head + `{"id":"a","kind":"validator","schema":null}]}`, "", ""},
		{head + `{"id":"a","kind":"action","mapping":{"x":{"literal":null}}}]}`, "", ""},
		{`{"schemaVersion":1,"schemas":{"A":null,"B":{"a":{"k":1},"b":{"k":1}}}}`, "", ""},
		{`{"schemaVersion":1,"schemas":{"A":{"a":{"k":1,"k":2}}}}`, CodeInvalidDocument, "/schemas/A/a/k"},
		{`{"schemaVersion":1,"schemas":{"A":{"k":1,"\u006b":2}}}`, CodeInvalidDocument, "/schemas/A/k"},
		{head + `{"i\u0064":"a","kind":"input","timeoutMs":-0}]}`, "", ""},
		{head + `{"id":"a","kind":"input","timeoutMs":9223372036854775808}]}`, CodeInvalidDocument, "/nodes/0/timeoutMs"},
		{head + `{"id":"a","kind":"input","timeoutMs":1e2}]}`, CodeInvalidDocument, "/nodes/0/timeoutMs"},
		{head + `{"id":"a","kind":"action","retry":{"backoff":-0.0,"maxAttempts":3}}]}`, "", ""},
		{head + `{"id":"a","kind":"action","retry":{"backoff":1e-400}}]}`, "", ""},
		{head + `{"id":"a","kind":"action","mapping":{"x":{"literal":[` + strings.Repeat("9", 400) + `]}}}]}`, CodeInvalidDocument, "/nodes/0/mapping/x/literal/0"},
		{head + `{"id":"a","kind":"action","mapping":{"x":{"literal":"\ud83d\ude00\ud83d"}}}]}`, CodeInvalidJSON, "/nodes/0/mapping/x/literal"},
		{head + `{"id":"a","kind":"action","mapping":{"x":{"literal":"\\ud800 is not an escape"}}}]}`, "", ""},
		{`{"schemaVersion":1,"toolsets":{"t":{"tools":null,"skill":"s"}}}`, CodeInvalidDocument, "/toolsets/t/tools"},
		{`{"schemaVersion":1,"toolsets":{"t":{"tools":[],"skill":"s"},"t":{"tools":[],"skill":"s"}}}`, CodeInvalidDocument, "/toolsets/t"},
		{`{"schemaVersion":1,"nodes":[],"edges":[],"nodes":[]}`, CodeInvalidDocument, "/nodes"},
		{`{"schemaVersion":1,"nodes":[{"id":"a","Kind":"input"}]}`, CodeInvalidDocument, "/nodes/0/Kind"},
		{"\t{\"schemaVersion\":1}\r\n", "", ""},
		{`{"schemaVersion":1}` + "\x00", CodeInvalidJSON, ""},
		{`null`, CodeInvalidDocument, ""},
		{`{"schemaVersion":1,"schemas":{"A":` + strings.Repeat("[", 205) + strings.Repeat("]", 205) + `}}`, "", ""},
		{`{"schemaVersion":1,"schemas":{"A":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`, CodeInvalidJSON, ""},
	} {
		doc, err := Decode([]byte(tc.doc))
		if tc.code == "" {
			require.NoError(t, err, tc.doc)
			require.NotNil(t, doc)
			continue
		}
		var de *DecodeError
		require.True(t, errors.As(err, &de), "%v: %.200s", err, tc.doc)
		require.Equal(t, tc.code, de.Code, "%s: %.200s", de, tc.doc)
		require.Equal(t, tc.path, de.Path, "%s: %.200s", de, tc.doc)
	}
}
