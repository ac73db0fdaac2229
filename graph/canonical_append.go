package graph

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// The Append* functions write pieces of RFC 8785 canonical JSON straight
// into a buffer, byte for byte what Canonical writes for the same values,
// without Canonical's two passes (json.Marshal, then jcs.Transform parsing
// and re-serialising the result). Hot paths that hash many small documents
// of a known shape (the event log's hash chain) build their canonical form
// with them; anything else uses Canonical.

// AppendCanonicalString appends s as an RFC 8785 string: quoted, with \",
// \\, \b, \f, \n, \r and \t escaped, every other control character as
// \u00xx, and everything else (<, >, &, U+2028, non-ASCII) as it is. It
// appends nothing and reports false when s is not valid UTF-8, which
// Canonical would have replaced with U+FFFD: callers fall back to it.
func AppendCanonicalString(dst []byte, s string) ([]byte, bool) {
	if !utf8.ValidString(s) {
		return dst, false
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			const hex = "0123456789abcdef"
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), true
}

// maxExactInt is 2^53: integers up to it in magnitude are exact float64
// values, so their canonical form (ECMAScript's) is their decimal digits.
const maxExactInt = 1 << 53

// AppendCanonicalInt appends n as an RFC 8785 number: its decimal digits,
// or, beyond 2^53 in magnitude, the nearest float64 in ECMAScript form, as
// Canonical writes an integer.
func AppendCanonicalInt(dst []byte, n int64) []byte {
	if n >= -maxExactInt && n <= maxExactInt {
		return strconv.AppendInt(dst, n, 10)
	}
	s, _ := jcs.NumberToJSON(float64(n)) // finite: never an error
	return append(dst, s...)
}

// AppendCanonicalNumber appends the JSON number literal lit (as a
// json.Decoder with UseNumber returns it) as an RFC 8785 number: the
// float64 it denotes, in ECMAScript form. It fails, as Canonical does, on a
// literal that is not a JSON number or is beyond float64's range. lit may
// be bytes of a document being read: a short integer is not copied.
func AppendCanonicalNumber[T string | []byte](dst []byte, lit T) ([]byte, error) {
	if shortInt(lit) {
		if len(lit) == 2 && lit[0] == '-' && lit[1] == '0' {
			return append(dst, '0'), nil
		}
		return append(dst, lit...), nil
	}
	c, err := Canonical(json.Number(string(lit)))
	if err != nil {
		return dst, err
	}
	return append(dst, c...), nil
}

// shortInt reports whether lit is a JSON integer literal of at most 15
// digits (-?(0|[1-9][0-9]{0,14})): exactly a float64, whose ECMAScript form
// is the same digits ("-0" aside, which is 0).
func shortInt[T string | []byte](lit T) bool {
	d := lit
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 15 || (d[0] == '0' && len(d) > 1) {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

// CompareCanonicalKeyBytes is CompareCanonicalKeys for names held as bytes
// (a document being read), both valid UTF-8. UTF-8's byte order is code
// point order, which is UTF-16's except between U+E000–U+FFFF (lead byte
// 0xEE or 0xEF) and the runes beyond the Basic Multilingual Plane (lead
// byte 0xF0–0xF4, high surrogates 0xD800–0xDBFF in UTF-16): where the first
// difference puts those two against each other, the order flips. Both
// runes start at the first differing byte or share its lead byte, since
// everything before it is equal.
func CompareCanonicalKeyBytes(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	ca, cb := a[i], b[i]
	if ca >= 0xEE && cb >= 0xEE && (ca >= 0xF0) != (cb >= 0xF0) {
		if ca >= 0xF0 {
			return -1
		}
		return 1
	}
	return int(ca) - int(cb)
}

// CompareCanonicalKeys orders object member names as RFC 8785 sorts them:
// by their UTF-16 code units. Both must be valid UTF-8.
func CompareCanonicalKeys(a, b string) int {
	for i, j := 0, 0; ; {
		switch {
		case i == len(a) && j == len(b):
			return 0
		case i == len(a):
			return -1
		case j == len(b):
			return 1
		}
		// ASCII fast path: one byte is one code unit.
		if a[i] < utf8.RuneSelf && b[j] < utf8.RuneSelf {
			if a[i] != b[j] {
				return int(a[i]) - int(b[j])
			}
			i++
			j++
			continue
		}
		ra, na := utf8.DecodeRuneInString(a[i:])
		rb, nb := utf8.DecodeRuneInString(b[j:])
		if ra != rb {
			if ua, ub := utf16First(ra), utf16First(rb); ua != ub {
				return int(ua) - int(ub)
			}
			return int(ra) - int(rb) // one high surrogate: the low ones order as the runes
		}
		i += na
		j += nb
	}
}

// utf16First is the first UTF-16 code unit of r: r itself in the Basic
// Multilingual Plane, its high surrogate beyond. Two different runes that
// share a high surrogate differ in the second unit exactly as in code
// points, so comparing first units and then code points sorts as UTF-16.
func utf16First(r rune) rune {
	if r < 0x10000 {
		return r
	}
	return 0xD800 + ((r - 0x10000) >> 10)
}
