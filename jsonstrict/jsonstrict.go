// Package jsonstrict reads JSON the way a contract should be read: valid
// UTF-8, exactly one value, no duplicate keys (last-wins would make two
// readers see different documents), no unknown or case-folded field names,
// no wrong types, integers that are integers, and no string or number that
// RFC 8785 canonicalization cannot hold. It is the one strict decoder: the
// graph package reads documents with it and the API reads request bodies
// with it.
//
// It is two passes: the jsontext tokenizer (github.com/go-json-experiment/json)
// walks the text once against the target type, checking what json.Unmarshal
// alone would let through and naming the offending value by its path;
// encoding/json's json.Unmarshal then fills the value.
package jsonstrict

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

	"github.com/go-json-experiment/json/jsontext"
)

// Error is why data does not decode. Syntax errors (not UTF-8, not JSON)
// carry Offset; shape errors carry Path.
type Error struct {
	// Syntax is set when the text is not valid UTF-8 JSON; otherwise the
	// JSON is well formed and its shape does not fit the target.
	Syntax bool
	// Path holds the unescaped reference tokens of the offending value
	// (object member names and array indexes), outermost first.
	Path []string
	// Offset is the byte offset of a syntax error, when known.
	Offset int64
	// Message says what is wrong, without the path.
	Message string
}

// Error renders the path (as /-joined tokens) and the message.
func (e *Error) Error() string {
	if len(e.Path) == 0 {
		return e.Message
	}
	return "/" + strings.Join(e.Path, "/") + ": " + e.Message
}

// Field is the outermost member name on the error's path ("" for an error
// about the whole value).
func (e *Error) Field() string {
	if len(e.Path) == 0 {
		return ""
	}
	return e.Path[0]
}

// Options change how strictly a value is read.
type Options struct {
	// NullIsAbsent lets any member be null, meaning absent: the field keeps
	// its zero value. Without it a null is refused wherever the target type
	// is not json.RawMessage or an interface.
	NullIsAbsent bool
}

// Decode checks data against v's type, then fills v (a non-nil pointer).
// Struct fields tagged `required:"true"` must be present (and, with
// NullIsAbsent, not null). Every failure is an *Error.
func Decode(data []byte, v any, opt Options) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("jsonstrict: Decode needs a non-nil pointer, got %T", v)
	}
	if err := Check(data, rv.Type().Elem(), opt); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		// Unreachable for the types Check accepts: it let through only
		// what fills them.
		return &Error{Message: err.Error()}
	}
	return nil
}

// Check reports whether data decodes strictly into a value of type t,
// without decoding it.
//
// One pass of the jsontext tokenizer walks the text against t; it also
// refuses duplicate names, invalid UTF-8 and unpaired surrogate escapes.
// Malformed JSON is a syntax error wherever it is, so when the walk stops
// early, for whatever reason, the whole text is checked for syntax first and
// a syntax error is reported in place of what the walk found.
func Check(data []byte, t reflect.Type, opt Options) error {
	c := &checker{data: data, opt: opt, dec: jsontext.NewDecoder(bytes.NewBuffer(data))}
	err := c.value(t)
	if err == nil {
		err = c.end()
	}
	if err == nil {
		return nil
	}
	if serr := syntaxCheck(data); serr != nil {
		return serr
	}
	return err
}

// syntaxCheck reports why data is not valid UTF-8 JSON, in encoding/json's
// words and byte offsets, or nil.
func syntaxCheck(data []byte) error {
	if !utf8.Valid(data) {
		return &Error{Syntax: true, Message: "not valid UTF-8"}
	}
	if json.Valid(data) {
		return nil
	}
	var v any
	err := json.Unmarshal(data, &v)
	if err == nil {
		err = errors.New("invalid JSON")
	}
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return &Error{Syntax: true, Offset: se.Offset, Message: fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Syntax: true, Message: "unexpected end of JSON input"}
	}
	return &Error{Syntax: true, Message: err.Error()}
}

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// checker walks the tokens of one JSON text against a Go type.
type checker struct {
	data []byte
	dec  *jsontext.Decoder
	opt  Options
	// path locates the value being read; its member names are only
	// unquoted when an error needs them.
	path []step
}

// step is one reference token of a path: a member name known as a string,
// a member name still quoted in the text (data[start:end]), or an array
// index.
type step struct {
	name       string
	start, end int
	index      int
	kind       stepKind
}

type stepKind uint8

const (
	stepName stepKind = iota
	stepQuoted
	stepIndex
)

// tokens renders the path as unescaped reference tokens.
func (c *checker) tokens() []string {
	if len(c.path) == 0 {
		return nil
	}
	out := make([]string, len(c.path))
	for i, s := range c.path {
		switch s.kind {
		case stepName:
			out[i] = s.name
		case stepQuoted:
			name, _ := jsontext.AppendUnquote(nil, c.data[s.start:s.end]) // read by the tokenizer: valid
			out[i] = string(name)
		case stepIndex:
			out[i] = strconv.Itoa(s.index)
		}
	}
	return out
}

