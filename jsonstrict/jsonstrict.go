// Package jsonstrict reads JSON the way a contract should be read: valid
// UTF-8, exactly one value, no duplicate keys (last-wins would make two
// readers see different documents), no unknown or case-folded field names,
// no wrong types, integers that are integers, and no string or number that
// RFC 8785 canonicalization cannot hold. It is the one strict decoder: the
// graph package reads documents with it and the API reads request bodies
// with it.
//
// It is encoding/json twice: a pass over the tokens checks what
// json.Unmarshal alone would let through against the target type itself,
// naming the offending value by its path; json.Unmarshal then fills the
// value.
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
func Check(data []byte, t reflect.Type, opt Options) error {
	if !utf8.Valid(data) {
		return &Error{Syntax: true, Message: "not valid UTF-8"}
	}
	// Malformed JSON is a syntax error wherever it is, so it is looked for
	// before any problem of shape.
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return syntaxError(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	c := &checker{data: data, dec: dec, opt: opt,
		surrogates: bytes.Contains(data, []byte(`\ud`)) || bytes.Contains(data, []byte(`\uD`))}
	return c.member(t)
}

func syntaxError(err error) error {
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

// checker walks the tokens of one valid JSON text against a Go type. path
// holds the raw reference tokens of the value being read.
type checker struct {
	data []byte
	dec  *json.Decoder
	opt  Options
	path []string
	// surrogates is set when the text holds a \uD800–\uDFFF escape: only
	// then are strings read back from the text to find unpaired ones.
	surrogates bool
}

func (c *checker) fail(format string, args ...any) error {
	return &Error{Path: append([]string(nil), c.path...), Message: fmt.Sprintf(format, args...)}
}

// token reads the next token; a string is checked for unpaired surrogate
// escapes, which encoding/json would silently replace and RFC 8785 cannot
// canonicalize.
func (c *checker) token() (json.Token, error) {
	start := c.dec.InputOffset()
	tok, err := c.dec.Token()
	if err != nil {
		return nil, syntaxError(err) // unreachable for valid JSON
	}
	if _, ok := tok.(string); ok && c.surrogates {
		raw := c.data[start:c.dec.InputOffset()]
		body := raw[bytes.IndexByte(raw, '"')+1 : len(raw)-1]
		if !validSurrogates(body) {
			return nil, &Error{Syntax: true, Path: append([]string(nil), c.path...),
				Message: "string holds an unpaired UTF-16 surrogate escape"}
		}
	}
	return tok, nil
}

// member reads the next value and checks it against t.
func (c *checker) member(t reflect.Type) error {
	tok, err := c.token()
	if err != nil {
		return err
	}
	return c.value(tok, t)
}

// value checks the value that starts with tok against Go type t.
func (c *checker) value(tok json.Token, t reflect.Type) error {
	if t == rawMessageType || t.Kind() == reflect.Interface ||
		(t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(unmarshalerType)) {
		// Free-form: any JSON, still without duplicate keys or
		// out-of-range numbers; a custom unmarshaler judges the rest.
		return c.free(tok)
	}
	if tok == nil {
		if c.opt.NullIsAbsent {
			return nil
		}
		return c.fail("must not be null")
	}
	switch t.Kind() {
	case reflect.Pointer:
		return c.value(tok, t.Elem())
	case reflect.Struct:
		if tok != json.Delim('{') {
			return c.fail("must be an object")
		}
		fields := typeFields(t)
		present := map[string]bool{}
		if err := c.members(func(key string) error {
			f, ok := fields.byName[key]
			if !ok {
				return c.unknown(key, fields)
			}
			tok, err := c.token()
			if err != nil {
				return err
			}
			if tok != nil {
				present[key] = true
			}
			return c.value(tok, f)
		}); err != nil {
			return err
		}
		for _, name := range fields.required {
			if !present[name] {
				c.path = append(c.path, name)
				err := c.fail("%s is required", name)
				c.path = c.path[:len(c.path)-1]
				return err
			}
		}
		return nil
	case reflect.Map:
		if tok != json.Delim('{') {
			return c.fail("must be an object")
		}
		if k := t.Key().Kind(); k != reflect.String {
			return c.fail("unsupported map key type %s", t.Key())
		}
		return c.members(func(string) error { return c.member(t.Elem()) })
	case reflect.Slice, reflect.Array:
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
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := tok.(json.Number)
		if !ok {
			return c.fail("must be an integer")
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			return c.fail("must be an integer, got %s", n)
		}
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := tok.(json.Number)
		if !ok {
			return c.fail("must be a non-negative integer")
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			return c.fail("must be a non-negative integer, got %s", n)
		}
		return nil
	case reflect.Float32, reflect.Float64:
		n, ok := tok.(json.Number)
		if !ok {
			return c.fail("must be a number")
		}
		return c.number(n)
	}
	return c.fail("unsupported field type %s", t)
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
func (c *checker) free(tok json.Token) error {
	switch t := tok.(type) {
	case json.Delim:
		next := func() error {
			tok, err := c.token()
			if err != nil {
				return err
			}
			return c.free(tok)
		}
		if t == '{' {
			return c.members(func(string) error { return next() })
		}
		return c.elements(next)
	case json.Number:
		return c.number(t)
	}
	return nil
}

func (c *checker) number(n json.Number) error {
	if f, err := n.Float64(); err != nil || math.IsInf(f, 0) {
		return c.fail("number %s is out of range", n)
	}
	return nil
}

// members reads an object's members after its '{', refusing a key seen
// before, and calls value for each with the key pushed on the path.
func (c *checker) members(value func(key string) error) error {
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
func (c *checker) elements(value func() error) error {
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

// structFields is what the checker knows of a struct type: its exact json
// member names, their types, and which are required.
type structFields struct {
	byName   map[string]reflect.Type
	names    []string
	required []string
}

var fieldCache sync.Map // reflect.Type → *structFields; derived from types only

func typeFields(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{byName: map[string]reflect.Type{}}
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
		f.byName[name] = sf.Type
		f.names = append(f.names, name)
		if sf.Tag.Get("required") == "true" {
			f.required = append(f.required, name)
		}
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
