package store

import (
	"bytes"
	"slices"
	"unicode/utf8"

	"github.com/weftworks/weft/graph"
)

// evidenceWriter writes the evidence form of JSON documents (what
// EvidenceData returns: sensitive keys redacted, RFC 8785 canonical) in one
// pass over their bytes, with no decoded value in between: members are
// written as they are read and an object whose names are out of order is
// reordered in place. It takes only documents whose evidence it can write
// byte for byte as the decoding way does (TestEvidenceDataMatchesCanonical,
// FuzzEvidenceData) and reports false on anything else, where EvidenceData
// takes that way: invalid JSON (whose error that way words), text that is
// not valid UTF-8 or holds NUL or a lone surrogate (which it replaces), a
// name written with escapes, a number beyond float64's range, nesting
// deeper than maxEvidenceDepth, and anything after the value.
//
// One writer serves the documents of a batch in turn: its buffers are
// reused.
type evidenceWriter struct {
	raw []byte
	// members is a stack: the members read so far of each open object.
	members []evidenceMember
	// scratch holds an object's members while they are reordered.
	scratch []byte
}

// evidenceMember is one object member written: its name as read (a slice
// of the document) and where `"name":value` is in the output.
type evidenceMember struct {
	name       []byte
	start, end int
}

// maxEvidenceDepth bounds the nesting the writer follows (recursively);
// deeper documents take the decoding way, which allows 10,000.
const maxEvidenceDepth = 256

// redactedJSON is Redacted as a canonical JSON string.
const redactedJSON = `"` + Redacted + `"`

// append appends raw's evidence form to dst, reporting false when raw is
// not a document it takes (dst then holds anything).
func (w *evidenceWriter) append(dst, raw []byte) ([]byte, bool) {
	w.raw = raw
	defer func() { w.raw = nil }()
	dst, i, ok := w.value(dst, skipSpace(raw, 0), 0)
	return dst, ok && skipSpace(raw, i) == len(raw)
}

// value appends the value starting at raw[i] and returns the index after it.
func (w *evidenceWriter) value(dst []byte, i, depth int) ([]byte, int, bool) {
	raw := w.raw
	if i >= len(raw) {
		return dst, i, false
	}
	switch c := raw[i]; {
	case c == '{':
		return w.object(dst, i+1, depth+1)
	case c == '[':
		return w.array(dst, i+1, depth+1)
	case c == '"':
		return w.text(dst, i+1)
	case c == 't':
		return literal(dst, raw, i, "true")
	case c == 'f':
		return literal(dst, raw, i, "false")
	case c == 'n':
		return literal(dst, raw, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		end, ok := numberEnd(raw, i)
		if !ok {
			return dst, i, false
		}
		dst, err := graph.AppendCanonicalNumber(dst, raw[i:end])
		return dst, end, err == nil
	}
	return dst, i, false
}

func literal(dst, raw []byte, i int, lit string) ([]byte, int, bool) {
	if !bytes.HasPrefix(raw[i:], []byte(lit)) {
		return dst, i, false
	}
	return append(dst, lit...), i + len(lit), true
}

// numberEnd returns the end of the JSON number starting at raw[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func numberEnd(raw []byte, i int) (int, bool) {
	if i < len(raw) && raw[i] == '-' {
		i++
	}
	switch {
	case i < len(raw) && raw[i] == '0':
		i++
	case i < len(raw) && raw[i] >= '1' && raw[i] <= '9':
		i = digitsEnd(raw, i)
	default:
		return i, false
	}
	if i < len(raw) && raw[i] == '.' {
		j := digitsEnd(raw, i+1)
		if j == i+1 {
			return i, false
		}
		i = j
	}
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		if i < len(raw) && (raw[i] == '+' || raw[i] == '-') {
			i++
		}
		j := digitsEnd(raw, i)
		if j == i {
			return i, false
		}
		i = j
	}
	return i, true
}

func digitsEnd(raw []byte, i int) int {
	for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
		i++
	}
	return i
}

func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

func (w *evidenceWriter) array(dst []byte, i, depth int) ([]byte, int, bool) {
	if depth > maxEvidenceDepth {
		return dst, i, false
	}
	raw := w.raw
	dst = append(dst, '[')
	if i = skipSpace(raw, i); i < len(raw) && raw[i] == ']' {
		return append(dst, ']'), i + 1, true
	}
	for {
		var ok bool
		if dst, i, ok = w.value(dst, i, depth); !ok {
			return dst, i, false
		}
		if i = skipSpace(raw, i); i >= len(raw) {
			return dst, i, false
		}
		switch raw[i] {
		case ',':
			dst = append(dst, ',')
			i = skipSpace(raw, i+1)
		case ']':
			return append(dst, ']'), i + 1, true
		default:
			return dst, i, false
		}
	}
}