func (c *checker) fail(format string, args ...any) error {
	return &Error{Path: c.tokens(), Message: fmt.Sprintf(format, args...)}
}

// readErr turns an error of the tokenizer into the *Error the token walk
// reports. A text Check finds syntactically valid can fail the tokenizer
// only by a duplicate name or an unpaired surrogate escape (which
// encoding/json would silently replace and RFC 8785 cannot canonicalize);
// any other failure is a syntax error that syntaxCheck names.
func (c *checker) readErr(err error) error {
	var se *jsontext.SyntacticError
	if errors.Is(err, jsontext.ErrDuplicateName) && errors.As(err, &se) {
		key := se.JSONPointer.LastToken()
		return &Error{Path: append(c.tokens(), key), Message: fmt.Sprintf("duplicate key %q", key)}
	}
	if errors.As(err, &se) && (bytes.Contains(c.data, []byte(`\ud`)) || bytes.Contains(c.data, []byte(`\uD`))) {
		return &Error{Syntax: true, Path: c.tokens(), Message: "string holds an unpaired UTF-16 surrogate escape"}
	}
	return &Error{Syntax: true, Message: err.Error()}
}

// read reads the next scalar value, or the next member name, raw.
func (c *checker) read() (jsontext.Value, error) {
	v, err := c.dec.ReadValue()
	if err != nil {
		return nil, c.readErr(err)
	}
	return v, nil
}

// delim reads the next token, a '{' or '[' whose kind was peeked, or a
// closing delimiter.
func (c *checker) delim() error {
	if _, err := c.dec.ReadToken(); err != nil {
		return c.readErr(err)
	}
	return nil
}

// end makes sure nothing follows the value.
func (c *checker) end() error {
	if _, err := c.dec.ReadToken(); err != io.EOF {
		return &Error{Syntax: true, Message: "more than one JSON value"} // syntaxCheck says why
	}
	return nil
}

// value reads the next value and checks it against Go type t.
func (c *checker) value(t reflect.Type) error {
	if t == rawMessageType || t.Kind() == reflect.Interface ||
		(t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(unmarshalerType)) {
		// Free-form: any JSON, still without duplicate keys or
		// out-of-range numbers; a custom unmarshaler judges the rest.
		return c.free()
	}
	kind := c.dec.PeekKind()
	if kind == 'n' {
		if _, err := c.read(); err != nil {
			return err
		}
		if c.opt.NullIsAbsent {
			return nil
		}
		return c.fail("must not be null")
	}
	switch t.Kind() {
	case reflect.Pointer:
		return c.value(t.Elem())
	case reflect.Struct:
		if kind != '{' {
			return c.mismatch("must be an object")
		}
		return c.object(typeFields(t))
	case reflect.Map:
		if kind != '{' {
			return c.mismatch("must be an object")
		}
		if err := c.delim(); err != nil {
			return err
		}
		if k := t.Key().Kind(); k != reflect.String {
			return c.fail("unsupported map key type %s", t.Key())
		}
		return c.members(func() error { return c.value(t.Elem()) })
	case reflect.Slice, reflect.Array:
		if kind != '[' {
			return c.mismatch("must be an array")
		}
		if err := c.delim(); err != nil {
			return err
		}
		return c.elements(func() error { return c.value(t.Elem()) })
	case reflect.String:
		if kind != '"' {
			return c.mismatch("must be a string")
		}
		_, err := c.read()
		return err
	case reflect.Bool:
		if kind != 't' && kind != 'f' {
			return c.mismatch("must be a boolean")
		}
		_, err := c.read()
		return err
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if kind != '0' {
			return c.mismatch("must be an integer")
		}
		n, err := c.read()
		if err != nil {
			return err
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			return c.fail("must be an integer, got %s", n)
		}
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if kind != '0' {
			return c.mismatch("must be a non-negative integer")
		}
		n, err := c.read()
		if err != nil {
			return err
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			return c.fail("must be a non-negative integer, got %s", n)
		}
		return nil
	case reflect.Float32, reflect.Float64:
		if kind != '0' {
			return c.mismatch("must be a number")
		}
		return c.number()
	}
	return c.mismatch("unsupported field type %s", t)
}

// mismatch refuses a value of the wrong kind, once the tokenizer has read
// its first token without an error (the token walk read it before judging
// its kind).
func (c *checker) mismatch(format string, args ...any) error {
	var err error
	switch c.dec.PeekKind() {
	case '{', '[':
		err = c.delim()
	default:
		_, err = c.read()
	}
	if err != nil {
		return err
	}
	return c.fail(format, args...)
}

