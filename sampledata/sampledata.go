// Package sampledata generates deterministic, schema-valid sample values
// from JSON Schemas: what a simulated agent or action node returns when the
// simulation request gives it no fixture (SPEC §4). The same schemas always
// produce the same bytes, on every worker and every run.
//
// The value is the smallest plausible one: an object holds its required
// properties (and optional ones only as far as minProperties needs), a
// string is its const, its first enum value, a sample for its format, or
// "sample" fitted to minLength/maxLength, a number is 0 moved into its
// bounds and onto its multipleOf, an array holds minItems items, a boolean
// is false. A schema with no type constraint yields {}. allOf is merged,
// anyOf/oneOf take their first alternative, local $refs are followed.
//
// Every generated value is validated against every given schema; when the
// heuristics cannot satisfy one (a pattern, uniqueItems, a not), Generate
// returns an error instead of an invalid value, and the caller asks for a
// fixture.
package sampledata

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/weftworks/weft/graph"
)

// maxDepth bounds $ref chains and nesting, so a recursive schema whose
// recursion is required (which no finite value satisfies) ends in an error.
const maxDepth = 32

// ErrNoDefault wraps every failure to produce a valid value.
var ErrNoDefault = errors.New("sampledata: no schema-valid default")

// Generate returns a value valid against every schema in schemas (each a
// JSON Schema document; empty or `true` accepts anything). With no schema
// the value is {}.
func Generate(schemas ...json.RawMessage) (json.RawMessage, error) {
	docs := make([]any, 0, len(schemas))
	for i, raw := range schemas {
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		v, err := graph.DecodeValue(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: schema %d is not JSON: %v", ErrNoDefault, i, err)
		}
		docs = append(docs, v)
	}
	var combined any = true
	if len(docs) > 0 {
		// Each document keeps its own root for its local $refs.
		parts := make([]any, len(docs))
		for i, d := range docs {
			parts[i] = rooted{schema: d, root: d}
		}
		combined = map[string]any{"allOf": parts}
	}
	g := generator{}
	v, err := g.value(combined, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDefault, err)
	}
	out, err := graph.EncodeValue(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDefault, err)
	}
	for i, raw := range schemas {
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		s, err := graph.CompileSchema(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: schema %d does not compile: %v", ErrNoDefault, i, err)
		}
		if err := graph.ValidateValue(s, out); err != nil {
			return nil, fmt.Errorf("%w: the generated value %s does not satisfy schema %d: %v", ErrNoDefault, abbreviate(out), i, err)
		}
	}
	return out, nil
}

// rooted is a subschema together with the document its $refs resolve in.
type rooted struct {
	schema any
	root   any
}

type generator struct{}

// value generates a value for schema s whose $refs resolve in root.
func (g generator) value(s any, root any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("schema nests or refers too deeply")
	}
	m, err := g.flatten(s, root, depth)
	if err != nil {
		return nil, err
	}
	if m == nil { // true or {}
		return map[string]any{}, nil
	}
	if c, ok := m.obj["const"]; ok {
		return c, nil
	}
	if e, ok := m.obj["enum"].([]any); ok {
		if len(e) == 0 {
			return nil, errors.New("enum is empty")
		}
		return e[0], nil
	}
	switch g.typeOf(m.obj) {
	case "object":
		return g.object(m, depth)
	case "array":
		return g.array(m, depth)
	case "string":
		return str(m.obj), nil
	case "integer":
		return number(m.obj, true)
	case "number":
		return number(m.obj, false)
	case "boolean":
		return false, nil
	case "null":
		return nil, nil
	}
	return map[string]any{}, nil
}

// flat is a schema with allOf, $ref and the first anyOf/oneOf alternative
// merged into one object; root is where nested $refs resolve.
type flat struct {
	obj map[string]any
	// props maps a property name to the subschemas constraining it (from
	// every merged part), each with its root.
	props map[string][]rooted
	// items, additional: subschemas for array items / extra properties.
	items      []rooted
	prefix     [][]rooted
	additional []rooted
}

