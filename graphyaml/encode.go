package graphyaml

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"

	"github.com/weftworks/weft/graph"
)

// EncodeYAML writes a JSON graph document (as the API stores a draft or
// serves a revision's graph) as a YAML document that ParseYAML reads back
// to the same JSON tree: every member, string and number exactly as given,
// so the document decodes to the same graph.Document and has the same checksum.
//
// The YAML is block style, for people and diffs: members of the graph's own
// objects in a fixed order (schemaVersion, tools, schemas, nodes, edges,
// toolsets; a node's id and kind first), maps keyed by names (ports,
// mappings, toolsets, schemas) sorted, and the content of schemas and
// literals in its source order. A string is written plain when it reads
// back as that string under ParseYAML's rules, as a literal block (|) when
// it has several lines, else double-quoted with JSON's escapes; each such
// choice is checked against the parser. The output is deterministic: the
// same document always gives the same bytes.
//
// The writer is here rather than goccy/go-yaml's encoder because that one
// does not read back: it writes a json.Number as a quoted string and, for
// some strings, a tab its own parser refuses. Its parser is what checks
// this writer's choices.
func EncodeYAML(doc json.RawMessage) ([]byte, error) {
	tree, err := readOrderedJSON(doc)
	if err != nil {
		return nil, err
	}
	root, ok := tree.(*yamlObject)
	if !ok {
		return nil, errors.New("encode yaml: the document is not a JSON object")
	}
	orderMembers(root, shapeDocument)
	var want bytes.Buffer
	writeJSON(&want, root)

	e := &yamlEncoder{}
	e.object(root, 0)
	out := e.buf.Bytes()
	if sameTree(out, want.Bytes()) {
		return out, nil
	}
	// The block encoding did not read back (a parser corner the scalar
	// checks missed): JSON is YAML too, and reads back by construction.
	var flow bytes.Buffer
	if err := json.Indent(&flow, want.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	flow.WriteByte('\n')
	if !sameTree(flow.Bytes(), want.Bytes()) {
		return nil, errors.New("encode yaml: the document does not read back as YAML")
	}
	return flow.Bytes(), nil
}

// MarshalYAML encodes doc (for example a compiled revision's document) with
// EncodeYAML.
func MarshalYAML(doc *graph.Document) ([]byte, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	return EncodeYAML(raw)
}

// sameTree reports whether the YAML text reads back (under ParseYAML's
// rules) as exactly the compact JSON want.
func sameTree(yamlText, want []byte) bool {
	tree, _, err := yamlTree(yamlText)
	if err != nil {
		return false
	}
	var got bytes.Buffer
	writeJSON(&got, tree)
	return bytes.Equal(got.Bytes(), want)
}

// readOrderedJSON reads one JSON value into the tree ParseYAML builds
// (*yamlObject with members in source order, []any, string, bool, nil,
// json.Number with the number's text).
func readOrderedJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readJSONValue(dec)
	if err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("encode yaml: trailing data after the JSON document")
	}
	return v, nil
}

func readJSONValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := &yamlObject{values: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				if _, dup := obj.values[k]; dup {
					return nil, fmt.Errorf("duplicate key %q", k)
				}
				v, err := readJSONValue(dec)
				if err != nil {
					return nil, err
				}
				obj.keys = append(obj.keys, k)
				obj.values[k] = v
			}
			_, err := dec.Token() // '}'
			return obj, err
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := readJSONValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			_, err := dec.Token() // ']'
			return arr, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case string, bool, nil, json.Number:
		return t, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// shape is what an object of the graph document holds, for member order.
type shape int

const (
	shapeRaw      shape = iota // schema content, literals: source order
	shapeDocument              // graph.Document
	shapeNode                  // Node
	shapeEdge                  // Edge
	shapeRef                   // AgentRef, ActionRef
	shapeMapping               // Mapping
	shapeRetry                 // Retry
	shapeToolset               // Toolset
	shapeNames                 // a map keyed by names whose values are plain
)

