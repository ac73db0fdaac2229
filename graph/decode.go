package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
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
func Decode(data []byte) (*Document, error) {
	if len(data) > DefaultLimits.MaxDocumentBytes {
		return nil, &DecodeError{Code: CodeDocumentTooLarge,
			Message: fmt.Sprintf("document is %d bytes; the limit is %d", len(data), DefaultLimits.MaxDocumentBytes)}
	}
	if !utf8.Valid(data) {
		return nil, &DecodeError{Code: CodeInvalidJSON, Message: "document is not valid UTF-8"}
	}
	if doc, ok := decodeFast(data); ok {
		return doc, nil
	}
	return decodeChecked(data)
}

// decodeChecked is Decode's checking path: it finds and reports the first
// problem of a document the one-pass path (decode_fast.go) did not accept,
// and decodes the rare well-formed document it does not handle.
func decodeChecked(data []byte) (*Document, error) {
	tree, err := parseTree(data)
	if err != nil {
		return nil, err
	}
	if err := checkDocumentTree(tree); err != nil {
		return nil, err
	}
	// The tree has the exact shape of Document, so the standard decoder
	// (which alone would accept case-folded names and duplicates) now only
	// fills the struct.
	var doc Document
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, &DecodeError{Code: CodeInvalidDocument, Message: err.Error()}
	}
	return &doc, nil
}

// checkDocumentTree checks a generic tree (objects as map[string]any, numbers
// as json.Number) against the Document type. A YAML front end converts its
// input to the same tree and calls this, so both syntaxes accept exactly the
// same documents.
func checkDocumentTree(tree any) error {
	obj, ok := tree.(map[string]any)
	if !ok {
		return &DecodeError{Code: CodeInvalidDocument, Message: "document must be a JSON object"}
	}
	if err := checkShape(obj, documentType, ""); err != nil {
		return err
	}
	v, ok := obj["schemaVersion"]
	if !ok {
		return &DecodeError{Code: CodeInvalidDocument, Path: "/schemaVersion", Message: "schemaVersion is required"}
	}
	if n, _ := v.(json.Number).Int64(); n != SchemaVersion {
		return &DecodeError{Code: CodeInvalidDocument, Path: "/schemaVersion",
			Message: fmt.Sprintf("unsupported schemaVersion %s; only %d is understood", v, SchemaVersion)}
	}
	return nil
}

// parseTree reads exactly one JSON value into a generic tree (numbers as
// json.Number), rejecting malformed JSON, trailing data and duplicate object
// keys. json.Valid and a duplicate-key scan run first because they are far
// cheaper than decoding token by token.
func parseTree(data []byte) (any, error) {
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return nil, syntaxError(err)
	}
	switch path, key, err := findDuplicateKey(data); err {
	case nil:
	case errDuplicateKey:
		return nil, &DecodeError{Code: CodeInvalidDocument, Path: path, Message: fmt.Sprintf("duplicate key %q", key)}
	default:
		return nil, &DecodeError{Code: CodeInvalidJSON, Path: path, Message: err.Error()}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, syntaxError(err)
	}
	return v, nil
}

// scanFrame is one open object or array during findDuplicateKey.
type scanFrame struct {
	object    bool
	expectKey bool
	keys      map[string]struct{}
	key       string // current member key (object)
	index     int    // current element index (array)
}

// findDuplicateKey scans valid JSON for an object holding the same key twice
// (after unescaping) and returns the JSON pointer of the second occurrence.
// The standard decoder silently keeps the last one, so two readers of the
// same bytes could disagree about the graph.
func findDuplicateKey(data []byte) (path, key string, err error) {
	var stack []*scanFrame
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '{':
			stack = append(stack, &scanFrame{object: true, expectKey: true, keys: map[string]struct{}{}})
		case '[':
			stack = append(stack, &scanFrame{})
		case '}', ']':
			stack = stack[:len(stack)-1]
		case ',':
			if top := stack[len(stack)-1]; top.object {
				top.expectKey = true
			} else {
				top.index++
			}
		case '"':
			j := i + 1
			escaped := false
			for ; data[j] != '"'; j++ {
				if data[j] == '\\' {
					escaped = true
					j++
				}
			}
			if escaped && !validSurrogates(data[i+1:j]) {
				return scanPathFrom(stack), "", errLoneSurrogate
			}
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
				top := stack[n-1]
				k := string(data[i+1 : j])
				if escaped {
					_ = json.Unmarshal(data[i:j+1], &k) // valid JSON: cannot fail
				}
				top.key, top.expectKey = k, false
				if _, dup := top.keys[k]; dup {
					return scanPath(stack), k, errDuplicateKey
				}
				top.keys[k] = struct{}{}
			}
			i = j
		}
	}
	return "", "", nil
}

var (
	errDuplicateKey  = errors.New("duplicate key")
	errLoneSurrogate = errors.New("string holds an unpaired UTF-16 surrogate escape")
)

