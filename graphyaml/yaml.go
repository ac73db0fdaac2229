package graphyaml

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
	"github.com/weftworks/weft/graph"
)

// CodeInvalidYAML is a YAML document that does not parse (the YAML
// counterpart of INVALID_JSON; 400).
const CodeInvalidYAML = "INVALID_YAML"

// Pos is a 1-based line and column in a source document.
type Pos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

// Positions maps JSON pointers into a document to where they were written:
// for an object member the position of its key, for an array element the
// position of the element, and "" for the whole document. Pointers of
// validation issues and decode errors can be looked up in it.
type Positions map[string]Pos

// Lookup returns the position of pointer, or of its nearest ancestor that
// has one (an issue about /toolsets/a/tools/0 of a captured toolset, which
// has no source of its own, reports where the toolset was selected).
func (p Positions) Lookup(pointer string) (Pos, bool) {
	for {
		if pos, ok := p[pointer]; ok {
			return pos, true
		}
		i := strings.LastIndexByte(pointer, '/')
		if i < 0 {
			return Pos{}, false
		}
		pointer = pointer[:i]
	}
}

// YAMLDocument is a decoded YAML graph document.
type YAMLDocument struct {
	Document *graph.Document
	// JSON is the same document as compact JSON, members in source order:
	// what the API stores as the draft.
	JSON json.RawMessage
	// Positions locates every member and element in the YAML text.
	Positions Positions
}

// DecodeYAML strictly decodes a YAML graph document. It accepts exactly the
// documents graph.Decode accepts in JSON (see ParseYAML).
func DecodeYAML(data []byte) (*graph.Document, error) {
	y, err := ParseYAML(data)
	if err != nil {
		return nil, err
	}
	return y.Document, nil
}

// ParseYAML strictly decodes a YAML graph document and keeps where each
// value was written. The YAML is converted to a JSON tree which then goes
// through graph.Decode, so both syntaxes accept exactly the same documents and
// reject them with the same codes and paths; a *graph.DecodeError additionally
// carries the line and column of the offending value.
//
// The YAML subset is JSON's data model, resolved with the YAML 1.2 core
// schema: one document; mappings whose keys are strings; sequences;
// scalars where a plain null, ~, true, false, integer (decimal, 0o octal,
// 0x hex) or float is that type and everything else (yes, on, 2024-01-01,
// 1_000) is a string. Refused as INVALID_DOCUMENT: anchors, aliases and
// merge keys, tags, explicit (?) and non-string keys, .inf and .nan (JSON
// cannot hold them) and numbers with a leading zero such as 017 (YAML 1.1
// reads them as octal, 1.2 as decimal: ambiguous). Duplicate keys are
// refused as in JSON. The 1 MiB limit applies to the YAML text and to its
// JSON form.
func ParseYAML(data []byte) (*YAMLDocument, error) {
	tree, pos, err := yamlTree(data)
	if err != nil {
		return nil, err
	}
	if _, ok := tree.(*yamlObject); !ok {
		p := pos[""]
		return nil, &graph.DecodeError{Code: graph.CodeInvalidDocument, Message: "document must be a YAML mapping", Line: p.Line, Column: p.Column}
	}
	var buf bytes.Buffer
	writeJSON(&buf, tree)
	raw := buf.Bytes()
	doc, err := graph.Decode(raw)
	if err != nil {
		var de *graph.DecodeError
		if !errors.As(err, &de) {
			return nil, err
		}
		out := *de
		if out.Code == graph.CodeDocumentTooLarge {
			out.Message = fmt.Sprintf("the document's JSON form is %d bytes; the limit is %d", len(raw), graph.DefaultLimits.MaxDocumentBytes)
		}
		if p, ok := pos.Lookup(out.Path); ok {
			out.Line, out.Column = p.Line, p.Column
		}
		return nil, &out
	}
	return &YAMLDocument{Document: doc, JSON: json.RawMessage(raw), Positions: pos}, nil
}

