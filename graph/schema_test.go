package graph

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCompileSchemaAndValidate(t *testing.T) {
	s, err := CompileSchema(json.RawMessage(`{"type":"object","required":["id"],"properties":{"id":{"type":"string"}},"$defs":{"x":{}},"additionalProperties":{"$ref":"#/$defs/x"}}`))
	require.NoError(t, err)
	require.NoError(t, ValidateValue(s, json.RawMessage(`{"id":"a","n":12345678901234567890}`)))
	require.Error(t, ValidateValue(s, json.RawMessage(`{"id":1}`)))
	require.Error(t, ValidateValue(s, json.RawMessage(`{`)))

	for _, bad := range []string{``, `{`, `{"type":"nope"}`, `{"$ref":"other.json"}`, `{"$ref":"file:///etc/passwd"}`, `{"$schema":"https://example.com/meta"}`} {
		_, err := CompileSchema(json.RawMessage(bad))
		require.Error(t, err, bad)
	}
}

func TestDocumentSchemaHelpers(t *testing.T) {
	doc := exampleDoc(t)
	in, ok := doc.InputNode()
	require.True(t, ok)
	require.Equal(t, "in", in.ID)
	raw, ok := doc.SchemaByName(in.Outputs["out"])
	require.True(t, ok)
	require.JSONEq(t, string(doc.Schemas["Item"]), string(raw))
	anyRaw, ok := doc.SchemaByName(AnySchema)
	require.True(t, ok)
	s, err := CompileSchema(anyRaw)
	require.NoError(t, err)
	require.NoError(t, ValidateValue(s, json.RawMessage(`[1]`)))

	named, err := doc.ValidatorSchema(Node{Schema: json.RawMessage(`"Item"`)})
	require.NoError(t, err)
	require.Equal(t, doc.Schemas["Item"], named)
	inline, err := doc.ValidatorSchema(Node{Schema: json.RawMessage(` {"type":"string"}`)})
	require.NoError(t, err)
	require.Equal(t, json.RawMessage(`{"type":"string"}`), inline)
	_, err = doc.ValidatorSchema(Node{Schema: json.RawMessage(`"Nope"`)})
	require.Error(t, err)
	_, err = doc.ValidatorSchema(Node{Schema: json.RawMessage(`[]`)})
	require.Error(t, err)
}

func TestParsePointer(t *testing.T) {
	cases := map[string][]string{
		"":          nil,
		"/in":       {"in"},
		"/in/a~1b":  {"in", "a/b"},
		"/in/~0~1":  {"in", "~/"},
		"/in//x":    {"in", "", "x"},
		"/in/0/id/": {"in", "0", "id", ""},
	}
	for p, want := range cases {
		got, err := ParsePointer(p)
		require.NoError(t, err, p)
		require.Equal(t, want, got, p)
	}
	for _, bad := range []string{"in", "/in/~", "/in/~2", "#/in"} {
		_, err := ParsePointer(bad)
		require.Error(t, err, bad)
	}
}

func TestReferences(t *testing.T) {
	doc := exampleDoc(t)
	doc.Nodes = append(doc.Nodes, doc.Nodes[2], agentNode("a1"), agentNode("a2"))
	doc.Toolsets = map[string]Toolset{"t": {Tools: []string{"core.echo@1", "bad", "workspace.notes.write@1"}}}
	actions, agents := References(doc)
	require.Equal(t, []ActionRef{{"core.echo", 1}, {"workspace.notes.write", 1}}, actions)
	require.Equal(t, []AgentRef{{"triage", 2}}, agents)

	actions, agents = References(nil)
	require.Empty(t, actions)
	require.Empty(t, agents)
}

func TestParseActionRef(t *testing.T) {
	r, err := ParseActionRef("core.echo@1")
	require.NoError(t, err)
	require.Equal(t, ActionRef{ID: "core.echo", Version: 1}, r)
	require.Equal(t, "core.echo@1", r.String())
	for _, bad := range []string{"core.echo", "@1", "core.echo@0", "core.echo@01", "core.echo@x", "core.echo@-1"} {
		_, err := ParseActionRef(bad)
		require.Error(t, err, bad)
	}
}

func TestResolvePointer(t *testing.T) {
	var v any
	require.NoError(t, json.Unmarshal([]byte(`{"id":"a","list":[10,{"x":null}],"a/b":1,"":2}`), &v))
	cases := []struct {
		p    string
		want any
		ok   bool
	}{
		{"", v, true},
		{"/id", "a", true},
		{"/list/0", 10.0, true},
		{"/list/1/x", nil, true},
		{"/a~1b", 1.0, true},
		{"/", 2.0, true},
		{"/missing", nil, false},
		{"/list/2", nil, false},
		{"/list/-", nil, false},
		{"/list/01", nil, false},
		{"/list/+1", nil, false},
		{"/list/-1", nil, false},
		{"/id/0", nil, false},
	}
	for _, tc := range cases {
		toks, err := ParsePointer(tc.p)
		require.NoError(t, err)
		got, ok := ResolvePointer(v, toks)
		require.Equal(t, tc.ok, ok, tc.p)
		require.Equal(t, tc.want, got, tc.p)
	}
}

// TestSchemaErrorsListEveryViolation covers the keywords of the tool input
// subset (SPEC §7: type, enum, required, properties, additionalProperties,
// items), which the agent harness checks with SchemaErrors before a tool
// runs, and the limit on what is listed.
func TestSchemaErrorsListEveryViolation(t *testing.T) {
	schema, err := CompileSchema(json.RawMessage(`{"type":"object","required":["title","tags"],"additionalProperties":false,
		"properties":{"title":{"type":"string"},"n":{"type":["integer","null"]},"kind":{"enum":["a","b"]},
		"tags":{"type":"array","items":{"type":"string"}},"meta":{"type":"object","additionalProperties":{"type":"number"}}}}`))
	require.NoError(t, err)
	for _, tc := range []struct {
		input string
		want  []string // path keyword
	}{
		{`{"title":"x","tags":[]}`, nil},
		{`{"title":"x","tags":["a"],"n":3,"kind":"b","meta":{"w":1.5}}`, nil},
		{`{"title":"x","tags":[],"n":null,"m~/":{}}`, []string{" /additionalProperties"}},
		{`{"tags":[]}`, []string{" /required"}},
		{`{"title":1,"tags":[2],"n":1.5,"kind":"c","tenantId":"t2","meta":{"w":"x"}}`, []string{
			" /additionalProperties", "/kind /enum", "/meta/w /type", "/n /type", "/tags/0 /type", "/title /type"}},
		{`[1]`, []string{" /type"}},
		{`1e3`, []string{" /type"}},
	} {
		errs, err := SchemaErrors(schema, json.RawMessage(tc.input), 20)
		require.NoError(t, err, tc.input)
		var got []string
		for _, e := range errs {
			require.NotEmpty(t, e.Message)
			got = append(got, e.Path+" "+e.Keyword)
		}
		require.ElementsMatch(t, tc.want, got, tc.input)
	}
	errs, err := SchemaErrors(schema, json.RawMessage(`{"title":1,"tags":[2],"n":1.5,"kind":"c"}`), 2)
	require.NoError(t, err)
	require.Len(t, errs, 2)
	_, err = SchemaErrors(schema, json.RawMessage(`{"title":"x","tags":[]} {}`), 20)
	require.Error(t, err, "more than one value is not JSON")
}
