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
	"unicode/utf8"
)

// tokenWalkCheck is Check as it was before jsontext: encoding/json's
// json.Decoder.Token walk. It is the oracle FuzzSameAsTokenWalk holds Check
// to, answer for answer.
func tokenWalkCheck(data []byte, t reflect.Type, opt Options) error {
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
		return walkSyntaxError(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	c := &walker{data: data, dec: dec, opt: opt,
		surrogates: bytes.Contains(data, []byte(`\ud`)) || bytes.Contains(data, []byte(`\uD`))}
	return c.member(t)
}

func walkSyntaxError(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return &Error{Syntax: true, Offset: se.Offset, Message: fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Syntax: true, Message: "unexpected end of JSON input"}
	}
	return &Error{Syntax: true, Message: err.Error()}
}

// walker walks the tokens of one valid JSON text against a Go type. path
// holds the raw reference tokens of the value being read.
type walker struct {
	data []byte
	dec  *json.Decoder
	opt  Options
	path []string
	// surrogates is set when the text holds a \uD800–\uDFFF escape: only
	// then are strings read back from the text to find unpaired ones.
	surrogates bool
}

func (c *walker) fail(format string, args ...any) error {
	return &Error{Path: append([]string(nil), c.path...), Message: fmt.Sprintf(format, args...)}
}

// token reads the next token; a string is checked for unpaired surrogate
// escapes, which encoding/json would silently replace and RFC 8785 cannot
// canonicalize.
func (c *walker) token() (json.Token, error) {
	start := c.dec.InputOffset()
	tok, err := c.dec.Token()
	if err != nil {
		return nil, walkSyntaxError(err) // unreachable for valid JSON
	}
	if _, ok := tok.(string); ok && c.surrogates {
		raw := c.data[start:c.dec.InputOffset()]
		body := raw[bytes.IndexByte(raw, '"')+1 : len(raw)-1]
		if !walkValidSurrogates(body) {
			return nil, &Error{Syntax: true, Path: append([]string(nil), c.path...),
				Message: "string holds an unpaired UTF-16 surrogate escape"}
		}
	}
	return tok, nil
}

// member reads the next value and checks it against t.
func (c *walker) member(t reflect.Type) error {
	tok, err := c.token()
	if err != nil {
		return err
	}
	return c.value(tok, t)
}

// value checks the value that starts with tok against Go type t.
func (c *walker) value(tok json.Token, t reflect.Type) error {
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
			fd, ok := fields.byName[key]
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
			return c.value(tok, fd.typ)
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
func (c *walker) unknown(key string, fields *structFields) error {
	for _, name := range fields.names {
		if strings.EqualFold(name, key) {
			return c.fail("unknown field %q (field names are case-sensitive: did you mean %q?)", key, name)
		}
	}
	return c.fail("unknown field %q", key)
}

// free checks a free-form value: any JSON, but no duplicate keys and no
// number a float64 cannot hold (RFC 8785, I-JSON).
func (c *walker) free(tok json.Token) error {
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

func (c *walker) number(n json.Number) error {
	if f, err := n.Float64(); err != nil || math.IsInf(f, 0) {
		return c.fail("number %s is out of range", n)
	}
	return nil
}

// members reads an object's members after its '{', refusing a key seen
// before, and calls value for each with the key pushed on the path.
func (c *walker) members(value func(key string) error) error {
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
func (c *walker) elements(value func() error) error {
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

// walkValidSurrogates reports whether every \uD800–\uDFFF escape in a raw JSON
// string body is part of a high+low pair.
func walkValidSurrogates(body []byte) bool {
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
