package graphyaml

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/graph"
)

// exampleYAML is testdata/example.json (the SPEC §2 example) written as
// YAML, with its keys and nodes in another order and comments.
const exampleYAML = `# The SPEC example, in YAML.
schemaVersion: 1
edges:
  - {from: in.out, to: check.in}
  - from: check.pass
    to: save.in
  - from: save.out
    to: out.in
schemas:
  Item:
    type: object
    required: [id]
    properties:
      id: {type: string}
nodes:
  - id: in
    kind: input
    outputs: {out: Item}
  - id: check
    kind: gate
    inputs: {in: Item}
    outputs: {pass: Item, fail: Item}
    language: cel/v1
    expression: "input.id != ''"
  - id: save
    kind: action
    inputs: {in: Item}
    outputs: {out: any}
    action: {id: workspace.notes.write, version: 1}
    mapping:
      title:
        template: "Item {{ item.id }}"
        bindings: {item.id: /in/id}
      body: {pointer: /in}
    retry: {maxAttempts: 3, initialIntervalMs: 1000, backoff: 2.0}
    timeoutMs: 30000
  - id: out
    kind: output
    inputs: {in: any}
`

func TestYAMLDecodesLikeJSON(t *testing.T) {
	y, err := ParseYAML([]byte(exampleYAML))
	require.NoError(t, err)
	requireSameDocument(t, exampleDoc(t), y.Document)

	// The JSON form decodes to the same document and keeps the source order.
	again, err := graph.Decode(y.JSON)
	require.NoError(t, err)
	requireSameDocument(t, y.Document, again)
	require.True(t, strings.HasPrefix(string(y.JSON), `{"schemaVersion":1,"edges":[{"from":"in.out"`), "%s", y.JSON)

	// The same graph.graph has the same checksum in either syntax.
	fromJSON, err := graph.Canonical(exampleDoc(t))
	require.NoError(t, err)
	fromYAML, err := graph.Canonical(y.Document)
	require.NoError(t, err)
	require.Equal(t, string(fromJSON), string(fromYAML))
}

func TestYAMLJSONIsYAML(t *testing.T) {
	// A JSON document is a YAML document; both decoders agree on it.
	doc, err := DecodeYAML(exampleJSON(t))
	require.NoError(t, err)
	requireSameDocument(t, exampleDoc(t), doc)
}

// requireSameDocument compares documents as JSON (raw values such as
// schemas keep their source spacing in a graph.Document).
func requireSameDocument(t *testing.T, want, got *graph.Document) {
	t.Helper()
	a, err := json.Marshal(want)
	require.NoError(t, err)
	b, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(a), string(b))
}

func TestYAMLScalarsFollowTheCoreSchema(t *testing.T) {
	src := `schemaVersion: 1
nodes:
  - id: save
    kind: action
    mapping:
      a: {literal: yes}
      b: {literal: on}
      c: {literal: 0x1F}
      d: {literal: 0o17}
      e: {literal: 1e3}
      f: {literal: .5}
      g: {literal: +1}
      h: {literal: 2001-12-14}
      i: {literal: ~}
      j: {literal: "0x1F"}
      k: {literal: 1_000}
      l: {literal: True}
      m: {literal: -0.0}
      "n":
        literal: |
          two
          lines
      o: {literal: 3.}
      p: {literal: [1, "a", {x: null}]}
      q: {literal: 12345678901234567890123}
      r: {literal: "<&>"}
edges: []
`
	doc, err := DecodeYAML([]byte(src))
	require.NoError(t, err)
	got := map[string]string{}
	for k, m := range doc.Nodes[0].Mapping {
		got[k] = string(m.Literal)
	}
	require.Equal(t, map[string]string{
		"a": `"yes"`, "b": `"on"`, "c": `31`, "d": `15`, "e": `1e3`, "f": `0.5`, "g": `1`,
		"h": `"2001-12-14"`, "i": `null`, "j": `"0x1F"`, "k": `"1_000"`, "l": `true`, "m": `-0.0`,
		"n": `"two\nlines\n"`, "o": `3`, "p": `[1,"a",{"x":null}]`, "q": `12345678901234567890123`, "r": `"<&>"`,
	}, got)
}

