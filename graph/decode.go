package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Decode error codes. They match the failure package's codes of the same name
// so the API can pass them through unchanged (400, 400 and 413).
const (
	CodeInvalidJSON      = "INVALID_JSON"
	CodeInvalidDocument  = "INVALID_DOCUMENT"
	CodeDocumentTooLarge = "DOCUMENT_TOO_LARGE"
)

// DecodeError is why a document is not well-formed. A draft may hold graph
// issues, but never a DecodeError: those are refused before anything is
// stored.
type DecodeError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Path is a JSON pointer to the offending value, when one is known.
	Path string `json:"path,omitempty"`
	// Line and Column (1-based) locate the problem in the source text when
	// the decoder knows them (YAML documents: see ParseYAML); 0 otherwise.
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
}

// Error renders the code, the path and the source position when known, and
// the message.
func (e *DecodeError) Error() string {
	where := ""
	if e.Path != "" {
		where = " at " + e.Path
	}
	if e.Line > 0 {
		where += fmt.Sprintf(" (line %d, column %d)", e.Line, e.Column)
	}
	return e.Code + where + ": " + e.Message
}

// Decode strictly decodes a JSON graph document: valid UTF-8 JSON, exactly
// one top-level object, no duplicate keys (last-wins would make two readers
// see different graphs), no unknown or case-folded field names, no wrong
// types, no null instead of a value, and schemaVersion 1. It does not
// validate the graph; see Validate.
//
// It is encoding/json twice: a pass over the tokens checks what
// json.Unmarshal alone would let through (duplicates, the exact case of
// field names, nulls, integers, numbers and strings RFC 8785 cannot
// canonicalize) against the Document type itself, naming the offending
// value by its JSON pointer; json.Unmarshal then fills the Document.
func Decode(data []byte) (*Document, error) {
	if len(data) > DefaultLimits.MaxDocumentBytes {
		return nil, &DecodeError{Code: CodeDocumentTooLarge,
			Message: fmt.Sprintf("document is %d bytes; the limit is %d", len(data), DefaultLimits.MaxDocumentBytes)}
	}
	if !utf8.Valid(data) {
		return nil, &DecodeError{Code: CodeInvalidJSON, Message: "document is not valid UTF-8"}
	}
	// Malformed JSON is INVALID_JSON wherever it is, so it is looked for
	// before any problem of shape.
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return nil, syntaxError(err)
	}
	if err := checkStrict(data); err != nil {
		return nil, err
	}
	var doc Document
	if err := json.Unmarshal(data, &doc); err != nil {
		// Unreachable: the check above accepts only what fills a Document.
		return nil, &DecodeError{Code: CodeInvalidDocument, Message: err.Error()}
	}
	if doc.SchemaVersion != SchemaVersion {
		return nil, &DecodeError{Code: CodeInvalidDocument, Path: "/schemaVersion",
			Message: fmt.Sprintf("unsupported schemaVersion %d; only %d is understood", doc.SchemaVersion, SchemaVersion)}
	}
	return &doc, nil
}

func syntaxError(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return &DecodeError{Code: CodeInvalidJSON, Message: fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return &DecodeError{Code: CodeInvalidJSON, Message: "unexpected end of JSON input"}
	}
	return &DecodeError{Code: CodeInvalidJSON, Message: err.Error()}
}

var (
	documentType   = reflect.TypeFor[Document]()
	rawMessageType = reflect.TypeFor[json.RawMessage]()
)

// strictCheck walks the tokens of one valid JSON document against a Go
// type. path holds the raw (unescaped) reference tokens of the value being
// read, so an error names it exactly.
type strictCheck struct {
	data []byte
	dec  *json.Decoder
	path []string
	// surrogates is set when the text holds a \uD800–\uDFFF escape: only
	// then are strings read back from the text to find unpaired ones.
	surrogates bool
	// sawVersion is set by the document's schemaVersion member.
	sawVersion bool
}

// checkStrict checks valid JSON text against Document; see Decode.
func checkStrict(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	c := &strictCheck{data: data, dec: dec,
		surrogates: bytes.Contains(data, []byte(`\ud`)) || bytes.Contains(data, []byte(`\uD`))}
	tok, err := c.token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return &DecodeError{Code: CodeInvalidDocument, Message: "document must be a JSON object"}
	}
	if err := c.value(tok, documentType); err != nil {
		return err
	}
	if !c.sawVersion {
		return &DecodeError{Code: CodeInvalidDocument, Path: "/schemaVersion", Message: "schemaVersion is required"}
	}
	return nil
}

func (c *strictCheck) fail(format string, args ...any) error {
	return &DecodeError{Code: CodeInvalidDocument, Path: Pointer(c.path...), Message: fmt.Sprintf(format, args...)}
}

// token reads the next token; a string is checked for unpaired surrogate
// escapes, which encoding/json would silently replace and RFC 8785 cannot
// canonicalize.
func (c *strictCheck) token() (json.Token, error) {
	start := c.dec.InputOffset()
	tok, err := c.dec.Token()
	if err != nil {
		return nil, syntaxError(err) // unreachable for valid JSON
	}
	if _, ok := tok.(string); ok && c.surrogates {
		raw := c.data[start:c.dec.InputOffset()]
		body := raw[bytes.IndexByte(raw, '"')+1 : len(raw)-1]
		if !validSurrogates(body) {
			return nil, &DecodeError{Code: CodeInvalidJSON, Path: Pointer(c.path...),
				Message: "string holds an unpaired UTF-16 surrogate escape"}
		}
	}
	return tok, nil
}