// memberShapes lists, per shape, its members in writing order and the shape
// of each member's value; members not listed follow in source order.
var memberShapes = map[shape][]struct {
	name string
	// value is the shape of the member's value; elem the shape of the
	// elements of an array, or of the values of a map keyed by names.
	value, elem shape
}{
	shapeDocument: {{"schemaVersion", shapeRaw, shapeRaw}, {"tools", shapeRaw, shapeRaw},
		{"schemas", shapeNames, shapeRaw}, {"nodes", shapeRaw, shapeNode}, {"edges", shapeRaw, shapeEdge},
		{"toolsets", shapeNames, shapeToolset}},
	shapeNode: {{"id", shapeRaw, shapeRaw}, {"kind", shapeRaw, shapeRaw}, {"language", shapeRaw, shapeRaw},
		{"expression", shapeRaw, shapeRaw}, {"agent", shapeRef, shapeRaw}, {"action", shapeRef, shapeRaw},
		{"tools", shapeRaw, shapeRaw}, {"schema", shapeRaw, shapeRaw}, {"inputs", shapeNames, shapeRaw},
		{"outputs", shapeNames, shapeRaw}, {"mapping", shapeNames, shapeMapping}, {"retry", shapeRetry, shapeRaw},
		{"timeoutMs", shapeRaw, shapeRaw}},
	shapeEdge:    {{"from", shapeRaw, shapeRaw}, {"to", shapeRaw, shapeRaw}},
	shapeRef:     {{"id", shapeRaw, shapeRaw}, {"key", shapeRaw, shapeRaw}, {"version", shapeRaw, shapeRaw}, {"revision", shapeRaw, shapeRaw}},
	shapeMapping: {{"literal", shapeRaw, shapeRaw}, {"pointer", shapeRaw, shapeRaw}, {"template", shapeRaw, shapeRaw}, {"bindings", shapeNames, shapeRaw}},
	shapeRetry: {{"maxAttempts", shapeRaw, shapeRaw}, {"initialIntervalMs", shapeRaw, shapeRaw},
		{"backoff", shapeRaw, shapeRaw}, {"maxIntervalMs", shapeRaw, shapeRaw}},
	shapeToolset: {{"summary", shapeRaw, shapeRaw}, {"tools", shapeRaw, shapeRaw}, {"approval", shapeNames, shapeRaw},
		{"approvalTimeoutMs", shapeRaw, shapeRaw}, {"skill", shapeRaw, shapeRaw}},
}

// orderMembers puts the members of obj (of shape s) and of the objects
// under it in writing order.
func orderMembers(obj *yamlObject, s shape) {
	switch s {
	case shapeRaw:
		return
	case shapeNames:
		slices.Sort(obj.keys)
		return
	}
	var keys []string
	for _, m := range memberShapes[s] {
		v, ok := obj.values[m.name]
		if !ok {
			continue
		}
		keys = append(keys, m.name)
		orderValue(v, m.value, m.elem)
	}
	for _, k := range obj.keys {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	obj.keys = keys
}

// orderValue orders a member's value: an object of shape s (a map keyed by
// names whose values have shape elem), or an array of elem objects.
func orderValue(v any, s, elem shape) {
	switch t := v.(type) {
	case *yamlObject:
		orderMembers(t, s)
		if s == shapeNames {
			for _, k := range t.keys {
				if o, ok := t.values[k].(*yamlObject); ok {
					orderMembers(o, elem)
				}
			}
		}
	case []any:
		for _, e := range t {
			if o, ok := e.(*yamlObject); ok {
				orderMembers(o, elem)
			}
		}
	}
}

// yamlEncoder writes the block YAML of a tree.
type yamlEncoder struct {
	buf bytes.Buffer
}

func (e *yamlEncoder) indent(n int) {
	for range n {
		e.buf.WriteByte(' ')
	}
}

// object writes a non-root mapping's members at indent (the root's at 0);
// the caller has written what precedes the first member on its line.
func (e *yamlEncoder) object(o *yamlObject, indent int) {
	for i, k := range o.keys {
		if i > 0 {
			e.indent(indent)
		}
		e.key(k)
		e.buf.WriteByte(':')
		e.member(o.values[k], indent)
	}
}

// member writes the value of a member whose key is at indent, starting
// right after the key's colon.
func (e *yamlEncoder) member(v any, indent int) {
	switch t := v.(type) {
	case *yamlObject:
		if len(t.keys) == 0 {
			e.buf.WriteString(" {}\n")
			return
		}
		e.buf.WriteByte('\n')
		e.indent(indent + 2)
		e.object(t, indent+2)
	case []any:
		if len(t) == 0 {
			e.buf.WriteString(" []\n")
			return
		}
		e.buf.WriteByte('\n')
		e.sequence(t, indent+2)
	default:
		e.buf.WriteByte(' ')
		e.scalar(v, indent)
	}
}

// sequence writes the items of a non-empty sequence at indent.
func (e *yamlEncoder) sequence(items []any, indent int) {
	for _, v := range items {
		e.indent(indent)
		e.buf.WriteByte('-')
		switch t := v.(type) {
		case *yamlObject:
			if len(t.keys) == 0 {
				e.buf.WriteString(" {}\n")
				continue
			}
			e.buf.WriteByte(' ')
			e.object(t, indent+2)
		case []any:
			if len(t) == 0 {
				e.buf.WriteString(" []\n")
				continue
			}
			e.buf.WriteByte('\n')
			e.sequence(t, indent+2)
		default:
			e.buf.WriteByte(' ')
			e.scalar(v, indent)
		}
	}
}

// scalar writes a scalar value and its line end; indent is that of the key
// or item holding it (a literal block's lines go two deeper).
func (e *yamlEncoder) scalar(v any, indent int) {
	switch t := v.(type) {
	case nil:
		e.buf.WriteString("null")
	case bool:
		if t {
			e.buf.WriteString("true")
		} else {
			e.buf.WriteString("false")
		}
	case json.Number:
		e.buf.WriteString(string(t)) // a JSON number is a YAML 1.2 number
	case string:
		switch {
		case plainString(t, false):
			e.buf.WriteString(t)
		case literalString(t):
			e.literal(t, indent+2)
			return // literal writes its own line ends
		default:
			writeJSONString(&e.buf, t)
		}
	}
	e.buf.WriteByte('\n')
}

// key writes a mapping key: plain when it reads back as itself.
func (e *yamlEncoder) key(k string) {
	if plainString(k, true) {
		e.buf.WriteString(k)
		return
	}
	writeJSONString(&e.buf, k)
}

// literal writes s, which literalString accepted, as a literal block.
func (e *yamlEncoder) literal(s string, indent int) {
	e.buf.WriteString(literalHeader(s))
	e.buf.WriteByte('\n')
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if line != "" {
			e.indent(indent)
			e.buf.WriteString(line)
		}
		e.buf.WriteByte('\n')
	}
}