// object appends an object: its members as they come, redacted where
// their names are sensitive, then, unless the names came in canonical order
// and each once, reordered, the last of a repeated name winning (as a
// decoder filling a map keeps it).
func (w *evidenceWriter) object(dst []byte, i, depth int) ([]byte, int, bool) {
	if depth > maxEvidenceDepth {
		return dst, i, false
	}
	raw := w.raw
	start := len(dst)
	dst = append(dst, '{')
	if i = skipSpace(raw, i); i < len(raw) && raw[i] == '}' {
		return append(dst, '}'), i + 1, true
	}
	base := len(w.members)
	defer func() { w.members = w.members[:base] }()
	inOrder := true
	for {
		if i >= len(raw) || raw[i] != '"' {
			return dst, i, false
		}
		end, ok := plainNameEnd(raw, i+1)
		if !ok {
			return dst, i, false
		}
		name := raw[i+1 : end]
		if i = skipSpace(raw, end+1); i >= len(raw) || raw[i] != ':' {
			return dst, i, false
		}
		i = skipSpace(raw, i+1)
		if n := len(w.members); n > base {
			inOrder = inOrder && graph.CompareCanonicalKeyBytes(w.members[n-1].name, name) < 0
			dst = append(dst, ',')
		}
		m := evidenceMember{name: name, start: len(dst)}
		dst = append(dst, '"')
		dst = append(dst, name...)
		dst = append(dst, '"', ':')
		valueStart := len(dst)
		if dst, i, ok = w.value(dst, i, depth); !ok {
			return dst, i, false
		}
		if sensitiveName(name) {
			dst = append(dst[:valueStart], redactedJSON...)
		}
		m.end = len(dst)
		w.members = append(w.members, m)
		if i = skipSpace(raw, i); i >= len(raw) {
			return dst, i, false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			if !inOrder {
				dst = w.reorder(dst, start+1, w.members[base:])
			}
			return append(dst, '}'), i + 1, true
		default:
			return dst, i, false
		}
	}
}

// reorder rewrites the members written from dst[from:] in canonical order
// of their names, each name once (its last member).
func (w *evidenceWriter) reorder(dst []byte, from int, members []evidenceMember) []byte {
	w.scratch = append(w.scratch[:0], dst[from:]...)
	slices.SortStableFunc(members, func(a, b evidenceMember) int { return graph.CompareCanonicalKeyBytes(a.name, b.name) })
	dst = dst[:from]
	for k, m := range members {
		if k+1 < len(members) && bytes.Equal(m.name, members[k+1].name) {
			continue // a later member of the same name wins
		}
		if len(dst) > from {
			dst = append(dst, ',')
		}
		dst = append(dst, w.scratch[m.start-from:m.end-from]...)
	}
	return dst
}

// plainNameEnd returns the index of the quote closing the member name that
// starts at raw[i], for a name whose canonical form is the bytes as read:
// valid UTF-8 with no escape and no control character. Any other name
// reports false.
func plainNameEnd(raw []byte, i int) (int, bool) {
	ascii := true
	for j := i; j < len(raw); j++ {
		switch c := raw[j]; {
		case c == '"':
			return j, ascii || utf8.Valid(raw[i:j])
		case c == '\\' || c < 0x20:
			return j, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return len(raw), false
}

// sensitiveName is isSensitiveKey for a name as read, without a copy when
// it is ASCII.
func sensitiveName(name []byte) bool {
	for _, c := range name {
		if c >= utf8.RuneSelf {
			// Lowercasing beyond ASCII can make ASCII ("K", the Kelvin
			// sign, is "k"): the string way knows the tables.
			return isSensitiveKey(string(name))
		}
	}
	for _, p := range sensitiveKeyParts {
		if containsFoldASCII(name, p) {
			return true
		}
	}
	return false
}

// containsFoldASCII reports whether s holds lower (lowercase ASCII) with
// s's ASCII letters taken in lowercase.
func containsFoldASCII(s []byte, lower string) bool {
	for i := 0; i+len(lower) <= len(s); i++ {
		k := 0
		for k < len(lower) {
			c := s[i+k]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != lower[k] {
				break
			}
			k++
		}
		if k == len(lower) {
			return true
		}
	}
	return false
}

// text appends the string whose content starts at raw[i] as an RFC 8785
// string (graph.AppendCanonicalString of its decoded value), decoding
// escapes as it goes.
func (w *evidenceWriter) text(dst []byte, i int) ([]byte, int, bool) {
	raw := w.raw
	dst = append(dst, '"')
	plain := i // start of bytes not yet copied
	for i < len(raw) {
		c := raw[i]
		switch {
		case c == '"':
			return append(append(dst, raw[plain:i]...), '"'), i + 1, true
		case c < 0x20:
			return dst, i, false
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				return dst, i, false
			}
			i += size
			continue
		case c != '\\':
			i++
			continue
		}
		dst = append(dst, raw[plain:i]...)
		r, next, ok := unescape(raw, i)
		if !ok {
			return dst, i, false
		}
		dst = appendCanonicalRune(dst, r)
		i, plain = next, next
	}
	return dst, i, false
}

// unescape decodes the escape at raw[i] (a backslash): its rune and the
// index after it. NUL and a lone surrogate, which the decoding way
// replaces, report false.
func unescape(raw []byte, i int) (rune, int, bool) {
	if i+1 >= len(raw) {
		return 0, i, false
	}
	switch raw[i+1] {
	case '"', '\\', '/':
		return rune(raw[i+1]), i + 2, true
	case 'b':
		return '\b', i + 2, true
	case 'f':
		return '\f', i + 2, true
	case 'n':
		return '\n', i + 2, true
	case 'r':
		return '\r', i + 2, true
	case 't':
		return '\t', i + 2, true
	case 'u':
	default:
		return 0, i, false
	}
	r, ok := hex4(raw, i+2)
	switch {
	case !ok || r == 0:
		return 0, i, false
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, i, false
	case r >= 0xD800 && r <= 0xDBFF:
		if i+7 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
			if lo, ok := hex4(raw, i+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), i + 12, true
			}
		}
		return 0, i, false
	}
	return r, i + 6, true
}

// hex4 decodes the four hex digits at raw[i:].
func hex4(raw []byte, i int) (rune, bool) {
	if i+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// appendCanonicalRune appends r inside an RFC 8785 string, escaped as
// graph.AppendCanonicalString escapes it.
func appendCanonicalRune(dst []byte, r rune) []byte {
	switch r {
	case '"', '\\':
		return append(dst, '\\', byte(r))
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if r < 0x20 {
		const hex = "0123456789abcdef"
		return append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
	}
	return utf8.AppendRune(dst, r)
}