// value checks the value that starts with tok against Go type t.
func (c *strictCheck) value(tok json.Token, t reflect.Type) error {
	if t == rawMessageType {
		return c.free(tok)
	}
	if tok == nil {
		return c.fail("must not be null")
	}
	switch t.Kind() {
	case reflect.Pointer:
		return c.value(tok, t.Elem())
	case reflect.Struct:
		if tok != json.Delim('{') {
			return c.fail("must be an object")
		}
		fields := jsonFields(t)
		return c.members(func(key string) error {
			f, ok := fields[key]
			if !ok {
				return c.fail("unknown field %q", key)
			}
			c.sawVersion = c.sawVersion || len(c.path) == 1 && key == "schemaVersion"
			return c.member(f)
		})
	case reflect.Map:
		if tok != json.Delim('{') {
			return c.fail("must be an object")
		}
		return c.members(func(string) error { return c.member(t.Elem()) })
	case reflect.Slice:
		if tok != json.Delim('[') {
			return c.fail("must be an array")
		}
		return c.elements(func() error { return c.member(t.Elem()) })
	case reflect.String:
		if _, ok := tok.(string); !ok {
			return c.fail("must be a string")
		}
		return nil
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			return c.fail("must be a boolean")
		}
		return nil
	case reflect.Int, reflect.Int64:
		n, ok := tok.(json.Number)
		if !ok {
			return c.fail("must be an integer")
		}
		if _, err := strconv.ParseInt(string(n), 10, 64); err != nil {
			return c.fail("must be an integer, got %s", n)
		}
		return nil
	case reflect.Float64:
		n, ok := tok.(json.Number)
		if !ok {
			return c.fail("must be a number")
		}
		return c.number(n)
	}
	return c.fail("unsupported field type %s", t)
}

// member reads the next value and checks it against t.
func (c *strictCheck) member(t reflect.Type) error {
	tok, err := c.token()
	if err != nil {
		return err
	}
	return c.value(tok, t)
}

// free checks a free-form value (a schema, a literal): any JSON, but no
// duplicate keys and no number a float64 cannot hold (RFC 8785, I-JSON).
func (c *strictCheck) free(tok json.Token) error {
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			return c.members(func(string) error {
				tok, err := c.token()
				if err != nil {
					return err
				}
				return c.free(tok)
			})
		}
		return c.elements(func() error {
			tok, err := c.token()
			if err != nil {
				return err
			}
			return c.free(tok)
		})
	case json.Number:
		return c.number(t)
	}
	return nil
}

func (c *strictCheck) number(n json.Number) error {
	if f, err := n.Float64(); err != nil || math.IsInf(f, 0) {
		return c.fail("number %s is out of range", n)
	}
	return nil
}

// members reads an object's members after its '{', refusing a key seen
// before, and calls value for each with the key pushed on the path.
func (c *strictCheck) members(value func(key string) error) error {
	seen := map[string]bool{}
	for c.dec.More() {
		tok, err := c.token()
		if err != nil {
			return err
		}
		key := tok.(string)
		c.path = append(c.path, key)
		if seen[key] {
			return c.fail("duplicate key %q", key)
		}
		seen[key] = true
		if err := value(key); err != nil {
			return err
		}
		c.path = c.path[:len(c.path)-1]
	}
	_, err := c.dec.Token() // '}'
	return err
}

// elements reads an array's elements after its '[', with the index pushed
// on the path.
func (c *strictCheck) elements(value func() error) error {
	for i := 0; c.dec.More(); i++ {
		c.path = append(c.path, strconv.Itoa(i))
		if err := value(); err != nil {
			return err
		}
		c.path = c.path[:len(c.path)-1]
	}
	_, err := c.dec.Token() // ']'
	return err
}

// validSurrogates reports whether every \uD800–\uDFFF escape in a raw JSON
// string body is part of a high+low pair.
func validSurrogates(body []byte) bool {
	pendingHigh := false
	for i := 0; i < len(body); i++ {
		isHigh, isLow := false, false
		if body[i] == '\\' {
			i++
			if body[i] == 'u' {
				u, _ := strconv.ParseUint(string(body[i+1:i+5]), 16, 16) // valid JSON: four hex digits
				i += 4
				isHigh, isLow = u >= 0xD800 && u < 0xDC00, u >= 0xDC00 && u < 0xE000
			}
		}
		if isLow != pendingHigh {
			return false // a low one without a high one, or a high one not followed by a low one
		}
		pendingHigh = isHigh
	}
	return !pendingHigh
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type; derived from types only

// jsonFields maps the exact json names of t's fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && !f.Anonymous && name != "-" {
			if name == "" {
				name = f.Name
			}
			m[name] = f.Type
		}
	}
	fieldCache.Store(t, m)
	return m
}

// DecodeStored decodes a document read back from storage (a saved draft),
// reporting a failure as a graph issue rather than an error: a stored draft
// is work in progress and what publication or simulation refuses is shown
// with the graph's other issues. PostgreSQL reformats jsonb, so the bytes
// are compacted first and the size limit applies to what was authored.
func DecodeStored(raw json.RawMessage) (*Document, []Issue) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, []Issue{{Code: CodeInvalidJSON, Message: err.Error()}}
	}
	doc, err := Decode(buf.Bytes())
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			return nil, []Issue{{Code: de.Code, Path: de.Path, Message: de.Message}}
		}
		return nil, []Issue{{Code: CodeInvalidDocument, Message: err.Error()}}
	}
	return doc, nil
}