// literalHeader is the block indicator: clip keeps one final line break,
// strip (-) none.
func literalHeader(s string) string {
	if strings.HasSuffix(s, "\n") {
		return "|"
	}
	return "|-"
}

// plainString reports whether s can be written unquoted (as a key when
// key is set) and read back as the same string: a conservative character
// set (no YAML indicator first, no ": " or " #", no leading or trailing
// space), a value the YAML 1.2 core schema resolves to a string, and a
// check against the parser itself.
func plainString(s string, key bool) bool {
	if s == "" || s != strings.TrimSpace(s) || len(s) > 200 {
		return false
	}
	for i, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
		case i == 0 && !strings.ContainsRune("_/.$(", r):
			return false
		case i > 0 && r == ' ':
		case i > 0 && !strings.ContainsRune("_/.$()+=<>,;'\"!&|*%?@~^-", r):
			return false
		}
	}
	if v, err := (&yamlConverter{pos: Positions{}}).plain(nil, "", s); err != nil || v != s {
		return false
	}
	doc := "k: " + s + "\n"
	if key {
		doc = s + ": v\n"
	}
	return readsBack(doc, key, s)
}

// literalString reports whether s is best written as a literal block and
// reads back as s: several lines of printable text without tabs or
// carriage returns, a first line not starting with a space, no line with
// trailing spaces, at most one final line break.
func literalString(s string) bool {
	if !strings.Contains(strings.TrimSuffix(s, "\n"), "\n") || strings.HasSuffix(s, "\n\n") ||
		strings.HasPrefix(s, " ") || strings.HasPrefix(s, "\n") {
		return false
	}
	for _, r := range s {
		if r != '\n' && !unicode.IsPrint(r) {
			return false
		}
	}
	for _, line := range strings.Split(s, "\n") {
		if line != strings.TrimRight(line, " ") {
			return false
		}
	}
	var b bytes.Buffer
	b.WriteString("k: " + literalHeader(s) + "\n")
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if line != "" {
			b.WriteString("  " + line)
		}
		b.WriteByte('\n')
	}
	return readsBack(b.String(), false, s)
}

// readsBack reports whether the one-member YAML document doc reads back
// with s as its key (key set) or as the value of its member k.
func readsBack(doc string, key bool, s string) bool {
	tree, _, err := yamlTree([]byte(doc))
	if err != nil {
		return false
	}
	o, ok := tree.(*yamlObject)
	if !ok || len(o.keys) != 1 {
		return false
	}
	if key {
		return o.keys[0] == s && o.values[s] == "v"
	}
	return o.keys[0] == "k" && o.values["k"] == s
}
