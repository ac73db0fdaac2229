package graphyaml

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/graph"
)

// trickyStrings are strings a YAML writer gets wrong when it writes them
// plain or folds them: they must read back exactly.
var trickyStrings = []string{
	"", " ", "a ", " a", "yes", "no", "on", "off", "y", "n", "true", "True", "null", "~", "Null",
	"1", "-1", "+1", "017", "0o17", "0x1F", "1e5", "1_000", ".5", ".inf", "-.inf", ".nan", "1.0", "2024-01-01",
	"a: b", "a:b", "a #b", "a#b", "#a", "- a", "-a", "? a", "[a]", "{a}", "*a", "&a", "!a", "|a", ">a", "%a", "@a", "`a",
	"'a'", `"a"`, "a'b", `a"b`, "<<", "=", "a\\b", "a\tb", "\t", "a\nb", "a\nb\n", "a\nb\n\n", "\na", " a\nb",
	"a \nb", "a\n \nb", "a\r\nb", "line1\n  indented\nline3\n", "ü", "Prüfung der Eingabe", "日本語", "emoji 😀",
	"\u2028", "a\u0085b", "\u0000", "{{ item.id }}", "/in/id", "in.out", "cel/v1", "input.amount > 100 && input.ok",
	"size(input.items) == 0", "workspace.notes.write@1", "---", "...", "a\n---\nb", "a\n...\nb", "#!/bin/sh\necho hi\n",
	strings.Repeat("x", 300), "x: |\n  y", "- a\n- b\n",
}

func trickyDocument(t testing.TB) []byte {
	t.Helper()
	lit := map[string]any{}
	bind := map[string]string{}
	for i, s := range trickyStrings {
		lit[s] = s
		bind[s] = s
		_ = i
	}
	doc := map[string]any{
		"schemaVersion": 1,
		"schemas":       map[string]any{"A": map[string]any{"enum": trickyStrings, "type": "string"}},
		"nodes": []any{
			map[string]any{"id": "in", "kind": "input", "outputs": map[string]any{"out": "A"}},
			map[string]any{"id": "g", "kind": "gate", "language": "cel/v1", "expression": "input != ''\n&& true",
				"inputs": map[string]any{"in": "A"}, "outputs": map[string]any{"pass": "A", "fail": "A"}},
			map[string]any{"id": "act", "kind": "action", "action": map[string]any{"id": "core.echo", "version": 1},
				"mapping": map[string]any{
					"a": map[string]any{"literal": map[string]any{"strings": lit, "nums": []any{json.Number("0"), json.Number("-0.5"),
						json.Number("1e308"), json.Number("1E-7"), json.Number("12345678901234567890")},
						"nested": []any{[]any{}, []any{[]any{"x"}}, map[string]any{}, nil, true, false}}},
					"b": map[string]any{"template": "Hello {{ a }}", "bindings": bind},
				},
				"retry": map[string]any{"backoff": json.Number("1.5"), "maxAttempts": 3}},
		},
		"edges": []any{map[string]any{"from": "in.out", "to": "g.in"}},
		"toolsets": map[string]any{"t": map[string]any{"tools": []string{"core.echo@1"},
			"skill": "# Skill\n\nUse the tools.\n  - carefully\n", "summary": "Echo things."}},
	}
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	return b
}

// requireReadsBack encodes raw and checks that ParseYAML reads the YAML
// back to the same JSON tree (member order aside), and returns the YAML.
func requireReadsBack(t *testing.T, raw []byte) []byte {
	t.Helper()
	out, err := EncodeYAML(raw)
	require.NoError(t, err)
	tree, _, err := yamlTree(out)
	require.NoError(t, err, "%s", out)
	var got bytes.Buffer
	writeJSON(&got, tree)
	require.JSONEq(t, string(raw), got.String(), "%s", out)
	again, err := EncodeYAML(got.Bytes())
	require.NoError(t, err)
	require.Equal(t, string(out), string(again), "the encoding is deterministic and stable")
	return out
}

func TestEncodeYAMLReadsBack(t *testing.T) {
	out := requireReadsBack(t, trickyDocument(t))
	// Block style, not the JSON fallback, and a literal block for the skill.
	require.True(t, strings.HasPrefix(string(out), "schemaVersion: 1\nschemas:\n"), "%s", out)
	require.Contains(t, string(out), "    skill: |\n      # Skill\n\n      Use the tools.\n        - carefully\n")
	require.Contains(t, string(out), "\n  - from: in.out\n    to: g.in\n")
	require.Contains(t, string(out), "expression: |-\n")
	for _, s := range trickyStrings {
		raw, err := json.Marshal(map[string]any{s: s, "list": []string{s}})
		require.NoError(t, err)
		requireReadsBack(t, raw)
	}
}

func TestEncodeYAMLKeepsTheChecksum(t *testing.T) {
	for _, raw := range [][]byte{exampleJSON(t), mustRead(t, "../examples/quickstart.json")} {
		doc, err := graph.Decode(raw)
		require.NoError(t, err)
		want, issues := graph.Compile(doc, notesCatalog())
		require.Empty(t, issues)

		// From the authored JSON (a draft) and from the compiled document
		// (a revision): both read back to the same checksum.
		fromDraft := requireReadsBack(t, raw)
		fromRevision, err := MarshalYAML(&want.Document)
		require.NoError(t, err)
		for _, y := range [][]byte{fromDraft, fromRevision} {
			back, err := DecodeYAML(y)
			require.NoError(t, err, "%s", y)
			got, issues := graph.Compile(back, notesCatalog())
			require.Empty(t, issues)
			require.Equal(t, want.Checksum, got.Checksum, "%s", y)
		}
	}
}

func TestEncodeYAMLOrdersTheGraph(t *testing.T) {
	raw := []byte(`{"edges":[{"to":"out.in","from":"in.out"}],"nodes":[{"outputs":{"z":"any","a":"any"},"kind":"input","id":"in"},
		{"inputs":{"in":"any"},"id":"out","kind":"output"}],"schemaVersion":1}`)
	out := requireReadsBack(t, raw)
	require.Equal(t, `schemaVersion: 1
nodes:
  - id: in
    kind: input
    outputs:
      a: any
      z: any
  - id: out
    kind: output
    inputs:
      in: any
edges:
  - from: in.out
    to: out.in
`, string(out))
}

func TestEncodeYAMLRefusesWhatIsNotADocument(t *testing.T) {
	for _, raw := range []string{`[1]`, `{"a":1,"a":2}`, `{"a":1} x`, `{`} {
		_, err := EncodeYAML([]byte(raw))
		require.Error(t, err, raw)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
