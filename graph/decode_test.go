package graph

import (
	"errors"
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