// flatten merges s into one flat schema, or nil when s accepts anything.
func (g generator) flatten(s any, root any, depth int) (*flat, error) {
	f := &flat{obj: map[string]any{}, props: map[string][]rooted{}}
	constrained, err := g.merge(f, s, root, depth)
	if err != nil {
		return nil, err
	}
	if !constrained {
		return nil, nil
	}
	return f, nil
}

// merge folds schema s into f and reports whether s constrained anything.
func (g generator) merge(f *flat, s any, root any, depth int) (bool, error) {
	if depth > maxDepth {
		return false, errors.New("schema nests or refers too deeply")
	}
	switch t := s.(type) {
	case rooted:
		return g.merge(f, t.schema, t.root, depth)
	case bool:
		if !t {
			return false, errors.New("schema false accepts no value")
		}
		return false, nil
	case map[string]any:
		constrained := false
		if ref, ok := t["$ref"].(string); ok {
			target, err := resolveRef(root, ref)
			if err != nil {
				return false, err
			}
			c, err := g.merge(f, target, root, depth+1)
			if err != nil {
				return false, err
			}
			constrained = constrained || c
		}
		if all, ok := t["allOf"].([]any); ok {
			for _, part := range all {
				c, err := g.merge(f, part, root, depth+1)
				if err != nil {
					return false, err
				}
				constrained = constrained || c
			}
		}
		for _, key := range []string{"anyOf", "oneOf"} {
			if alts, ok := t[key].([]any); ok && len(alts) > 0 {
				c, err := g.merge(f, alts[0], root, depth+1)
				if err != nil {
					return false, err
				}
				constrained = constrained || c
			}
		}
		for _, k := range slices.Sorted(maps.Keys(t)) {
			v := t[k]
			switch k {
			case "$ref", "allOf", "anyOf", "oneOf", "$defs", "definitions", "$schema", "$id", "$comment",
				"title", "description", "examples", "default", "deprecated", "readOnly", "writeOnly":
				continue
			case "properties":
				props, _ := v.(map[string]any)
				for name, ps := range props {
					f.props[name] = append(f.props[name], rooted{ps, root})
				}
			case "items":
				f.items = append(f.items, rooted{v, root})
			case "prefixItems":
				list, _ := v.([]any)
				for i, ps := range list {
					for len(f.prefix) <= i {
						f.prefix = append(f.prefix, nil)
					}
					f.prefix[i] = append(f.prefix[i], rooted{ps, root})
				}
			case "additionalProperties":
				f.additional = append(f.additional, rooted{v, root})
			case "required":
				list, _ := v.([]any)
				have, _ := f.obj["required"].([]any)
				for _, r := range list {
					if !slices.Contains(have, r) {
						have = append(have, r)
					}
				}
				f.obj["required"] = have
			case "type":
				if err := mergeType(f.obj, v); err != nil {
					return false, err
				}
			case "minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties":
				f.obj[k] = stricter(f.obj[k], v, true)
			case "maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties":
				f.obj[k] = stricter(f.obj[k], v, false)
			default:
				if _, set := f.obj[k]; !set {
					f.obj[k] = v
				}
			}
			constrained = true
		}
		return constrained, nil
	case nil:
		return false, nil
	}
	return false, fmt.Errorf("schema of type %T is not an object or a boolean", s)
}

// mergeType intersects the type constraint in obj with v.
func mergeType(obj map[string]any, v any) error {
	next := typeList(v)
	cur, ok := obj["type"]
	if !ok {
		obj["type"] = next
		return nil
	}
	var out []string
	for _, t := range typeList(cur) {
		if slices.Contains(next, t) || (t == "integer" && slices.Contains(next, "number")) {
			out = append(out, t)
		} else if t == "number" && slices.Contains(next, "integer") {
			out = append(out, "integer")
		}
	}
	if len(out) == 0 {
		return fmt.Errorf("types %v and %v have nothing in common", typeList(cur), next)
	}
	obj["type"] = out
	return nil
}