// YAMLToJSON converts one YAML document to compact JSON (members in source
// order) under the rules of ParseYAML, without interpreting it as a graph:
// for small YAML files with their own shape, such as a toolset folder's
// toolset.yaml. Errors are *graph.DecodeError with line and column.
func YAMLToJSON(data []byte) (json.RawMessage, Positions, error) {
	tree, pos, err := yamlTree(data)
	if err != nil {
		return nil, nil, err
	}
	var buf bytes.Buffer
	writeJSON(&buf, tree)
	return json.RawMessage(buf.Bytes()), pos, nil
}

// PositionsOf returns the positions of a JSON (or YAML) document's members
// and elements, as far as its text parses; nil when it does not. It is for
// reporting only (for example `weft validate` on a JSON file): decoding is
// graph.Decode's job.
func PositionsOf(data []byte) Positions {
	if len(data) > graph.DefaultLimits.MaxDocumentBytes || !utf8.Valid(data) {
		return nil
	}
	f, err := parseYAMLFile(data)
	if err != nil || len(f.Docs) != 1 {
		return nil
	}
	c := &yamlConverter{pos: Positions{}, lenient: true}
	_, _ = c.convert(f.Docs[0].Body, "", 0)
	return c.pos
}

// maxYAMLDepth bounds nesting, like encoding/json's own limit.
const maxYAMLDepth = 10000

// yamlTree parses data into a tree of *yamlObject, []any, string, bool, nil
// and json.Number, recording positions.
func yamlTree(data []byte) (any, Positions, error) {
	if len(data) > graph.DefaultLimits.MaxDocumentBytes {
		return nil, nil, &graph.DecodeError{Code: graph.CodeDocumentTooLarge,
			Message: fmt.Sprintf("document is %d bytes; the limit is %d", len(data), graph.DefaultLimits.MaxDocumentBytes)}
	}
	if !utf8.Valid(data) {
		return nil, nil, &graph.DecodeError{Code: CodeInvalidYAML, Message: "document is not valid UTF-8"}
	}
	f, err := parseYAMLFile(data)
	if err != nil {
		return nil, nil, err
	}
	switch n := len(f.Docs); {
	case n == 0 || f.Docs[0].Body == nil:
		return nil, nil, &graph.DecodeError{Code: graph.CodeInvalidDocument, Message: "document is empty", Line: 1, Column: 1}
	case n > 1:
		de := &graph.DecodeError{Code: CodeInvalidYAML, Message: fmt.Sprintf("the text holds %d YAML documents; exactly one is allowed", n)}
		second := f.Docs[1]
		if second.Start != nil {
			setTokenPos(de, second.Start)
		} else if second.Body != nil {
			setTokenPos(de, second.Body.GetToken())
		}
		return nil, nil, de
	}
	c := &yamlConverter{pos: Positions{}}
	tree, err := c.convert(f.Docs[0].Body, "", 0)
	if err != nil {
		return nil, nil, err
	}
	return tree, c.pos, nil
}

// parseYAMLFile runs the YAML parser, turning its errors (and, defensively,
// a panic on hostile input) into INVALID_YAML with a position.
func parseYAMLFile(data []byte) (f *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, &graph.DecodeError{Code: CodeInvalidYAML, Message: "the YAML parser could not read this document"}
		}
	}()
	f, err = parser.ParseBytes(data, 0)
	if err == nil {
		return f, nil
	}
	de := &graph.DecodeError{Code: CodeInvalidYAML, Message: err.Error()}
	var ye yaml.Error
	if errors.As(err, &ye) {
		de.Message = ye.GetMessage()
		setTokenPos(de, ye.GetToken())
	}
	return nil, de
}

func setTokenPos(de *graph.DecodeError, tk *token.Token) {
	if tk != nil && tk.Position != nil {
		de.Line, de.Column = tk.Position.Line, tk.Position.Column
	}
}