func TestYAMLDecodeErrorsCarryPositions(t *testing.T) {
	cases := []struct {
		name, src, code, path string
		line, col             int
	}{
		{"unknown field", "schemaVersion: 1\nnodes:\n  - id: a\n    kind: input\n    shell: rm -rf\nedges: []\n", graph.CodeInvalidDocument, "/nodes/0/shell", 5, 5},
		{"wrong type", "schemaVersion: 1\nnodes:\n  - id: a\n    kind: action\n    timeoutMs: soon\nedges: []\n", graph.CodeInvalidDocument, "/nodes/0/timeoutMs", 5, 5},
		{"fractional int", "schemaVersion: 1\nnodes:\n  - id: a\n    timeoutMs: 1.5\nedges: []\n", graph.CodeInvalidDocument, "/nodes/0/timeoutMs", 4, 5},
		{"string where list", "schemaVersion: 1\nnodes: none\nedges: []\n", graph.CodeInvalidDocument, "/nodes", 2, 1},
		{"null value", "schemaVersion: 1\nnodes:\nedges: []\n", graph.CodeInvalidDocument, "/nodes", 2, 1},
		{"schemaVersion 2", "schemaVersion: 2\nnodes: []\nedges: []\n", graph.CodeInvalidDocument, "/schemaVersion", 1, 1},
		{"duplicate key", "schemaVersion: 1\nnodes: []\nnodes: []\n", CodeInvalidYAML, "", 3, 1},
		{"duplicate quoted key", "schemaVersion: 1\nnodes: []\n\"nodes\": []\n", CodeInvalidYAML, "", 3, 1},
		{"syntax", "schemaVersion: 1\nnodes: [\n", CodeInvalidYAML, "", 2, 8},
		{"bad indentation", "schemaVersion: 1\nnodes:\n  - id: a\n   kind: input\n", CodeInvalidYAML, "", 4, 0},
		{"two documents", "schemaVersion: 1\n---\nschemaVersion: 1\n", CodeInvalidYAML, "", 2, 1},
		{"anchor", "schemaVersion: 1\nschemas:\n  A: &a {type: object}\n  B: *a\n", graph.CodeInvalidDocument, "/schemas/A", 3, 6},
		{"merge key", "schemaVersion: 1\nschemas:\n  A:\n    <<: {type: object}\n", graph.CodeInvalidDocument, "/schemas/A", 4, 5},
		{"tag", "schemaVersion: 1\ntools: !!str 12\n", graph.CodeInvalidDocument, "/tools", 2, 8},
		{"non-string key", "schemaVersion: 1\nschemas:\n  1: {type: object}\n", graph.CodeInvalidDocument, "/schemas", 3, 3},
		{"explicit key", "schemaVersion: 1\n? nodes\n: []\n", graph.CodeInvalidDocument, "", 2, 1},
		{"leading zero", "schemaVersion: 1\nnodes:\n  - id: a\n    timeoutMs: 017\n", graph.CodeInvalidDocument, "/nodes/0/timeoutMs", 4, 16},
		{"infinity", "schemaVersion: 1\nschemas:\n  A: {maximum: .inf}\n", graph.CodeInvalidDocument, "/schemas/A/maximum", 3, 16},
		{"number out of range", "schemaVersion: 1\nschemas:\n  A: {maximum: 1e999999}\n", graph.CodeInvalidDocument, "/schemas/A/maximum", 3, 7},
		{"not a mapping", "- a\n- b\n", graph.CodeInvalidDocument, "", 1, 1},
		{"scalar document", "hello\n", graph.CodeInvalidDocument, "", 1, 1},
		{"empty", "", graph.CodeInvalidDocument, "", 1, 1},
		{"comments only", "# nothing\n", graph.CodeInvalidDocument, "", 1, 1},
		{"lone surrogate", "schemaVersion: 1\ntools: \"\\ud800\"\n", CodeInvalidYAML, "", 2, 9},
		{"invalid utf8", "schemaVersion: 1\ntools: \xff\n", CodeInvalidYAML, "", 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseYAML([]byte(tc.src))
			var de *graph.DecodeError
			require.True(t, errors.As(err, &de), "err = %v", err)
			require.Equal(t, tc.code, de.Code, "%v", de)
			require.Equal(t, tc.path, de.Path, "%v", de)
			if tc.col == 0 && tc.line != 0 {
				require.Equal(t, tc.line, de.Line, "%v", de)
			} else {
				require.Equal(t, tc.line, de.Line, "%v", de)
				require.Equal(t, tc.col, de.Column, "%v", de)
			}
			if de.Line > 0 {
				require.Contains(t, de.Error(), "line ")
			}
		})
	}
}

func TestYAMLSizeLimits(t *testing.T) {
	_, err := DecodeYAML([]byte("schemaVersion: 1\ntools: " + strings.Repeat("a", graph.DefaultLimits.MaxDocumentBytes) + "\n"))
	var de *graph.DecodeError
	require.ErrorAs(t, err, &de)
	require.Equal(t, graph.CodeDocumentTooLarge, de.Code)

	// Under the limit as YAML, over it as JSON: every quote-worthy
	// character doubles in JSON.
	big := "schemaVersion: 1\ntools: '" + strings.Repeat(`"`, graph.DefaultLimits.MaxDocumentBytes/2+16) + "'\n"
	require.Less(t, len(big), graph.DefaultLimits.MaxDocumentBytes)
	_, err = DecodeYAML([]byte(big))
	require.ErrorAs(t, err, &de)
	require.Equal(t, graph.CodeDocumentTooLarge, de.Code)
	require.Contains(t, de.Message, "JSON form")
}

