package graph

import (
	"crypto/sha256"
	"encoding"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Canonical returns the RFC 8785 (JCS) canonical JSON of v: what
// jcs.Transform(json.Marshal(v)) yields — object keys sorted by UTF-16 code
// units, no whitespace, minimal string escapes, numbers in their ECMAScript
// form (2.0 and 2 are the same) — computed directly from the Go value, which
// is several times cheaper than re-parsing the marshalled bytes. Values the
// direct path does not model (custom marshalers, embedded structs, ",string"
// fields) take exactly that slower route, and a test checks both agree.
// Content hashes in weft (revision checksums, contract hashes, idempotency
// input hashes, event hashes) are SHA256Hex of this. Numbers beyond float64
// precision (|n| > 2^53) lose precision, as RFC 8785 prescribes (I-JSON).
func Canonical(v any) ([]byte, error) {
	e := canonEncoder{buf: make([]byte, 0, 256)}
	typed, err := e.canonicalTyped(v)
	if !typed {
		err = e.value(reflect.ValueOf(v))
	}
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return e.buf, nil
}

// canonicalSlow is the reference definition of Canonical.
func canonicalSlow(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// SHA256Hex returns the lowercase hex sha256 of b.
func SHA256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// hashOf is SHA256Hex(Canonical(v)). The package's own types stream into
// the hash in chunks instead of building the whole text first.
func hashOf(v any) (string, error) { return hashOfSized(v, 512) }

// hashOfSized is hashOf starting with a buffer of size bytes (the most it
// grows to is about canonFlushSize plus one node).
func hashOfSized(v any, size int) (string, error) {
	h := sha256.New()
	e := canonEncoder{buf: make([]byte, 0, size), sink: h}
	typed, err := e.canonicalTyped(v)
	if !typed {
		err = e.value(reflect.ValueOf(v))
	}
	if err != nil {
		return "", fmt.Errorf("canonical json: %w", err)
	}
	h.Write(e.buf)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// canonFlushSize is how much output the typed encoders let accumulate before
// handing it to a sink.
const canonFlushSize = 8 << 10

type canonEncoder struct {
	buf []byte
	// sink, when set, receives the output in pieces: flush hands it what
	// is in buf at points where nothing written so far will be rewritten
	// (between array elements of the top-level types, never inside a raw
	// object being sorted).
	sink hash.Hash
	// keys is a stack of map keys being sorted, reused across maps.
	keys []string
}

// flush hands buf to the sink once it holds canonFlushSize bytes.
func (e *canonEncoder) flush() {
	if e.sink != nil && len(e.buf) >= canonFlushSize {
		e.sink.Write(e.buf)
		e.buf = e.buf[:0]
	}
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	jsonNumberType    = reflect.TypeFor[json.Number]()
)

// marshals reports whether encoding/json would call a custom marshaler for v.
func marshals(v reflect.Value) bool {
	t := v.Type()
	if t.Implements(jsonMarshalerType) || t.Implements(textMarshalerType) {
		return true
	}
	if t.Kind() != reflect.Pointer && v.CanAddr() {
		p := reflect.PointerTo(t)
		return p.Implements(jsonMarshalerType) || p.Implements(textMarshalerType)
	}
	return false
}

// slow appends the canonical form of v by the reference route.
func (e *canonEncoder) slow(v reflect.Value) error {
	x := v.Interface()
	if v.Kind() != reflect.Pointer && v.CanAddr() {
		x = v.Addr().Interface() // encoding/json calls pointer-receiver marshalers on addressable values
	}
	out, err := canonicalSlow(x)
	if err != nil {
		return err
	}
	e.buf = append(e.buf, out...)
	return nil
}

func (e *canonEncoder) value(v reflect.Value) error {
	if !v.IsValid() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	t := v.Type()
	if t == rawMessageType {
		raw := v.Bytes()
		if raw == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.raw(raw)
	}
	if marshals(v) {
		if t.Kind() == reflect.Pointer && v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.slow(v)
	}
	switch t.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.value(v.Elem())
	case reflect.Struct:
		return e.structValue(v)
	case reflect.Map:
		return e.mapValue(v)
	case reflect.Slice:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		if t.Elem().Kind() == reflect.Uint8 {
			p := reflect.PointerTo(t.Elem())
			if p.Implements(jsonMarshalerType) || p.Implements(textMarshalerType) {
				return e.slow(v)
			}
			e.buf = append(e.buf, '"')
			e.buf = base64.StdEncoding.AppendEncode(e.buf, v.Bytes())
			e.buf = append(e.buf, '"')
			return nil
		}
		return e.array(v)
	case reflect.Array:
		return e.array(v)
	case reflect.String:
		if t == jsonNumberType {
			s := v.String()
			if s == "" {
				s = "0" // as encoding/json writes an empty Number
			}
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || !json.Valid([]byte(s)) {
				return fmt.Errorf("invalid number literal %q", s)
			}
			return e.float(f)
		}
		e.str(v.String())
		return nil
	case reflect.Bool:
		e.buf = strconv.AppendBool(e.buf, v.Bool())
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n := v.Int(); n >= -1<<53 && n <= 1<<53 {
			e.buf = strconv.AppendInt(e.buf, n, 10)
			return nil
		}
		return e.float(float64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if n := v.Uint(); n <= 1<<53 {
			e.buf = strconv.AppendUint(e.buf, n, 10)
			return nil
		}
		return e.float(float64(v.Uint()))
	case reflect.Float32:
		// encoding/json writes the shortest float32 form; JCS re-reads it as
		// a float64.
		f, _ := strconv.ParseFloat(strconv.FormatFloat(v.Float(), 'g', -1, 32), 64)
		return e.float(f)
	case reflect.Float64:
		return e.float(v.Float())
	}
	return fmt.Errorf("unsupported type %s", t)
}

func (e *canonEncoder) float(f float64) error {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		// What NumberToJSON prints for an integral value this small (-0 is "0").
		e.buf = strconv.AppendInt(e.buf, int64(f), 10)
		return nil
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return err
	}
	e.buf = append(e.buf, s...)
	return nil
}

func (e *canonEncoder) array(v reflect.Value) error {
	e.buf = append(e.buf, '[')
	for i := range v.Len() {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.value(v.Index(i)); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, ']')
	return nil
}

func (e *canonEncoder) mapValue(v reflect.Value) error {
	if v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	kt := v.Type().Key()
	type member struct {
		name string
		val  reflect.Value
	}
	members := make([]member, 0, v.Len())
	for it := v.MapRange(); it.Next(); {
		k := it.Key()
		var name string
		switch {
		case kt.Kind() == reflect.String:
			name = k.String()
		case kt.Implements(textMarshalerType):
			return e.slow(v)
		case k.CanInt():
			name = strconv.FormatInt(k.Int(), 10)
		case k.CanUint():
			name = strconv.FormatUint(k.Uint(), 10)
		default:
			return fmt.Errorf("unsupported map key type %s", kt)
		}
		members = append(members, member{name, it.Value()})
	}
	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.name, b.name) })
	e.buf = append(e.buf, '{')
	for i, m := range members {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.str(m.name)
		e.buf = append(e.buf, ':')
		if err := e.value(m.val); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

func (e *canonEncoder) structValue(v reflect.Value) error {
	info := structInfoOf(v.Type())
	if info.slow {
		return e.slow(v)
	}
	e.buf = append(e.buf, '{')
	first := true
	for _, f := range info.fields {
		fv := v.Field(f.index)
		if f.omitEmpty && isEmptyValue(fv) {
			continue
		}
		if !first {
			e.buf = append(e.buf, ',')
		}
		first = false
		e.buf = append(e.buf, f.quoted...)
		e.buf = append(e.buf, ':')
		if err := e.value(fv); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

// isEmptyValue is encoding/json's omitempty test.
func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64,
		reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

type structField struct {
	index     int
	quoted    []byte // the canonical JSON of the name
	omitEmpty bool
}

// structInfo is the canonical member list of a struct type, sorted by name.
// slow marks types whose encoding/json rules the direct path does not model.
type structInfo struct {
	fields []structField
	slow   bool
}

var structInfos sync.Map // reflect.Type → *structInfo; derived from types only, never from data

func structInfoOf(t reflect.Type) *structInfo {
	if si, ok := structInfos.Load(t); ok {
		return si.(*structInfo)
	}
	si := &structInfo{}
	names := map[string]bool{}
	type named struct {
		name string
		f    structField
	}
	var fields []named
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if f.Anonymous {
			si.slow = true // embedded structs promote fields by encoding/json's dominance rules
			break
		}
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		if !simpleName(name) || names[name] || hasOpt(opts, "string") || hasOpt(opts, "omitzero") {
			si.slow = true
			break
		}
		names[name] = true
		var e canonEncoder
		e.str(name)
		fields = append(fields, named{name, structField{index: i, quoted: e.buf, omitEmpty: hasOpt(opts, "omitempty")}})
	}
	slices.SortFunc(fields, func(a, b named) int { return compareUTF16(a.name, b.name) })
	for _, f := range fields {
		si.fields = append(si.fields, f.f)
	}
	actual, _ := structInfos.LoadOrStore(t, si)
	return actual.(*structInfo)
}

func hasOpt(opts, want string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == want {
			return true
		}
	}
	return false
}

// simpleName reports whether a json tag name is one encoding/json uses as is
// (the conservative subset: anything else takes the slow path).
func simpleName(s string) bool {
	for _, c := range s {
		if !(c == '_' || c == '-' || c == '.' || c == '@' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return s != ""
}

// str appends s as a JCS string: only '"', '\\' and control characters are
// escaped (\b \t \n \f \r, else \u00xx); invalid UTF-8 becomes U+FFFD, as
// encoding/json would have written it.
func (e *canonEncoder) str(s string) {
	e.buf = append(e.buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				e.buf = append(e.buf, c)
			} else {
				e.escapeASCII(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			e.buf = utf8.AppendRune(e.buf, utf8.RuneError)
		} else {
			e.buf = append(e.buf, s[i:i+size]...)
		}
		i += size
	}
	e.buf = append(e.buf, '"')
}

// escapeASCII appends the JCS escape of '"', '\\' or a control character.
func (e *canonEncoder) escapeASCII(c byte) {
	switch c {
	case '"', '\\':
		e.buf = append(e.buf, '\\', c)
	case '\b':
		e.buf = append(e.buf, '\\', 'b')
	case '\t':
		e.buf = append(e.buf, '\\', 't')
	case '\n':
		e.buf = append(e.buf, '\\', 'n')
	case '\f':
		e.buf = append(e.buf, '\\', 'f')
	case '\r':
		e.buf = append(e.buf, '\\', 'r')
	default:
		e.buf = append(e.buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
	}
}

const hexDigits = "0123456789abcdef"

// compareUTF16 orders strings by UTF-16 code units (RFC 8785 §3.2.3). Byte
// order agrees except when a supplementary character meets U+E000–U+FFFF.
func compareUTF16(a, b string) int {
	if isASCII(a) && isASCII(b) {
		return strings.Compare(a, b)
	}
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	return slices.Compare(ua, ub)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