// tokenPos is where node n starts. A block mapping's own token is the ':'
// of its first pair, so its first key stands for it.
func tokenPos(n ast.Node) Pos {
	if n == nil {
		return Pos{}
	}
	if m, ok := n.(*ast.MappingNode); ok && !m.IsFlowStyle && len(m.Values) > 0 && m.Values[0].Key != nil {
		n = m.Values[0].Key
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return Pos{}
	}
	return Pos{Line: tk.Position.Line, Column: tk.Position.Column}
}

// yamlObject is a mapping with its keys in source order.
type yamlObject struct {
	keys   []string
	values map[string]any
}

type yamlConverter struct {
	pos Positions
	// lenient (PositionsOf) records positions and skips what it cannot convert.
	lenient bool
}

func (c *yamlConverter) fail(n ast.Node, path, format string, args ...any) error {
	p := tokenPos(n)
	return &graph.DecodeError{Code: graph.CodeInvalidDocument, Path: path, Message: fmt.Sprintf(format, args...), Line: p.Line, Column: p.Column}
}

func (c *yamlConverter) convert(n ast.Node, path string, depth int) (any, error) {
	if _, seen := c.pos[path]; !seen {
		c.pos[path] = tokenPos(n)
	}
	if depth > maxYAMLDepth {
		return nil, c.fail(n, path, "document nests deeper than %d levels", maxYAMLDepth)
	}
	switch v := n.(type) {
	case *ast.MappingNode:
		obj := &yamlObject{values: make(map[string]any, len(v.Values))}
		for _, mv := range v.Values {
			key, err := c.key(mv.Key, path)
			if err != nil {
				if c.lenient {
					continue
				}
				return nil, err
			}
			member := path + "/" + graph.EscapePointerToken(key)
			if _, dup := obj.values[key]; dup {
				if c.lenient {
					continue
				}
				return nil, c.fail(mv.Key, member, "duplicate key %q", key)
			}
			c.pos[member] = tokenPos(mv.Key)
			val, err := c.convert(mv.Value, member, depth+1)
			if err != nil && !c.lenient {
				return nil, err
			}
			obj.keys = append(obj.keys, key)
			obj.values[key] = val
		}
		return obj, nil
	case *ast.SequenceNode:
		arr := make([]any, 0, len(v.Values))
		for i, e := range v.Values {
			elem := path + "/" + strconv.Itoa(i)
			c.pos[elem] = tokenPos(e)
			val, err := c.convert(e, elem, depth+1)
			if err != nil && !c.lenient {
				return nil, err
			}
			arr = append(arr, val)
		}
		return arr, nil
	case *ast.StringNode:
		if isQuoted(v.GetToken()) {
			return c.str(n, path, v.Value)
		}
		return c.plain(n, path, v.Value)
	case *ast.LiteralNode:
		if v.Value == nil {
			return "", nil
		}
		return c.str(n, path, v.Value.Value)
	case *ast.NullNode, *ast.BoolNode, *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		if v.GetToken().Type == token.ImplicitNullType {
			return nil, nil
		}
		return c.plain(n, path, v.GetToken().Value)
	case *ast.AnchorNode, *ast.AliasNode, *ast.MergeKeyNode:
		return nil, c.fail(n, path, "YAML anchors, aliases and merge keys are not supported; write the value out")
	case *ast.TagNode:
		return nil, c.fail(n, path, "YAML tags (%s) are not supported; quote a value to make it a string", v.Start.Value)
	}
	return nil, c.fail(n, path, "unsupported YAML content (%s)", n.Type())
}

// key returns a mapping key, which must be a string scalar.
func (c *yamlConverter) key(k ast.MapKeyNode, path string) (string, error) {
	switch v := k.(type) {
	case *ast.StringNode:
		if isQuoted(v.GetToken()) {
			return v.Value, nil
		}
		s, err := c.plain(k, path, v.Value)
		if err != nil {
			return "", err
		}
		if str, ok := s.(string); ok {
			return str, nil
		}
		return "", c.fail(k, path, "mapping key %s is not a string; quote it", v.Value)
	case *ast.MappingKeyNode:
		return "", c.fail(k, path, "explicit mapping keys (?) are not supported")
	case *ast.MergeKeyNode, *ast.AnchorNode, *ast.AliasNode:
		return "", c.fail(k, path, "YAML anchors, aliases and merge keys are not supported; write the value out")
	case *ast.TagNode:
		return "", c.fail(k, path, "YAML tags are not supported")
	}
	return "", c.fail(k, path, "mapping key %s is not a string; quote it", strings.TrimSpace(k.String()))
}