// validSurrogates reports whether every \uD800–\uDFFF escape in a raw JSON
// string body is part of a high+low pair. encoding/json would silently
// replace a lone one, and RFC 8785 cannot canonicalize it.
func validSurrogates(body []byte) bool {
	pendingHigh := false
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			if pendingHigh {
				return false
			}
			continue
		}
		i++
		if body[i] != 'u' {
			if pendingHigh {
				return false
			}
			continue
		}
		u, _ := strconv.ParseUint(string(body[i+1:i+5]), 16, 16) // valid JSON: four hex digits
		i += 4
		switch {
		case u >= 0xD800 && u < 0xDC00:
			if pendingHigh {
				return false
			}
			pendingHigh = true
		case u >= 0xDC00 && u < 0xE000:
			if !pendingHigh {
				return false
			}
			pendingHigh = false
		default:
			if pendingHigh {
				return false
			}
		}
	}
	return !pendingHigh
}

// scanPathFrom is the pointer of the value being scanned: for an object
// whose key is still expected it names the object itself.
func scanPathFrom(stack []*scanFrame) string {
	if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
		return scanPath(stack[:n-1])
	}
	return scanPath(stack)
}

func scanPath(stack []*scanFrame) string {
	var b strings.Builder
	for _, f := range stack {
		b.WriteByte('/')
		if f.object {
			b.WriteString(escapeToken(f.key))
		} else {
			b.WriteString(strconv.Itoa(f.index))
		}
	}
	return b.String()
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

// checkShape checks v against Go type t the way a strict decoder would:
// exact field names from json tags, exact JSON types, integers for int
// fields. json.RawMessage accepts any value. Keys are visited in sorted order
// so the reported error does not depend on map iteration.
func checkShape(v any, t reflect.Type, path string) error {
	bad := func(format string, args ...any) error {
		return &DecodeError{Code: CodeInvalidDocument, Path: path, Message: fmt.Sprintf(format, args...)}
	}
	if t == rawMessageType {
		return checkNumbers(v, path)
	}
	if v == nil {
		return bad("must not be null")
	}
	switch t.Kind() {
	case reflect.Pointer:
		return checkShape(v, t.Elem(), path)
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return bad("must be an object")
		}
		for _, k := range sortedKeys(obj) {
			f, ok := fieldByTag(t, k)
			if !ok {
				return &DecodeError{Code: CodeInvalidDocument, Path: path + "/" + escapeToken(k), Message: fmt.Sprintf("unknown field %q", k)}
			}
			if err := checkShape(obj[k], f.Type, path+"/"+escapeToken(k)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return bad("must be an object")
		}
		for _, k := range sortedKeys(obj) {
			if err := checkShape(obj[k], t.Elem(), path+"/"+escapeToken(k)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			return bad("must be an array")
		}
		for i, e := range arr {
			if err := checkShape(e, t.Elem(), path+"/"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
		return nil
	case reflect.String:
		if _, ok := v.(string); !ok {
			return bad("must be a string")
		}
		return nil
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return bad("must be a boolean")
		}
		return nil
	case reflect.Int, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			return bad("must be an integer")
		}
		if _, err := strconv.ParseInt(string(n), 10, 64); err != nil {
			return bad("must be an integer, got %s", n)
		}
		return nil
	case reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			return bad("must be a number")
		}
		if f, err := n.Float64(); err != nil || math.IsInf(f, 0) {
			return bad("number %s is out of range", n)
		}
		return nil
	}
	return bad("unsupported field type %s", t)
}

// checkNumbers rejects numbers a float64 cannot hold anywhere in a free-form
// value (literals, schemas): RFC 8785 (I-JSON) has no form for them, so the
// document could never be checksummed.
func checkNumbers(v any, path string) error {
	switch t := v.(type) {
	case json.Number:
		if f, err := t.Float64(); err != nil || math.IsInf(f, 0) {
			return &DecodeError{Code: CodeInvalidDocument, Path: path, Message: fmt.Sprintf("number %s is out of range", t)}
		}
	case map[string]any:
		for _, k := range sortedKeys(t) {
			if err := checkNumbers(t[k], path+"/"+escapeToken(k)); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range t {
			if err := checkNumbers(e, path+"/"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// fieldByTag finds the struct field whose json tag name is exactly name.
func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		if n, _, _ := strings.Cut(tag, ","); n == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// sortedKeys returns m's keys in ascending order, so every walk over a map is
// deterministic.
func sortedKeys[V any](m map[string]V) []string {
	return sortedKeysBuf(make([]string, 0, len(m)), m)
}

// sortedKeysBuf is sortedKeys appending to buf[:0]; hot loops pass a small
// array on their stack so the usual few ports or entries allocate nothing.
func sortedKeysBuf[V any](buf []string, m map[string]V) []string {
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
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