func typeList(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []string:
		return t
	case []any:
		out := make([]string, 0, len(t))
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// stricter returns the tighter of two bounds (the larger lower bound when
// lower, else the smaller upper bound).
func stricter(cur, next any, lower bool) any {
	if cur == nil {
		return next
	}
	a, aok := toFloat(cur)
	b, bok := toFloat(next)
	if !aok || !bok {
		return cur
	}
	if (lower && b > a) || (!lower && b < a) {
		return next
	}
	return cur
}

// typeOf picks the type to generate: the first declared one, else one
// implied by the keywords present, else "" (an unconstrained value).
func (g generator) typeOf(obj map[string]any) string {
	if types := typeList(obj["type"]); len(types) > 0 {
		return types[0]
	}
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := obj[k]; ok {
				return true
			}
		}
		return false
	}
	switch {
	case has("required", "minProperties", "maxProperties", "patternProperties", "propertyNames"):
		return "object"
	case has("minItems", "maxItems", "uniqueItems", "contains"):
		return "array"
	case has("minLength", "maxLength", "pattern", "format"):
		return "string"
	case has("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
		return "number"
	}
	return ""
}

func (g generator) object(f *flat, depth int) (any, error) {
	out := map[string]any{}
	add := func(name string) error {
		if _, done := out[name]; done {
			return nil
		}
		parts := f.props[name]
		if len(parts) == 0 {
			parts = f.additionalSchemas()
		}
		v, err := g.value(allOf(parts), nil, depth+1)
		if err != nil {
			return fmt.Errorf("property %q: %w", name, err)
		}
		out[name] = v
		return nil
	}
	required, _ := f.obj["required"].([]any)
	for _, r := range required {
		name, ok := r.(string)
		if !ok {
			continue
		}
		if err := add(name); err != nil {
			return nil, err
		}
	}
	if minProps, ok := toFloat(f.obj["minProperties"]); ok {
		for _, name := range slices.Sorted(maps.Keys(f.props)) {
			if float64(len(out)) >= minProps {
				break
			}
			if err := add(name); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// additionalSchemas is what a required property without its own schema
// must satisfy.
func (f *flat) additionalSchemas() []rooted {
	var out []rooted
	for _, a := range f.additional {
		if _, isBool := a.schema.(bool); !isBool {
			out = append(out, a)
		}
	}
	return out
}

func (g generator) array(f *flat, depth int) (any, error) {
	n := 0
	if v, ok := toFloat(f.obj["minItems"]); ok {
		n = int(v)
	}
	out := make([]any, 0, n)
	for i := range n {
		parts := f.items
		if i < len(f.prefix) {
			parts = f.prefix[i]
		}
		v, err := g.value(allOf(parts), nil, depth+1)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// allOf combines rooted subschemas into one schema value for value().
func allOf(parts []rooted) any {
	switch len(parts) {
	case 0:
		return true
	case 1:
		return parts[0]
	}
	list := make([]any, len(parts))
	for i, p := range parts {
		list[i] = p
	}
	return map[string]any{"allOf": list}
}

// formatSamples are valid examples of the common string formats.
var formatSamples = map[string]string{
	"date-time":     "1970-01-01T00:00:00Z",
	"date":          "1970-01-01",
	"time":          "00:00:00Z",
	"duration":      "PT0S",
	"email":         "sample@example.com",
	"idn-email":     "sample@example.com",
	"hostname":      "example.com",
	"idn-hostname":  "example.com",
	"ipv4":          "192.0.2.1",
	"ipv6":          "2001:db8::1",
	"uri":           "https://example.com/sample",
	"iri":           "https://example.com/sample",
	"uri-reference": "https://example.com/sample",
	"iri-reference": "https://example.com/sample",
	"uri-template":  "https://example.com/{sample}",
	"uuid":          "00000000-0000-0000-0000-000000000000",
	"json-pointer":  "/sample",
	"regex":         "sample",
}

func str(obj map[string]any) string {
	if f, ok := obj["format"].(string); ok {
		if s, ok := formatSamples[f]; ok {
			return s
		}
	}
	s := "sample"
	minLen, hasMin := toFloat(obj["minLength"])
	maxLen, hasMax := toFloat(obj["maxLength"])
	if hasMax && float64(len(s)) > maxLen {
		s = s[:max(int(maxLen), 0)]
	}
	if hasMin && float64(len(s)) < minLen {
		s += strings.Repeat("s", int(minLen)-len(s))
	}
	if p, ok := obj["pattern"].(string); ok {
		if re, err := regexp.Compile(p); err == nil && !re.MatchString(s) && re.MatchString("") && !hasMin {
			s = ""
		}
	}
	return s
}

// number returns 0 moved into the schema's bounds and onto its multipleOf.
func number(obj map[string]any, integer bool) (any, error) {
	lo, hasLo := toFloat(obj["minimum"])
	if x, ok := toFloat(obj["exclusiveMinimum"]); ok && (!hasLo || x >= lo) {
		lo, hasLo = nextAbove(x, integer, obj), true
	}
	hi, hasHi := toFloat(obj["maximum"])
	if x, ok := toFloat(obj["exclusiveMaximum"]); ok && (!hasHi || x <= hi) {
		hi, hasHi = nextBelow(x, integer), true
	}
	v := 0.0
	if hasLo && v < lo {
		v = lo
	}
	if hasHi && v > hi {
		v = hi
	}
	if integer {
		v = math.Ceil(v)
	}
	if m, ok := toFloat(obj["multipleOf"]); ok && m > 0 {
		v = math.Ceil(v/m) * m
	}
	if hasLo && hasHi && lo > hi {
		return nil, fmt.Errorf("bounds [%v, %v] are empty", lo, hi)
	}
	if integer || v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return json.Number(strconv.FormatInt(int64(v), 10)), nil
	}
	return json.Number(strconv.FormatFloat(v, 'g', -1, 64)), nil
}

// nextAbove is the smallest candidate strictly above an exclusive minimum:
// the next integer, or x+1 (or the midpoint towards a maximum) for numbers.
func nextAbove(x float64, integer bool, obj map[string]any) float64 {
	if integer {
		return math.Floor(x) + 1
	}
	if hi, ok := toFloat(obj["maximum"]); ok && hi < x+1 {
		return (x + hi) / 2
	}
	if hi, ok := toFloat(obj["exclusiveMaximum"]); ok && hi <= x+1 {
		return (x + hi) / 2
	}
	return x + 1
}

func nextBelow(x float64, integer bool) float64 {
	if integer {
		return math.Ceil(x) - 1
	}
	return x - 1
}

func toFloat(v any) (float64, bool) {
	switch t := v.(type) {
	case json.Number:
		f, err := t.Float64()
		return f, err == nil
	case float64:
		return t, true
	case int:
		return float64(t), true
	}
	return 0, false
}

// resolveRef resolves a local reference ("#", "#/$defs/x") in root.
func resolveRef(root any, ref string) (any, error) {
	if !strings.HasPrefix(ref, "#") {
		return nil, fmt.Errorf("$ref %q is not local; only references into the same schema are followed", ref)
	}
	tokens, err := graph.ParsePointer(strings.TrimPrefix(ref, "#"))
	if err != nil {
		return nil, fmt.Errorf("$ref %q: %v", ref, err)
	}
	cur := root
	for _, t := range tokens {
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[t]
			if !ok {
				return nil, fmt.Errorf("$ref %q resolves to nothing", ref)
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) {
				return nil, fmt.Errorf("$ref %q resolves to nothing", ref)
			}
			cur = c[i]
		default:
			return nil, fmt.Errorf("$ref %q resolves to nothing", ref)
		}
	}
	return cur, nil
}

func abbreviate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
