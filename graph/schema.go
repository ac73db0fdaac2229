package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// schemaURL is the name a compiled schema is registered under. It is never
// fetched: compilation runs with a loader that refuses every URL, so a schema
// can only use its own definitions and the embedded meta-schemas.
const schemaURL = "https://schemas.weft.invalid/schema.json"

// schemaNamePattern bounds names in Document.Schemas: port schema names are
// short identifiers, never URLs or paths.
var schemaNamePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)

// refuseLoader keeps schema compilation pure: no file or network access.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema %q is not allowed; a schema may only reference itself", url)
}

// CompileSchema compiles a JSON Schema (draft 2020-12 unless it declares
// another $schema) without any I/O. Validation uses it for Document.Schemas
// and validator nodes; activities use it at run time to validate values
// (validator nodes, the input node's schema at enqueue), so both agree on
// what a schema means. The result is safe for concurrent use.
func CompileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("schema is empty")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL)
}

// ValidateValue validates a JSON value against a compiled schema. Numbers
// are decoded as json.Number, as the schema library expects, so large
// integers keep their precision.
func ValidateValue(s *jsonschema.Schema, value json.RawMessage) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return fmt.Errorf("value is not valid JSON: %w", err)
	}
	return s.Validate(v)
}

// SchemaError is one way a value breaks a JSON Schema: where in the value
// (a JSON pointer), which keyword (a pointer into the schema), and why.
type SchemaError struct {
	Path    string `json:"path"`
	Keyword string `json:"keyword"`
	Message string `json:"message"`
}

var schemaPrinter = message.NewPrinter(language.English)

// SchemaErrors validates value against s and lists why it fails: the leaves
// of the validation error tree (the causes, "missing property id", rather
// than their containers, "allOf failed"), at most limit of them; nil when
// the value is valid. The error is for a value that is not JSON.
func SchemaErrors(s *jsonschema.Schema, value json.RawMessage, limit int) ([]SchemaError, error) {
	err := ValidateValue(s, value)
	if err == nil {
		return nil, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, err
	}
	out := []SchemaError{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(out) >= limit {
			return
		}
		if len(e.Causes) == 0 {
			out = append(out, SchemaError{
				Path:    Pointer(e.InstanceLocation...),
				Keyword: Pointer(e.ErrorKind.KeywordPath()...),
				Message: e.ErrorKind.LocalizedString(schemaPrinter),
			})
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return out, nil
}

// SchemaByName returns the schema a port schema name stands for: the named
// entry of Schemas, or `true` (accept everything) for "any".
func (d *Document) SchemaByName(name string) (json.RawMessage, bool) {
	if name == AnySchema {
		return json.RawMessage("true"), true
	}
	s, ok := d.Schemas[name]
	return s, ok
}

// ValidatorSchema resolves a validator node's schema field: a JSON string
// names an entry of Schemas; an object is the schema itself.
func (d *Document) ValidatorSchema(n Node) (json.RawMessage, error) {
	raw := bytes.TrimSpace(n.Schema)
	if len(raw) == 0 {
		return nil, errors.New("validator has no schema")
	}
	switch raw[0] {
	case '"':
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return nil, err
		}
		s, ok := d.Schemas[name]
		if !ok {
			return nil, fmt.Errorf("schema %q is not in schemas", name)
		}
		return s, nil
	case '{':
		return raw, nil
	}
	return nil, errors.New("schema must be the name of an entry in schemas or an inline schema object")
}

// InputNode returns the document's input node: the one whose `out` value is
// the enqueued input, validated against its schema at enqueue.
func (d *Document) InputNode() (Node, bool) {
	for _, n := range d.Nodes {
		if n.Kind == KindInput {
			return n, true
		}
	}
	return Node{}, false
}
