package graph

import (
	"bytes"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// raw appends the RFC 8785 form of raw JSON text: what jcs.Transform(raw)
// yields. Well-formed input is canonicalized in one pass straight into the
// output buffer; anything the direct path does not accept (malformed JSON,
// duplicate keys, unpaired surrogate escapes, invalid UTF-8, numbers out of
// range, nesting deeper than rawMaxDepth) is handed to jcs.Transform, so the
// output and the error are exactly the reference's. FuzzCanonicalRaw checks
// the two agree on arbitrary bytes.
func (e *canonEncoder) raw(raw []byte) error {
	start := len(e.buf)
	r := rawCanon{src: raw, e: e}
	r.ws()
	if r.value() {
		r.ws()
		if r.pos == len(r.src) {
			return nil
		}
	}
	e.buf = e.buf[:start]
	out, err := jcs.Transform(raw)
	if err != nil {
		return err
	}
	e.buf = append(e.buf, out...)
	return nil
}

// rawMaxDepth bounds the direct path's recursion; deeper values take the
// reference route (which allows 10,000 levels).
const rawMaxDepth = 200

// rawCanon is one direct canonicalization of JSON text into e.buf.
type rawCanon struct {
	src   []byte
	pos   int
	depth int
	e     *canonEncoder
	// scratch holds unescaped string contents; tmp is where an object's
	// members are reordered.
	scratch, tmp []byte
}

func (r *rawCanon) ws() { r.pos = skipWS(r.src, r.pos) }

// value canonicalizes one value at r.pos; false means "take the reference
// route" (nothing is reported: the reference produces the error).
func (r *rawCanon) value() bool {
	if r.pos >= len(r.src) {
		return false
	}
	switch c := r.src[r.pos]; {
	case c == '{':
		return r.object()
	case c == '[':
		return r.array()
	case c == '"':
		s, _, ok := r.string()
		if !ok {
			return false
		}
		r.e.strBytes(s)
		return true
	case c == 't':
		return r.literal("true")
	case c == 'f':
		return r.literal("false")
	case c == 'n':
		return r.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return r.number()
	}
	return false
}

func (r *rawCanon) literal(lit string) bool {
	if !bytes.HasPrefix(r.src[r.pos:], []byte(lit)) {
		return false
	}
	r.pos += len(lit)
	r.e.buf = append(r.e.buf, lit...)
	return true
}

// number appends a JSON number in its ECMAScript form. Integers of at most
// 15 digits are exact float64 values already printed that way ("-0" aside);
// everything else goes through float64, as RFC 8785 prescribes.
func (r *rawCanon) number() bool {
	start := r.pos
	p, integer, ok := scanNumber(r.src, start)
	if !ok {
		return false
	}
	r.pos = p
	tok := r.src[start:p]
	digits := len(tok)
	if tok[0] == '-' {
		digits--
	}
	if integer && digits <= 15 && !(digits == 1 && tok[len(tok)-1] == '0' && tok[0] == '-') {
		r.e.buf = append(r.e.buf, tok...)
		return true
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil {
		return false
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return false
	}
	r.e.buf = append(r.e.buf, s...)
	return true
}

// string reads the JSON string at r.pos (see scanString); s is valid until
// the next call.
func (r *rawCanon) string() ([]byte, bool, bool) {
	s, end, escaped, ok := scanString(r.src, r.pos, &r.scratch)
	if ok {
		r.pos = end
	}
	return s, escaped, ok
}

func (r *rawCanon) array() bool {
	if r.depth++; r.depth > rawMaxDepth {
		return false
	}
	r.pos++
	r.e.buf = append(r.e.buf, '[')
	for more := !r.consume(']'); more; {
		r.ws()
		if !r.value() {
			return false
		}
		var ok bool
		if more, ok = r.next(']'); !ok {
			return false
		}
	}
	r.e.buf = append(r.e.buf, ']')
	r.depth--
	return true
}

// consume skips whitespace and then c if it is next, reporting whether it
// was.
func (r *rawCanon) consume(c byte) bool {
	r.ws()
	if r.pos < len(r.src) && r.src[r.pos] == c {
		r.pos++
		return true
	}
	return false
}

// next reads what follows an element or member: a comma, which it writes
// (more), or the closing byte; ok is false for anything else.
func (r *rawCanon) next(closing byte) (more, ok bool) {
	if r.consume(',') {
		r.e.buf = append(r.e.buf, ',')
		return true, true
	}
	return false, r.consume(closing)
}

// rawMember is one written member of an object being canonicalized: its
// unescaped name and where its "name":value text lies in the output.
type rawMember struct {
	name       []byte
	start, end int
}

func (r *rawCanon) object() bool {
	if r.depth++; r.depth > rawMaxDepth {
		return false
	}
	r.pos++
	r.e.buf = append(r.e.buf, '{')
	base := len(r.e.buf)
	var mb [8]rawMember
	members := mb[:0]
	sorted := true
	for more := !r.consume('}'); more; {
		r.ws()
		if r.pos >= len(r.src) || r.src[r.pos] != '"' {
			return false
		}
		name, escaped, ok := r.string()
		if !ok {
			return false
		}
		if escaped {
			name = bytes.Clone(name) // in r.scratch, which the next string reuses
		}
		m := rawMember{name: name, start: len(r.e.buf)}
		r.e.strBytes(name)
		if !r.consume(':') {
			return false
		}
		r.e.buf = append(r.e.buf, ':')
		r.ws()
		if !r.value() {
			return false
		}
		m.end = len(r.e.buf)
		if n := len(members); n > 0 && compareUTF16Bytes(members[n-1].name, m.name) >= 0 {
			sorted = false
		}
		members = append(members, m)
		if more, ok = r.next('}'); !ok {
			return false
		}
	}
	if !sorted && !r.sortMembers(base, members) {
		return false
	}
	r.e.buf = append(r.e.buf, '}')
	r.depth--
	return true
}

// sortMembers rewrites the members written since base in name order; false
// when two names are equal (the reference rejects duplicate keys).
func (r *rawCanon) sortMembers(base int, members []rawMember) bool {
	slices.SortFunc(members, func(a, b rawMember) int { return compareUTF16Bytes(a.name, b.name) })
	for i := 1; i < len(members); i++ {
		if bytes.Equal(members[i-1].name, members[i].name) {
			return false
		}
	}
	tmp := r.tmp[:0]
	for i, m := range members {
		if i > 0 {
			tmp = append(tmp, ',')
		}
		tmp = append(tmp, r.e.buf[m.start:m.end]...)
	}
	r.e.buf = append(r.e.buf[:base], tmp...)
	r.tmp = tmp
	return true
}

// compareUTF16Bytes is compareUTF16 on byte slices.
func compareUTF16Bytes(a, b []byte) int {
	if isASCIIBytes(a) && isASCIIBytes(b) {
		return bytes.Compare(a, b)
	}
	return compareUTF16(string(a), string(b))
}

func isASCIIBytes(s []byte) bool {
	for _, c := range s {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// strBytes appends valid UTF-8 s as a JCS string (see str).
func (e *canonEncoder) strBytes(s []byte) {
	e.buf = append(e.buf, '"')
	for i := 0; i < len(s); {
		n := i
		for n < len(s) && s[n] >= 0x20 && s[n] != '"' && s[n] != '\\' {
			n++
		}
		e.buf = append(e.buf, s[i:n]...)
		if n == len(s) {
			break
		}
		e.escapeASCII(s[n])
		i = n + 1
	}
	e.buf = append(e.buf, '"')
}