// object reads a struct's members: no unknown or case-folded names, each
// value of its field's type, and every required field present.
func (c *checker) object(fields *structFields) error {
	if err := c.delim(); err != nil {
		return err
	}
	var present uint64 // bit i: fields.required[i] was given, not null
	var presentMany map[string]bool
	if len(fields.required) > 64 {
		presentMany = map[string]bool{}
	}
	var unquoted []byte
	for c.dec.PeekKind() != '}' {
		quoted, err := c.read()
		if err != nil {
			return err
		}
		name := quoted[1 : len(quoted)-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			unquoted, _ = jsontext.AppendUnquote(unquoted[:0], quoted) // read by the tokenizer: valid
			name = unquoted
		}
		f, ok := fields.byName[string(name)]
		if !ok {
			key := string(name)
			c.path = append(c.path, step{kind: stepName, name: key})
			return c.unknown(key, fields)
		}
		c.path = append(c.path, step{kind: stepName, name: f.name})
		if f.required >= 0 && c.dec.PeekKind() != 'n' {
			if presentMany != nil {
				presentMany[f.name] = true
			} else {
				present |= 1 << f.required
			}
		}
		if err := c.value(f.typ); err != nil {
			return err
		}
		c.path = c.path[:len(c.path)-1]
	}
	if err := c.delim(); err != nil {
		return err
	}
	for i, name := range fields.required {
		if (presentMany == nil && present&(1<<i) == 0) || (presentMany != nil && !presentMany[name]) {
			c.path = append(c.path, step{kind: stepName, name: name})
			err := c.fail("%s is required", name)
			c.path = c.path[:len(c.path)-1]
			return err
		}
	}
	return nil
}

// unknown refuses a member name the type does not have, saying which one
// was meant when only the case differs.
func (c *checker) unknown(key string, fields *structFields) error {
	for _, name := range fields.names {
		if strings.EqualFold(name, key) {
			return c.fail("unknown field %q (field names are case-sensitive: did you mean %q?)", key, name)
		}
	}
	return c.fail("unknown field %q", key)
}

// free checks a free-form value: any JSON, but no duplicate keys and no
// number a float64 cannot hold (RFC 8785, I-JSON).
func (c *checker) free() error {
	switch c.dec.PeekKind() {
	case '{':
		if err := c.delim(); err != nil {
			return err
		}
		return c.members(c.free)
	case '[':
		if err := c.delim(); err != nil {
			return err
		}
		return c.elements(c.free)
	case '0':
		return c.number()
	}
	_, err := c.read()
	return err
}

// number reads a number a float64 can hold.
func (c *checker) number() error {
	n, err := c.read()
	if err != nil {
		return err
	}
	if f, err := strconv.ParseFloat(string(n), 64); err != nil || math.IsInf(f, 0) {
		return c.fail("number %s is out of range", n)
	}
	return nil
}

// members reads an object's members after its '{' (the tokenizer refuses
// a name seen before) and calls value for each with the name pushed on the
// path.
func (c *checker) members(value func() error) error {
	for c.dec.PeekKind() != '}' {
		quoted, err := c.read()
		if err != nil {
			return err
		}
		end := int(c.dec.InputOffset())
		c.path = append(c.path, step{kind: stepQuoted, start: end - len(quoted), end: end})
		if err := value(); err != nil {
			return err
		}
		c.path = c.path[:len(c.path)-1]
	}
	return c.delim()
}

// elements reads an array's elements after its '[', with the index pushed
// on the path.
func (c *checker) elements(value func() error) error {
	for i := 0; c.dec.PeekKind() != ']'; i++ {
		c.path = append(c.path, step{kind: stepIndex, index: i})
		if err := value(); err != nil {
			return err
		}
		c.path = c.path[:len(c.path)-1]
	}
	return c.delim()
}

// structFields is what the checker knows of a struct type: its exact json
// member names, their types, and which are required.
type structFields struct {
	byName   map[string]field
	names    []string
	required []string
}

// field is one member of a struct type.
type field struct {
	name string
	typ  reflect.Type
	// required is the field's index in structFields.required, or -1.
	required int
}

var fieldCache sync.Map // reflect.Type → *structFields; derived from types only

func typeFields(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{byName: map[string]field{}}
	for _, sf := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if !sf.IsExported() || name == "-" || (sf.Anonymous && name == "" && indirect(sf.Type).Kind() == reflect.Struct) {
			continue // an embedded struct's fields are promoted, and visited on their own
		}
		if name == "" {
			name = sf.Name
		}
		if _, dup := f.byName[name]; dup {
			continue // the shallower field wins, as encoding/json decides
		}
		fd := field{name: name, typ: sf.Type, required: -1}
		if sf.Tag.Get("required") == "true" {
			fd.required = len(f.required)
			f.required = append(f.required, name)
		}
		f.byName[name] = fd
		f.names = append(f.names, name)
	}
	fieldCache.Store(t, f)
	return f
}

func indirect(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Pointer {
		return t.Elem()
	}
	return t
}