func TestYAMLDeepNestingIsRefused(t *testing.T) {
	deep := "schemaVersion: 1\nschemas:\n  A: " + strings.Repeat("[", maxYAMLDepth+10) + strings.Repeat("]", maxYAMLDepth+10) + "\n"
	_, err := DecodeYAML([]byte(deep))
	var de *graph.DecodeError
	require.ErrorAs(t, err, &de)
	require.Equal(t, graph.CodeInvalidDocument, de.Code)
}

func TestPositionsLocateValidationIssues(t *testing.T) {
	src := strings.Replace(exampleYAML, "version: 1}", "version: 7}", 1)
	y, err := ParseYAML([]byte(src))
	require.NoError(t, err)
	issues := graph.Validate(y.Document, notesCatalog())
	require.Len(t, issues, 1)
	require.Equal(t, graph.CodeMissingDependency, issues[0].Code)
	require.Equal(t, "/nodes/2/action", issues[0].Path)
	pos, ok := y.Positions.Lookup(issues[0].Path)
	require.True(t, ok)
	require.Equal(t, Pos{Line: 29, Column: 5}, pos)

	// A pointer below what the source spells out reports its nearest ancestor.
	pos, ok = y.Positions.Lookup("/nodes/2/action/id/deeper")
	require.True(t, ok)
	require.Equal(t, Pos{Line: 29, Column: 14}, pos)
	pos, ok = y.Positions.Lookup("/toolsets/x/tools/0")
	require.True(t, ok)
	require.Equal(t, Pos{Line: 2, Column: 1}, pos, "the document itself")
}

func TestPositionsOfJSON(t *testing.T) {
	pos := PositionsOf(exampleJSON(t))
	require.Equal(t, Pos{Line: 9, Column: 7}, pos["/nodes/2/action"])
	require.Equal(t, Pos{Line: 5, Column: 5}, pos["/nodes/0"])
	require.Nil(t, PositionsOf([]byte("{")))
}

func TestYAMLToJSON(t *testing.T) {
	raw, pos, err := YAMLToJSON([]byte("tools:\n  - core.echo@1\n  - core.sleep@1\n"))
	require.NoError(t, err)
	require.JSONEq(t, `{"tools":["core.echo@1","core.sleep@1"]}`, string(raw))
	require.Equal(t, Pos{Line: 3, Column: 5}, pos["/tools/1"])
	_, _, err = YAMLToJSON([]byte("tools: [\n"))
	var de *graph.DecodeError
	require.ErrorAs(t, err, &de)
	require.Equal(t, CodeInvalidYAML, de.Code)
}

// FuzzDecodeYAML checks that the YAML front end never panics and that what
// it accepts, its JSON form also decodes to.
func FuzzDecodeYAML(f *testing.F) {
	f.Add([]byte(exampleYAML))
	if b, err := os.ReadFile("../graph/testdata/example.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("schemaVersion: 1\nnodes: [{id: a, kind: input, outputs: {out: any}}]\nedges: []\ntools: x\n"))
	f.Add([]byte("a: &x 1\nb: *x\n"))
	f.Add(trickyDocument(f))
	f.Fuzz(func(t *testing.T, data []byte) {
		y, err := ParseYAML(data)
		if err != nil {
			var de *graph.DecodeError
			require.ErrorAs(t, err, &de, "error is not a *DecodeError: %v", err)
			return
		}
		again, err := graph.Decode(y.JSON)
		require.NoError(t, err, "JSON form does not decode: %v\n%s", err, y.JSON)
		a, _ := json.Marshal(y.Document)
		b, _ := json.Marshal(again)
		require.Equal(t, string(b), string(a), "JSON form decodes differently:\n%s\n%s", a, b)
		// What EncodeYAML writes of it reads back to the same document.
		out, err := EncodeYAML(y.JSON)
		require.NoError(t, err, "EncodeYAML: %v\n%s", err, y.JSON)
		back, err := ParseYAML(out)
		require.NoError(t, err, "EncodeYAML's output does not read back: %v\n%s", err, out)
		c, _ := json.Marshal(back.Document)
		require.Equal(t, string(a), string(c), "EncodeYAML's output reads back differently:\n%s\n%s\n%s", a, c, out)
	})
}