func isQuoted(tk *token.Token) bool {
	return tk != nil && (tk.Type == token.DoubleQuoteType || tk.Type == token.SingleQuoteType)
}

func (c *yamlConverter) str(n ast.Node, path, s string) (any, error) {
	if !utf8.ValidString(s) {
		return nil, c.fail(n, path, "string is not valid UTF-8 (an escape produced a lone surrogate or an invalid byte)")
	}
	return s, nil
}

// YAML 1.2 core schema patterns for plain scalars.
var (
	yamlDecimal = regexp.MustCompile(`^[-+]?[0-9]+$`)
	yamlOctal   = regexp.MustCompile(`^0o[0-7]+$`)
	yamlHex     = regexp.MustCompile(`^0x[0-9a-fA-F]+$`)
	yamlFloat   = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)
	yamlInf     = regexp.MustCompile(`^[-+]?\.(inf|Inf|INF)$`)
	yamlNaN     = regexp.MustCompile(`^\.(nan|NaN|NAN)$`)
)

// plain resolves a plain (unquoted) scalar with the YAML 1.2 core schema.
func (c *yamlConverter) plain(n ast.Node, path, s string) (any, error) {
	switch s {
	case "", "~", "null", "Null", "NULL":
		return nil, nil
	case "true", "True", "TRUE":
		return true, nil
	case "false", "False", "FALSE":
		return false, nil
	}
	switch {
	case yamlOctal.MatchString(s), yamlHex.MatchString(s):
		base := 8
		if s[1] == 'x' {
			base = 16
		}
		v, _ := new(big.Int).SetString(s[2:], base)
		return json.Number(v.String()), nil
	case yamlDecimal.MatchString(s) || yamlFloat.MatchString(s):
		num, ok := jsonNumber(s)
		if !ok {
			return nil, c.fail(n, path, "number %s has a leading zero, which YAML 1.1 reads as octal; write it without the zero, as 0o…, or quote it", s)
		}
		return json.Number(num), nil
	case yamlInf.MatchString(s), yamlNaN.MatchString(s):
		return nil, c.fail(n, path, "%s has no JSON form; quote it to make it a string", s)
	}
	return c.str(n, path, s)
}

// jsonNumber rewrites a YAML 1.2 decimal or float as a JSON number: no
// leading '+', a digit before and after every '.', and no leading zero
// (false when the integer part has one).
func jsonNumber(s string) (string, bool) {
	sign := ""
	switch s[0] {
	case '-':
		sign, s = "-", s[1:]
	case '+':
		s = s[1:]
	}
	mant, exp := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], s[i:]
	}
	intPart, frac, hasDot := strings.Cut(mant, ".")
	if intPart == "" {
		intPart = "0"
	}
	if len(intPart) > 1 && intPart[0] == '0' {
		return "", false
	}
	out := sign + intPart
	if hasDot && frac != "" {
		out += "." + frac
	}
	return out + exp, true
}

// writeJSON writes a converted tree as compact JSON, members in source
// order, without HTML escaping.
func writeJSON(b *bytes.Buffer, v any) {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case json.Number:
		b.WriteString(string(t))
	case string:
		writeJSONString(b, t)
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSON(b, e)
		}
		b.WriteByte(']')
	case *yamlObject:
		b.WriteByte('{')
		for i, k := range t.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, k)
			b.WriteByte(':')
			writeJSON(b, t.values[k])
		}
		b.WriteByte('}')
	}
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a valid UTF-8 string always encodes
	b.Truncate(b.Len() - 1)
}
