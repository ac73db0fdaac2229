package graph

import (
	"unicode/utf16"
	"unicode/utf8"
)

// The token scanning shared by the two one-pass JSON readers: Decode's
// (decode_fast.go) and the direct RFC 8785 canonicalization (canonical_raw.go).
// Each function reads one token of src starting at p and reports where it
// ends; false means the text is not that token (the callers then take their
// reference route, which reports the error).

// skipWS returns the position of the first non-whitespace byte at or after p.
func skipWS(src []byte, p int) int {
	for p < len(src) {
		switch src[p] {
		case ' ', '\t', '\n', '\r':
			p++
		default:
			return p
		}
	}
	return p
}

// scanNumber reads the JSON number at src[p:] and returns where it ends and
// whether it is an integer (no fraction, no exponent).
func scanNumber(src []byte, p int) (end int, integer, ok bool) {
	if p < len(src) && src[p] == '-' {
		p++
	}
	switch {
	case p < len(src) && src[p] == '0':
		p++
	case p < len(src) && src[p] >= '1' && src[p] <= '9':
		p = scanDigits(src, p)
	default:
		return 0, false, false
	}
	integer = true
	if p < len(src) && src[p] == '.' {
		integer = false
		q := p + 1
		if p = scanDigits(src, q); p == q {
			return 0, false, false
		}
	}
	if p < len(src) && (src[p] == 'e' || src[p] == 'E') {
		integer = false
		p++
		if p < len(src) && (src[p] == '+' || src[p] == '-') {
			p++
		}
		q := p
		if p = scanDigits(src, q); p == q {
			return 0, false, false
		}
	}
	return p, integer, true
}

// scanDigits returns the position after the run of decimal digits at p.
func scanDigits(src []byte, p int) int {
	for p < len(src) && src[p] >= '0' && src[p] <= '9' {
		p++
	}
	return p
}

// scanString reads the JSON string whose opening quote is at src[p] and
// returns its unescaped content and the position after the closing quote.
// The content is a slice of src when the string has no escapes; else
// (escaped) it is built in *scratch, which is reused by the next call. ok is
// false for malformed strings, invalid UTF-8 and unpaired surrogate escapes.
func scanString(src []byte, p int, scratch *[]byte) (s []byte, end int, escaped, ok bool) {
	p++
	start := p
	for {
		if p >= len(src) {
			return nil, 0, false, false
		}
		c := src[p]
		if c == '"' {
			s = src[start:p]
			if !utf8.Valid(s) {
				return nil, 0, false, false
			}
			return s, p + 1, false, true
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return nil, 0, false, false
		}
		p++
	}
	if !utf8.Valid(src[start:p]) {
		return nil, 0, false, false
	}
	out := append((*scratch)[:0], src[start:p]...)
	for {
		if p >= len(src) {
			return nil, 0, false, false
		}
		c := src[p]
		switch {
		case c == '"':
			*scratch = out
			return out, p + 1, true, true
		case c < 0x20:
			return nil, 0, false, false
		case c != '\\':
			n := p + 1
			for n < len(src) && src[n] != '"' && src[n] != '\\' && src[n] >= 0x20 {
				n++
			}
			if !utf8.Valid(src[p:n]) {
				return nil, 0, false, false
			}
			out = append(out, src[p:n]...)
			p = n
			continue
		}
		if p+1 >= len(src) {
			return nil, 0, false, false
		}
		switch src[p+1] {
		case '"', '\\', '/':
			out = append(out, src[p+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			u, ok := hex4(src, p+2)
			if !ok {
				return nil, 0, false, false
			}
			r := rune(u)
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 || p+11 >= len(src) || src[p+6] != '\\' || src[p+7] != 'u' {
					return nil, 0, false, false
				}
				lo, ok := hex4(src, p+8)
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return nil, 0, false, false
				}
				r = utf16.DecodeRune(r, rune(lo))
				p += 6
			}
			out = utf8.AppendRune(out, r)
			p += 4
		default:
			return nil, 0, false, false
		}
		p += 2
	}
}

// hex4 parses the four hex digits at src[i:i+4].
func hex4(src []byte, i int) (uint16, bool) {
	if i+4 > len(src) {
		return 0, false
	}
	var u uint16
	for _, c := range src[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		u = u<<4 | uint16(c)
	}
	return u, true
}
