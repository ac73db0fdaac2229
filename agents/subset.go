package agents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/weftworks/weft/graph"
)

// Violation is one way a tool input breaks its schema.
type Violation struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// maxViolations bounds what CheckSubset reports.
const maxViolations = 20

// CheckSubset checks a tool call input against the schema subset the
// harness enforces before anything runs (SPEC §7): type, enum, required,
// properties, additionalProperties (false, or a schema) and items. Other
// keywords are ignored here (the contract's full schema is checked next, and
// deep validation is the action's job). It returns nil when the input
// passes; a schema or input that is not JSON is one violation.
func CheckSubset(schema, input json.RawMessage) []Violation {
	s, err := graph.DecodeValue(schema)
	if err != nil {
		return []Violation{{Path: "", Message: "the tool's input schema is not JSON"}}
	}
	v, err := graph.DecodeValue(input)
	if err != nil {
		return []Violation{{Path: "", Message: "the input is not a single JSON value"}}
	}
	c := &subsetChecker{}
	c.check(s, v, "", 0)
	return c.out
}

type subsetChecker struct{ out []Violation }

func (c *subsetChecker) add(path, format string, args ...any) {
	if len(c.out) < maxViolations {
		c.out = append(c.out, Violation{Path: path, Message: fmt.Sprintf(format, args...)})
	}
}

func (c *subsetChecker) check(schema, v any, path string, depth int) {
	if depth > 64 {
		c.add(path, "the input nests too deeply")
		return
	}
	switch s := schema.(type) {
	case bool:
		if !s {
			c.add(path, "no value is allowed here")
		}
		return
	case map[string]any:
		c.checkObject(s, v, path, depth)
	}
}

func (c *subsetChecker) checkObject(s map[string]any, v any, path string, depth int) {
	if t, ok := s["type"]; ok && !typeMatches(t, v) {
		c.add(path, "must be %s, not %s", describeType(t), jsonType(v))
		return
	}
	if e, ok := s["enum"].([]any); ok && !slices.ContainsFunc(e, func(x any) bool { return sameJSON(x, v) }) {
		c.add(path, "must be one of the enumerated values")
	}
	switch val := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if name, ok := r.(string); ok {
					if _, present := val[name]; !present {
						c.add(path+"/"+escape(name), "is required")
					}
				}
			}
		}
		for _, k := range sortedKeys(val) {
			if ps, ok := props[k]; ok {
				c.check(ps, val[k], path+"/"+escape(k), depth+1)
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					c.add(path+"/"+escape(k), "is not an allowed property")
				}
			case map[string]any:
				c.check(ap, val[k], path+"/"+escape(k), depth+1)
			}
		}
	case []any:
		if items, ok := s["items"]; ok {
			for i, x := range val {
				c.check(items, x, fmt.Sprintf("%s/%d", path, i), depth+1)
			}
		}
	}
}

func typeMatches(t, v any) bool {
	switch tt := t.(type) {
	case string:
		return isType(tt, v)
	case []any:
		for _, x := range tt {
			if s, ok := x.(string); ok && isType(s, v) {
				return true
			}
		}
		return false
	}
	return true // a malformed type keyword is the full schema's problem
}

func isType(t string, v any) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		r, ok := new(big.Rat).SetString(n.String())
		return ok && r.IsInt()
	}
	return false
}

func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case nil:
		return "null"
	}
	return "unknown"
}

func describeType(t any) string {
	switch tt := t.(type) {
	case string:
		return tt
	case []any:
		parts := make([]string, 0, len(tt))
		for _, x := range tt {
			parts = append(parts, fmt.Sprint(x))
		}
		return "one of " + strings.Join(parts, ", ")
	}
	return fmt.Sprint(t)
}

// sameJSON compares two decoded values as JSON (canonical form).
func sameJSON(a, b any) bool {
	ca, err1 := graph.Canonical(a)
	cb, err2 := graph.Canonical(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}

func escape(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
